/*
** inductor/codecache.c: the caches of compiled code.
**
** In memory: a process-wide table key -> loaded entry point (loaded code is
** never unmapped). On disk, under the cache root (KILN_CACHE_DIR, else
** $XDG_CACHE_HOME/kiln, else ~/.cache/kiln), subdirectory "inductor":
**   <key>.c      the source (what inductor_output_code names)
**   <key>.so     the shared object
**   <key>.meta   its size, SHA-256 and CPU target (toolchain.h)
**   <gkey>.fxg   a graph key naming its source's key
** key = SHA-256 of the source, the compiler's resolved path, size and mtime
** (its identity: an upgrade changes it), the flags, the CPU target
** (core/cputarget.h), kiln's version and the ABI.
**
** The directory and every file read from it are checked under the trust
** rules of core/cachefs.h (docs/INDUCTOR.md, "Trust rules"): a directory
** that fails them is not used (one warning; compiles then happen in a
** private temporary directory), an entry that fails them (a link, a FIFO,
** another user's file, a .so whose size or digest differs from its .meta, a
** .meta for another CPU) is logged and rebuilt. The shared object loaded is
** the one checked, through its descriptor.
**
** A compile happens in a private directory <key>.tmp.<pid>-<ns>.<random>
** (0700) inside the cache directory; the results are renamed into place, so
** a reader never sees a partial file, two processes compiling the same
** graph both succeed, and `kiln cache --clear` (which leaves running
** compiles' temporaries alone) never breaks a compile. Before compiling, a
** process removes the stale temporaries of ended compiles.
**
** Tiered compiles (KILN_INDUCTOR_TIERED=1, below): a miss loads a fast
** first-tier build at once and makes the optimised one in a background
** thread, which records it and swaps it into the graph's kn__ind_tier.
*/
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sha2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cachefs.h"
#include "core/codeid.h"
#include "core/cputarget.h"
#include "core/error.h"
#include "inductor/toolchain.h"
#include "logging/log.h"
#include "trace/events.h"

/* ---- the memory cache --------------------------------------------------------- */
typedef struct mem_entry { char key[65]; kn__ind_call_fn call; struct mem_entry *next; } mem_entry;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_entry *mem_head;

static kn__ind_call_fn mem_find(const char *key) {
  pthread_mutex_lock(&mem_lock);
  kn__ind_call_fn fn = NULL;
  for (mem_entry *e = mem_head; e && !fn; e = e->next)
    if (!strcmp(e->key, key)) fn = e->call;
  pthread_mutex_unlock(&mem_lock);
  return fn;
}

static void mem_add(const char *key, kn__ind_call_fn fn) {
  mem_entry *e = calloc(1, sizeof *e);
  if (!e) return; /* only a missed cache hit later */
  memcpy(e->key, key, 65);
  e->call = fn;
  pthread_mutex_lock(&mem_lock);
  e->next = mem_head;
  mem_head = e;
  pthread_mutex_unlock(&mem_lock);
}

void kn__ind_cache_forget_memory(void) {
  pthread_mutex_lock(&mem_lock);
  while (mem_head) {
    mem_entry *e = mem_head;
    mem_head = e->next;
    free(e);
  }
  pthread_mutex_unlock(&mem_lock);
}

/* ---- keys ----------------------------------------------------------------------- */
static void digest(const char *const *parts, size_t n, char key[65]) {
  SHA2_CTX ctx;
  SHA256Init(&ctx);
  for (size_t i = 0; i < n; i++)
    SHA256Update(&ctx, (const uint8_t *)parts[i], strlen(parts[i]) + 1);
  SHA256End(&ctx, key);
}

static void cache_key(const char *src, const kn__ind_tool *t, char key[65]) {
  const char *parts[] = {src, t->ident, t->flags, kn__cpu_target(), kn_version(), "abi 1",
                         t->target->name};
  digest(parts, sizeof parts / sizeof parts[0], key);
}

static void graph_key(const char *text, const kn__ind_tool *t, char key[65]) {
  char kid[4400];
  kn__code_ident(kid, sizeof kid); /* a rebuilt kiln never reuses an older one's entries */
  const char *parts[] = {"kiln-inductor-graph", text, t->ident, t->flags, kn__cpu_target(),
                         kn_version(), kid, "abi 1", t->target->name};
  digest(parts, sizeof parts / sizeof parts[0], key);
}

