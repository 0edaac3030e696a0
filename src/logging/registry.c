/*
** logging/registry.c: the logger tree, artifacts, components and the gates.
**
** Loggers form a tree by dotted prefix (Python's logging model): a record is
** printed if its level reaches the origin logger's effective level (its own
** level, else the nearest ancestor's, WARNING at the root) and a handler is
** reachable through loggers that propagate. Component loggers own a handler
** and stop propagation, so every record prints once. The outcome per logger
** is folded into one gate byte, recomputed whenever settings change.
*/
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "logging/log_int.h"

_Atomic unsigned char kn__log_gate[KN__LOG_MAX];

kn__log_global kn__logs = {
    .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP,
    .rank = -1,
    .out_fd = -1,
};

static const char *const builtin_names[] = {
#define KN__LOGGER_NAME(id, qname) qname,
    KN_LOGGER_MAP(KN__LOGGER_NAME)
#undef KN__LOGGER_NAME
};

static const struct {
  const char *name, *desc;
  int owner;
  unsigned flags;
} builtin_artifacts[] = {
#define KN__ARTIFACT_ROW(id, name, owner, flags, desc) {name, desc, owner, flags},
    KN_ARTIFACT_MAP(KN__ARTIFACT_ROW)
#undef KN__ARTIFACT_ROW
};

#define KN__COMPONENT_LIST(id, name, ...) static const int list_##id[] = {__VA_ARGS__, -1};
KN_COMPONENT_MAP(KN__COMPONENT_LIST)
#undef KN__COMPONENT_LIST

static const struct {
  const char *name;
  const int *loggers;
} components[] = {
#define KN__COMPONENT_ROW(id, name, ...) {name, list_##id},
    KN_COMPONENT_MAP(KN__COMPONENT_ROW)
#undef KN__COMPONENT_ROW
};

#define NCOMPONENTS ((int)(sizeof components / sizeof components[0]))

int kn__log_ncomponents(void) { return NCOMPONENTS; }
const char *kn__log_component_name(int c) { return components[c].name; }
const int *kn__log_component_loggers(int c) { return components[c].loggers; }

bool kn__log_valid_qname(const char *s) {
  if (!s || !*s || *s == '.') return false;
  for (const char *p = s; *p; p++) {
    if (*p == '.' && (p[1] == '.' || p[1] == '\0')) return false;
    if (*p != '.' && *p != '_' && !isalnum((unsigned char)*p)) return false;
  }
  return true;
}

int kn__log_find(const char *qname) {
  for (int i = 0; i < kn__logs.nloggers; i++)
    if (!strcmp(kn__logs.loggers[i].name, qname)) return i;
  return -1;
}

int kn__log_find_artifact(const char *name) {
  for (int i = 0; i < kn__logs.nartifacts; i++)
    if (!strcmp(kn__logs.artifacts[i].name, name)) return i;
  return -1;
}

int kn__log_find_component(const char *name) {
  for (int i = 0; i < NCOMPONENTS; i++)
    if (!strcmp(components[i].name, name)) return i;
  return -1;
}

/* Is a a proper dotted prefix of b ("kiln.dynamo" of "kiln.dynamo.x")? */
static bool is_prefix(const char *a, const char *b) {
  size_t n = strlen(a);
  return !strncmp(a, b, n) && b[n] == '.';
}

static void relink_parents(void) {
  for (int i = 0; i < kn__logs.nloggers; i++) {
    const char *name = kn__logs.loggers[i].name;
    int best = -1;
    size_t best_len = 0;
    for (int j = 0; j < kn__logs.nloggers; j++) {
      const char *cand = kn__logs.loggers[j].name;
      if (j != i && is_prefix(cand, name) && strlen(cand) > best_len) {
        best = j;
        best_len = strlen(cand);
      }
    }
    kn__logs.loggers[i].parent = best;
  }
}