/* ---- reporting -------------------------------------------------------------------- */
static atomic_bool warned_dir, warned_noexec;

static void artifact(const char *name, const char *key, const char *reason) {
  if (!kn__trace_enabled()) return;
  json_t *j = json_pack("{s:s, s:s}", "key", key, "reason", reason);
  if (j) kn__trace_artifact_json(name, j, NULL);
  json_decref(j);
}

/* path made absolute as Python's os.path.abspath does: joined to the
** working directory when relative, "." and "x/.." segments and repeated
** slashes dropped (symbolic links are not resolved). False if it does not fit. */
static bool abs_path(const char *path, char *out, size_t n) {
  char joined[8400];
  if (path[0] != '/' && !getcwd(joined, sizeof joined - 1)) return false;
  size_t cl = path[0] == '/' ? 0 : strlen(joined);
  if (snprintf(joined + cl, sizeof joined - cl, "/%s", path) >= (int)(sizeof joined - cl)) return false;
  size_t len = 0;
  for (char *save = NULL, *seg = strtok_r(joined, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
    if (!strcmp(seg, ".")) continue;
    if (!strcmp(seg, "..")) { /* back to the previous '/' */
      while (len > 0 && out[--len] != '/') {}
      continue;
    }
    int w = snprintf(out + len, n - len, "/%s", seg);
    if (w < 0 || (size_t)w >= n - len) return false;
    len += (size_t)w;
  }
  if (len == 0 && n > 1) out[len++] = '/';
  out[len] = '\0';
  return true;
}

/* The GPU kernels of a CUDA source, as the triton_kernel_info artifact's
** payload: {"kernel4": "add (grid-stride, flat, 1 inputs)", ...} (each
** kernel's name and its header comment: the nodes it computes and how it is
** launched). NULL for a source without GPU kernels (the C targets). */
static json_t *kernel_info(const char *src) {
  static const char head[] = "/* kernel ", decl[] = "*/\nextern \"C\" __global__ void ";
  json_t *j = NULL;
  for (const char *p = strstr(src, head); p; p = strstr(p + 1, head)) {
    const char *colon = strchr(p, ':'), *end = strstr(p, decl);
    if (!colon || !end || strchr(p, '\n') < end) continue;
    const char *name = end + sizeof decl - 1, *paren = strchr(name, '(');
    if (!paren) continue;
    char key[64], text[512];
    snprintf(key, sizeof key, "%.*s", (int)(paren - name), name);
    snprintf(text, sizeof text, "%.*s", (int)(end - colon - 3 > 0 ? end - colon - 3 : 0),
             colon + 2);
    if (!j) j = json_object();
    if (j) json_object_set_new(j, key, json_string(text));
  }
  return j;
}

/* The inductor_output_code record (filename: the path kiln wrote the source
** to; file_path: the same made absolute, as PyTorch writes it), then for GPU
** code the triton_kernel_info artifact (kernel_info), and the output_code
** log artifact. */
static void output_code(const char *src, const char *path) {
  KN_LOG_ARTIFACT(KN_ART_OUTPUT_CODE, "Output code written to: %s\nOutput code: \n%s", path, src);
  if (!kn__trace_enabled()) return;
  char abs[4400];
  json_t *md = json_pack("{s:s, s:s}", "filename", path, "file_path",
                         abs_path(path, abs, sizeof abs) ? abs : path);
  kn__trace_opts o = {.file = __FILE__, .line = __LINE__};
  if (md) (void)kn__trace_structured("inductor_output_code", md, src, SIZE_MAX, &o);
  json_t *info = kernel_info(src);
  if (info) (void)kn__trace_artifact_json("triton_kernel_info", info, NULL);
  json_decref(info);
}

/* ---- the cache directory and its entries ------------------------------------------ */

/* Open the cache's inductor directory under the trust rules; false (after
** one warning per process) when there is none to use. */
static bool cache_open(kn__cachedir *cd) {
  char root[KN__CACHE_PATH_CAP];
  kn_status st = kn__cache_root(root, NULL);
  if (st == KN_OK) st = kn__cachedir_open(root, "inductor", true, cd);
  if (st == KN_OK) return true;
  if (!atomic_exchange(&warned_dir, true))
    KN_LOG(KN_LOG_INDUCTOR_CODECACHE, KN_WARNING, "inductor: %s; compiling without a disk cache "
           "(in a private temporary directory; see \"Trust rules\" in docs/INDUCTOR.md)",
           kn_last_error());
  return false;
}

/* Load the shared object open on fd, kept in directory cd. */
static kn_status load_fd(const kn__ind_tool *t, const kn__cachedir *cd, int fd, const char *shown, kn__ind_call_fn *fn) {
  if (cd->noexec && !atomic_exchange(&warned_noexec, true))
    KN_LOG(KN_LOG_INDUCTOR_CODECACHE, KN_WARNING, "inductor: '%s' is on a file system mounted "
           "noexec; compiled code is loaded from in-memory copies instead (set KILN_CACHE_DIR "
           "to a directory on an exec mount to load it in place)", cd->path);
  kn__ind_phase ph;
  kn__ind_phase_begin(&ph, "inductor_load");
  kn_status st = t->target->load(fd, cd->noexec, shown, fn);
  kn__ind_phase_end(&ph);
  return st;
}

/* The SHA-256 of fd's bytes and their number. */
static bool hash_fd(int fd, char hex[65], long long *len) {
  SHA2_CTX c;
  SHA256Init(&c);
  char buf[16384];
  long long off = 0;
  for (;;) {
    ssize_t r = pread(fd, buf, sizeof buf, off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;
    SHA256Update(&c, (const uint8_t *)buf, (size_t)r);
    off += r;
  }
  SHA256End(&c, hex);
  *len = off;
  return true;
}

/* Read <key>.meta and check that it describes key on this CPU. */
static bool read_meta(const kn__cachedir *cd, const char *key, kn__ind_meta *m, char *why,
                      size_t n) {
  char name[80], pwhy[80];
  size_t len;
  bool missing;
  snprintf(name, sizeof name, "%s.meta", key);
  char *s = kn__cache_read(cd->fd, name, KN__IND_META_MAX, &len, &missing, why, n);
  if (!s) return false;
  bool ok = kn__ind_meta_parse(s, len, m, pwhy, sizeof pwhy);
  free(s);
  if (!ok || strcmp(m->key, key))
    return snprintf(why, n, "foreign or corrupted cache entry (bad .meta: %s)",
                    ok ? "another key" : pwhy), false;
  if (strcmp(m->target, kn__cpu_target()))
    return snprintf(why, n, "compiled for another CPU (target %s; this CPU is %s)", m->target,
                    kn__cpu_target()), false;
  return true;
}

/* Open <key>.so and check it against m; -1 with why. */
static int open_so(const kn__cachedir *cd, const kn__ind_meta *m, char *why, size_t n) {
  char name[80], dig[65];
  bool missing;
  struct stat sb;
  long long len = -1;
  snprintf(name, sizeof name, "%s.so", m->key);
  int fd = kn__cache_open(cd->fd, name, KN__IND_SO_MAX, &sb, &missing, why, n);
  if (fd < 0 && missing) snprintf(why, n, "cache entry without its .so");
  if (fd < 0) return -1;
  if ((long long)sb.st_size != m->size || !hash_fd(fd, dig, &len) || len != m->size ||
      strcmp(dig, m->sha256)) {
    close(fd);
    return snprintf(why, n, "truncated or corrupted .so (size or SHA-256 differs from .meta)"), -1;
  }
  return fd;
}

/* Load entry key: true, or false with why ("not in cache": a plain miss). */
static bool entry_load(const kn__ind_tool *t, const kn__cachedir *cd, const char *key, kn__ind_call_fn *fn, char *why,
                       size_t n) {
  kn__ind_meta m;
  if (!read_meta(cd, key, &m, why, n)) return false;
  int fd = open_so(cd, &m, why, n);
  if (fd < 0) return false;
  char shown[KN__CACHE_PATH_CAP + 80];
  snprintf(shown, sizeof shown, "%s/%s.so", cd->path, key);
  kn_status st = load_fd(t, cd, fd, shown, fn);
  close(fd);
  if (st != KN_OK) snprintf(why, n, "cannot be loaded (%.400s)", kn_last_error());
  return st == KN_OK;
}

/* ---- compiling ---------------------------------------------------------------------- */
typedef struct build {
  const kn__cachedir *in;              /* the directory it is made in */
  char name[256];                      /* its name there */
  char dir[KN__CACHE_PATH_CAP + 256];  /* its path */
  int fd;
} build;

/* Make the private build directory for key in d. */
static kn_status build_open(build *b, const kn__cachedir *d, const char *key) {
  *b = (build){.in = d, .fd = -1};
  kn_status st = kn__cache_mkdtemp(d->fd, key, b->name, sizeof b->name);
  if (st != KN_OK) return st;
  snprintf(b->dir, sizeof b->dir, "%s/%s", d->path, b->name);
  b->fd = openat(d->fd, b->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return b->fd >= 0 ? KN_OK : kn__error(KN_EIO, "inductor: cannot open '%s': %s", b->dir,
                                        strerror(errno));
}

static void build_close(build *b) {
  if (b->fd >= 0) close(b->fd);
  if (b->name[0]) kn__cache_remove_tmp(b->in->fd, b->name);
}

/* Write the source and compile it in b; the checked shared object's
** descriptor into *so. */
static kn_status build_run(const kn__ind_tool *t, build *b, const char *key, const char *src,
                           const char *shown, int *so) {
  char c[80], o[80], why[300];
  snprintf(c, sizeof c, "%s.c", key);
  snprintf(o, sizeof o, "%s.so", key);
  kn_status st = kn__cache_write(b->fd, c, src, strlen(src));
  if (st != KN_OK) return st;
  kn__ind_phase ph;
  kn__ind_phase_begin(&ph, "inductor_cc");
  st = t->target->compile(t, b->dir, c, o, shown);
  kn__ind_phase_end(&ph);
  bool missing;
  if (st == KN_OK && (*so = kn__cache_open(b->fd, o, KN__IND_SO_MAX, NULL, &missing, why,
                                           sizeof why)) < 0)
    st = kn__error(KN_EIO, "inductor: the compiler's output in '%s' is unusable: %s", b->dir, why);
  return st;
}

/* Move the checked .so (open on so) into place and record its .meta; a
** failure only means a later miss. */
static void record(build *b, const char *key, int so) {
  kn__ind_meta m;
  char name[80], text[KN__IND_META_MAX];
  snprintf(m.key, sizeof m.key, "%s", key);
  snprintf(m.target, sizeof m.target, "%s", kn__cpu_target());
  snprintf(name, sizeof name, "%s.so", key);
  if (!hash_fd(so, m.sha256, &m.size) || renameat(b->fd, name, b->in->fd, name) != 0) return;
  int len = kn__ind_meta_format(&m, text, sizeof text);
  snprintf(name, sizeof name, "%s.meta", key);
  (void)kn__cache_write(b->in->fd, name, text, (size_t)len);
}

static kn_status build_cached(const kn__ind_tool *t, const kn__cachedir *cd, const char *key,
                              const char *src, kn__ind_call_fn *fn) {
  char shown[KN__CACHE_PATH_CAP + 80], c[80];
  snprintf(shown, sizeof shown, "%s/%s.c", cd->path, key);
  snprintf(c, sizeof c, "%s.c", key);
  build b;
  int so = -1;
  kn_status st = build_open(&b, cd, key);
  if (st == KN_OK) st = build_run(t, &b, key, src, shown, &so);
  if (b.fd >= 0) (void)renameat(b.fd, c, cd->fd, c); /* the source, also after a failure */
  if (so >= 0) {
    record(&b, key, so);
    snprintf(shown, sizeof shown, "%s/%s.so", cd->path, key);
    st = load_fd(t, cd, so, shown, fn);
    close(so);
  }
  build_close(&b);
  return st;
}

/* No cache directory to use: compile in a private temporary one, then
** remove it. */
static kn_status build_bypass(const kn__ind_tool *t, const char *src, const char *key,
                              const char *akey, kn__ind_call_fn *fn) {
  const char *tmp = getenv("TMPDIR");
  kn__cachedir td;
  kn_status st = kn__cachedir_open_tmp(tmp && *tmp ? tmp : "/tmp", &td);
  if (st != KN_OK && tmp && *tmp) st = kn__cachedir_open_tmp("/tmp", &td);
  if (st != KN_OK)
    return kn__error(KN_EIO, "inductor: no private directory to compile in: %.600s",
                     kn_last_error());
  build b;
  char shown[sizeof b.dir + 80];
  int so = -1;
  st = build_open(&b, &td, key);
  snprintf(shown, sizeof shown, "%s/%s.c", b.dir, key);
  output_code(src, shown);
  artifact("fx_graph_cache_bypass", akey, "cache directory not usable");
  if (st == KN_OK) st = build_run(t, &b, key, src, shown, &so);
  if (so >= 0) {
    st = load_fd(t, &td, so, shown, fn);
    close(so);
  }
  build_close(&b);
  kn__cachedir_close(&td);
  return st;
}

/* ---- tiered compiles ------------------------------------------------------------------
** KILN_INDUCTOR_TIERED=1: on a miss, the source is first compiled with the
** target's fast flags appended (tg->fast_cflags: "-O1") in a private build
** directory and loaded (never recorded: the cache keeps only optimised
** builds); the call returns with it, and a background thread compiles the
** optimised build as an ordinary miss would (recorded under the same key),
** then swaps it into the graph's kn__ind_tier. */
typedef struct tier_job {
  kn__ind_tool t;
  kn__ind_tier *tier;
  char key[65], gkey[65];
  bool by_graph;
  char *src;
} tier_job;

static pthread_mutex_t tier_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tier_done = PTHREAD_COND_INITIALIZER;
static int tier_pending;
static atomic_bool warned_tiered;

bool kn__ind_tiered(void) {
  return KN_LOG_ENV_FLAG("KILN_INDUCTOR_TIERED", false, KN_LOG_INDUCTOR, &warned_tiered,
                         "tiered compiles stay off");
}

void kn__ind_tier_release(kn__ind_tier *t) {
  if (t && atomic_fetch_sub(&t->refs, 1) == 1) free(t);
}

void kn__ind_tier_wait(void) {
  pthread_mutex_lock(&tier_lock);
  while (tier_pending > 0) pthread_cond_wait(&tier_done, &tier_lock);
  pthread_mutex_unlock(&tier_lock);
}

static kn_status build_cached(const kn__ind_tool *t, const kn__cachedir *cd, const char *key,
                              const char *src, kn__ind_call_fn *fn);
static void graph_record(const kn__cachedir *cd, const char *gkey, const char *key);

/* The optimised build of a job, swapped in when loaded. */
static void tier_finish(tier_job *j) {
  kn__cachedir cd;
  kn__ind_call_fn fn = NULL;
  bool opened = cache_open(&cd);
  kn_status st = opened ? build_cached(&j->t, &cd, j->key, j->src, &fn) : kn_last_status();
  if (st == KN_OK) {
    mem_add(j->key, fn);
    if (j->by_graph) {
      graph_record(&cd, j->gkey, j->key);
      mem_add(j->gkey, fn);
    }
    atomic_store_explicit(&j->tier->call, fn, memory_order_release);
    atomic_store(&j->tier->optimised, true);
    KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: tiered: the optimised build of %s is in use",
           j->key);
  } else {
    KN_LOG(KN_LOG_INDUCTOR, KN_WARNING, "inductor: tiered: the optimised build of %s failed; the "
           "first tier's code stays in use: %s", j->key, kn_last_error());
  }
  if (opened) kn__cachedir_close(&cd);
  kn__ind_tier_release(j->tier);
  free(j->src);
  free(j);
  pthread_mutex_lock(&tier_lock);
  if (--tier_pending == 0) pthread_cond_broadcast(&tier_done);
  pthread_mutex_unlock(&tier_lock);
}

static void *tier_thread(void *arg) {
  tier_finish(arg);
  return NULL;
}

/* Start the optimised build of key in the background (inline when no thread
** can be started). */
static void tier_start(const kn__ind_tool *t, kn__ind_tier *tier, const char *key,
                       const char *gkey, bool by_graph, const char *src) {
  tier_job *j = calloc(1, sizeof *j);
  char *copy = strdup(src);
  if (!j || !copy) {
    free(j);
    free(copy);
    KN_LOG(KN_LOG_INDUCTOR, KN_WARNING, "inductor: tiered: out of memory; the first tier's code "
           "of %s stays in use", key);
    return;
  }
  *j = (tier_job){.t = *t, .tier = tier, .by_graph = by_graph, .src = copy};
  memcpy(j->key, key, 65);
  memcpy(j->gkey, gkey, 65);
  atomic_fetch_add(&tier->refs, 1);
  pthread_mutex_lock(&tier_lock);
  tier_pending++;
  pthread_mutex_unlock(&tier_lock);
  pthread_attr_t at;
  pthread_t th;
  bool started = pthread_attr_init(&at) == 0;
  if (started) {
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    started = pthread_create(&th, &at, tier_thread, j) == 0;
    pthread_attr_destroy(&at);
  }
  if (!started) tier_finish(j);
}

/* The first tier of src (key) in a private build directory of cd: compiled
** with the fast flags, loaded, not recorded. */
static kn_status tier_fast(const kn__ind_tool *t, const kn__cachedir *cd, const char *key,
                           const char *src, kn__ind_call_fn *fn) {
  kn__ind_tool fast = *t;
  size_t len = strlen(fast.flags);
  snprintf(fast.flags + len, sizeof fast.flags - len, " %s", t->target->fast_cflags);
  char shown[KN__CACHE_PATH_CAP + 80];
  snprintf(shown, sizeof shown, "%s/%s.c", cd->path, key);
  build b;
  int so = -1;
  kn_status st = build_open(&b, cd, key);
  if (st == KN_OK) st = build_run(&fast, &b, key, src, shown, &so);
  if (so >= 0) {
    st = load_fd(&fast, cd, so, shown, fn);
    close(so);
  }
  build_close(&b);
  return st;
}

/* A miss under tiered compiles: the first tier now, the optimised build
** behind it; out->tier set. Without a fast tier for the target, or when the
** first tier fails, the ordinary build. */
static kn_status build_tiered(const kn__ind_tool *t, const kn__cachedir *cd, const char *key,
                              const char *src, const char *gkey, bool by_graph,
                              kn__ind_loaded *out) {
  if (!t->target->fast_cflags) return build_cached(t, cd, key, src, &out->call);
  kn__ind_call_fn fn = NULL;
  if (tier_fast(t, cd, key, src, &fn) != KN_OK) {
    KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: tiered: the first tier of %s failed (%s); "
           "building the optimised one now", key, kn_last_error());
    return build_cached(t, cd, key, src, &out->call);
  }
  kn__ind_tier *tier = calloc(1, sizeof *tier);
  if (!tier) return build_cached(t, cd, key, src, &out->call);
  atomic_init(&tier->call, fn);
  atomic_init(&tier->refs, 1);
  atomic_init(&tier->optimised, false);
  out->call = fn;
  out->tier = tier;
  KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: tiered: %s runs its first tier (%s); the "
         "optimised build follows in the background", key, t->target->fast_cflags);
  tier_start(t, tier, key, gkey, by_graph, src);
  return KN_OK;
}