static int add_logger(const char *name, int artifact) {
  if (kn__logs.nloggers >= KN__LOG_MAX) return -1;
  int id = kn__logs.nloggers++;
  kn__logs.loggers[id] = (kn__logger){name, -1, artifact, false};
  return id;
}

int kn__log_create(const char *qname) {
  char *copy = strdup(qname);
  if (!copy) return -1;
  int id = add_logger(copy, -1);
  if (id < 0) {
    free(copy);
    return -1;
  }
  atomic_store(&kn__log_gate[id], KN__GATE_OFF);
  relink_parents();
  kn__log_apply(&kn__logs.state);
  return id;
}

static void build_tables(void) {
  for (int i = 0; i < KN__LOG_MAX; i++) atomic_store(&kn__log_gate[i], KN__GATE_OFF);
  for (int i = 0; i < KN__LOGGER_COUNT; i++) add_logger(builtin_names[i], -1);
  static char art_qnames[KN__ARTIFACT_COUNT][96];
  for (int a = 0; a < KN__ARTIFACT_COUNT; a++) {
    snprintf(art_qnames[a], sizeof art_qnames[a], "%s.__%s",
             builtin_names[builtin_artifacts[a].owner], builtin_artifacts[a].name);
    add_logger(art_qnames[a], a);
    kn__logs.artifacts[a] = (kn__artifact){
        builtin_artifacts[a].name, builtin_artifacts[a].desc,
        KN__ART_LOGGER(a), builtin_artifacts[a].flags};
  }
  kn__logs.nartifacts = KN__ARTIFACT_COUNT;
  for (int c = 0; c < NCOMPONENTS; c++)
    for (const int *l = components[c].loggers; *l >= 0; l++)
      kn__logs.loggers[*l].component = true;
  relink_parents();
}

void kn__log_ensure_init(void) {
  if (atomic_load_explicit(&kn__logs.ready, memory_order_acquire)) return;
  pthread_mutex_lock(&kn__logs.lock);
  if (!atomic_load_explicit(&kn__logs.ready, memory_order_relaxed)) {
    build_tables();
    kn__log_read_env_output();
    kn__log_read_env_settings();
    atomic_store_explicit(&kn__logs.ready, true, memory_order_release);
  }
  pthread_mutex_unlock(&kn__logs.lock);
}

void kn__log_state_default(kn__log_state *st) {
  memset(st, 0, sizeof *st);
  st->level[KN_LOG_KILN] = KN_WARNING;
}

static bool has_own_handler(const kn__log_state *st, int id) {
  return kn__logs.loggers[id].component || st->handler[id];
}

static bool propagates(const kn__log_state *st, int id) {
  if (has_own_handler(st, id)) return false;
  int a = kn__logs.loggers[id].artifact;
  if (a < 0) return true;
  return st->art_on[a] || !(kn__logs.artifacts[a].flags & KN_ARTIFACT_OFF_BY_DEFAULT);
}

bool kn__log_has_handler(const kn__log_state *st, int id, bool self) {
  if (self && has_own_handler(st, id)) return true;
  for (int p = kn__logs.loggers[id].parent; p >= 0; p = kn__logs.loggers[p].parent)
    if (has_own_handler(st, p)) return true;
  return false;
}

static int own_level(const kn__log_state *st, int id) {
  int a = kn__logs.loggers[id].artifact;
  if (a >= 0 && st->art_on[a]) return KN_DEBUG;
  return st->level[id];
}

static int gate_of(const kn__log_state *st, int id) {
  int eff = KN_WARNING; /* the root logger's level */
  for (int p = id; p >= 0; p = kn__logs.loggers[p].parent) {
    int l = own_level(st, p);
    if (l) {
      eff = l;
      break;
    }
  }
  for (int p = id; p >= 0; p = kn__logs.loggers[p].parent) {
    if (has_own_handler(st, p)) return eff;
    if (!propagates(st, p)) break;
  }
  return KN__GATE_OFF;
}