static kn_status load_disk(const kn__ind_tool *t, const char *src, const kn__cachedir *cd,
                           const char *key, const char *akey, bool by_graph, kn__ind_loaded *out) {
  kn__ind_call_fn *fn = &out->call;
  char why[600] = "", shown[KN__CACHE_PATH_CAP + 80];
  snprintf(shown, sizeof shown, "%s/%s.c", cd->path, key);
  if (entry_load(t, cd, key, fn, why, sizeof why)) {
    output_code(src, shown);
    artifact("fx_graph_cache_hit", akey, "found on disk");
    return KN_OK;
  }
  if (strcmp(why, "not in cache"))
    KN_LOG(KN_LOG_INDUCTOR_CODECACHE, KN_WARNING, "inductor cache: %s/%s: %s; rebuilding",
           cd->path, key, why);
  output_code(src, shown); /* the seeds' order: output code, then the cache artifact */
  artifact("fx_graph_cache_miss", akey, why);
  int swept = kn__cache_sweep(cd->fd, t->timeout_s);
  if (swept)
    KN_LOG(KN_LOG_INDUCTOR_CODECACHE, KN_INFO, "inductor cache: removed %d stale temporar%s of "
           "ended compiles from %s", swept, swept == 1 ? "y" : "ies", cd->path);
  if (kn__ind_tiered()) return build_tiered(t, cd, key, src, akey, by_graph, out);
  return build_cached(t, cd, key, src, fn);
}

/* Find the source's shared object in memory, on disk (cd; NULL: no disk
** cache), or build it; artifacts name akey (the graph key). */
static kn_status load_source(const kn__ind_tool *t, const char *src, const char *akey,
                             bool by_graph, const kn__cachedir *cd, kn__ind_loaded *out) {
  cache_key(src, t, out->key);
  out->call = mem_find(out->key);
  if (out->call) {
    artifact("fx_graph_cache_hit", akey, "found in memory");
    return KN_OK;
  }
  kn_status st = cd ? load_disk(t, src, cd, out->key, akey, by_graph, out)
                    : build_bypass(t, src, out->key, akey, &out->call);
  if (st == KN_OK && !out->tier) mem_add(out->key, out->call); /* a tier's: when optimised */
  return st;
}

/* ---- the graph key ------------------------------------------------------------------ */

/* The source file's text when someone will read it (output_code), else NULL. */
static char *read_source(const kn__cachedir *cd, const char *key) {
  if (!kn__trace_enabled() && !KN_ARTIFACT_ENABLED(KN_ART_OUTPUT_CODE)) return NULL;
  char name[80], why[300];
  size_t len;
  bool missing;
  snprintf(name, sizeof name, "%s.c", key);
  return kn__cache_read(cd->fd, name, (size_t)64 << 20, &len, &missing, why, sizeof why);
}