void kn__log_apply(const kn__log_state *st) {
  if (st != &kn__logs.state) kn__logs.state = *st;
  for (int i = 0; i < kn__logs.nloggers; i++)
    atomic_store_explicit(&kn__log_gate[i], (unsigned char)gate_of(&kn__logs.state, i),
                          memory_order_relaxed);
}

/* ---- public registration ------------------------------------------------ */

kn_status kn_log_get_logger(const char *qname, kn_logger_id *out) {
  if (!out) return kn__error(KN_EINVAL, "kn_log_get_logger: the output pointer is NULL");
  if (!kn__log_valid_qname(qname))
    return kn__error(KN_EINVAL, "expected a dotted logger name like \"kiln.myext\", found \"%s\"",
                     qname ? qname : "(null)");
  kn__log_ensure_init();
  pthread_mutex_lock(&kn__logs.lock);
  int id = kn__log_find(qname);
  if (id < 0) id = kn__log_create(qname);
  pthread_mutex_unlock(&kn__logs.lock);
  if (id < 0)
    return kn__error(KN_ERANGE, "logger table is full (%d loggers); cannot add \"%s\"",
                     KN__LOG_MAX, qname);
  *out = id;
  return KN_OK;
}

static kn_status register_locked(const char *name, const char *owner, const char *desc,
                                 unsigned flags, kn_logger_id *out) {
  if (kn__log_find_artifact(name) >= 0)
    return kn__error(KN_EINVAL, "artifact \"%s\" is already registered", name);
  if (kn__logs.nartifacts >= KN__ART_MAX)
    return kn__error(KN_ERANGE, "artifact table is full (%d artifacts)", KN__ART_MAX);
  int o = kn__log_find(owner);
  if (o < 0 && (o = kn__log_create(owner)) < 0) return kn__oom();
  size_t n = strlen(owner) + strlen(name) + 4;
  char *qname = malloc(n), *name_copy = strdup(name), *desc_copy = strdup(desc);
  int a = kn__logs.nartifacts;
  int id = -1;
  if (qname && name_copy && desc_copy) {
    snprintf(qname, n, "%s.__%s", owner, name);
    id = add_logger(qname, a);
  }
  if (id < 0) {
    free(qname), free(name_copy), free(desc_copy);
    return kn__error(KN_ERANGE, "cannot add artifact \"%s\": out of memory or logger "
                     "table full", name);
  }
  kn__logs.artifacts[a] = (kn__artifact){name_copy, desc_copy, id, flags};
  kn__logs.nartifacts++;
  relink_parents();
  kn__log_apply(&kn__logs.state);
  *out = id;
  return KN_OK;
}

kn_status kn_log_register_artifact(const char *name, const char *owner_qname,
                                   const char *description, unsigned flags,
                                   kn_logger_id *out) {
  if (!out) return kn__error(KN_EINVAL, "kn_log_register_artifact: the output pointer is NULL");
  if (!name || !*name || !kn__log_valid_qname(name) || strchr(name, '.'))
    return kn__error(KN_EINVAL, "expected an artifact name of word characters, found \"%s\"",
                     name ? name : "(null)");
  if (!kn__log_valid_qname(owner_qname))
    return kn__error(KN_EINVAL, "expected a dotted owner logger name, found \"%s\"",
                     owner_qname ? owner_qname : "(null)");
  kn__log_ensure_init();
  pthread_mutex_lock(&kn__logs.lock);
  kn_status s = register_locked(name, owner_qname, description ? description : "", flags, out);
  pthread_mutex_unlock(&kn__logs.lock);
  return s;
}

bool kn_log_enabled(kn_logger_id id, int level) {
  if (id < 0 || id >= KN__LOG_MAX) return false;
  if (!atomic_load_explicit(&kn__logs.ready, memory_order_acquire)) kn__log_ensure_init();
  return atomic_load_explicit(&kn__log_gate[id], memory_order_relaxed) <= level;
}