/* <gkey>.fxg names the source key of a graph; a hit loads its .so without
** generating code. */
static bool graph_hit(const kn__ind_tool *t, const kn__cachedir *cd, const char *gkey, kn__ind_loaded *out) {
  char name[80], g[65], k[65], why[600];
  size_t len;
  bool missing;
  snprintf(name, sizeof name, "%s.fxg", gkey);
  char *s = kn__cache_read(cd->fd, name, KN__IND_META_MAX, &len, &missing, why, sizeof why);
  if (!s && missing) return false;
  bool ok = s && kn__ind_fxg_parse(s, len, g, k) && !strcmp(g, gkey);
  if (s && !ok) snprintf(why, sizeof why, "bad .fxg");
  free(s);
  if (!ok || !entry_load(t, cd, k, &out->call, why, sizeof why)) {
    KN_LOG(KN_LOG_INDUCTOR_CODECACHE, KN_DEBUG, "inductor cache: graph entry %s/%s unusable (%s)",
           cd->path, name, why);
    return false;
  }
  memcpy(out->key, k, 65);
  char *src = read_source(cd, k), path[KN__CACHE_PATH_CAP + 80];
  snprintf(path, sizeof path, "%s/%s.c", cd->path, k);
  if (src) output_code(src, path);
  free(src);
  artifact("fx_graph_cache_hit", gkey, "found on disk");
  return true;
}

static void graph_record(const kn__cachedir *cd, const char *gkey, const char *key) {
  char name[80], line[200];
  snprintf(name, sizeof name, "%s.fxg", gkey);
  int len = kn__ind_fxg_format(gkey, key, line, sizeof line);
  (void)kn__cache_write(cd->fd, name, line, (size_t)len);
}

kn_status kn__ind_load_graph(const char *graph_text, bool by_graph, const kn__ind_target *tg,
                             kn__ind_gen_fn gen, void *ud, kn__ind_loaded *out) {
  kn__ind_tool *t = calloc(1, sizeof *t);
  if (!t) return kn__oom();
  kn__ind_tool_init(t, tg);
  out->tier = NULL;
  char gkey[65];
  graph_key(graph_text, t, gkey);
  memcpy(out->graph_key, gkey, 65);
  kn_status st = KN_OK;
  if (by_graph && (out->call = mem_find(gkey))) {
    artifact("fx_graph_cache_hit", gkey, "found in memory");
    free(t);
    return KN_OK;
  }
  kn__cachedir cd;
  bool dir_ok = cache_open(&cd);
  if (!(by_graph && dir_ok && graph_hit(t, &cd, gkey, out))) {
    char *src = gen(ud);
    st = src ? load_source(t, src, gkey, by_graph, dir_ok ? &cd : NULL, out) : kn_last_status();
    free(src);
    if (st == KN_OK && dir_ok && by_graph && !out->tier) graph_record(&cd, gkey, out->key);
  }
  if (st == KN_OK && by_graph && !out->tier) mem_add(gkey, out->call);
  kn__cachedir_close(&cd);
  free(t);
  return st;
}
