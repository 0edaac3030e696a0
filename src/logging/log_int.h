/*
** logging/log_int.h: the logging module's shared state, for its own files.
**
** One process-wide struct (kn__logs) holds the logger table, the artifact
** table, the current settings and the output configuration. Every write and
** every read other than the gate bytes happens under kn__logs.lock, which is
** recursive so a sink may log. Loggers and artifacts are never removed.
*/
#ifndef KN_LOGGING_LOG_INT_H
#define KN_LOGGING_LOG_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "core/strbuf.h"
#include "logging/log.h"

typedef struct kn__logger {
  const char *name;  /* qname; built-ins point at the table, others owned */
  int parent;        /* longest existing dotted prefix, or -1 */
  int artifact;      /* artifact index for an artifact logger, else -1 */
  bool component;    /* named by a component: gets its own handler */
} kn__logger;

typedef struct kn__artifact {
  const char *name, *desc; /* built-ins static, user ones owned */
  int logger;              /* the artifact logger "<owner>.__<name>" */
  unsigned flags;          /* KN_ARTIFACT_* */
} kn__artifact;

/* One complete log setting (what KILN_LOGS or one kn_set_logs describes). */
typedef struct kn__log_state {
  unsigned char level[KN__LOG_MAX]; /* explicit level per logger; 0: none */
  bool handler[KN__LOG_MAX];        /* a named logger without a registered
                                       ancestor becomes a log of its own */
  bool art_on[KN__ART_MAX];
} kn__log_state;

#define KN__SINK_MAX 8

typedef struct kn__log_sink {
  kn_log_sink_fn fn;
  void *userdata;
  unsigned flags;
} kn__log_sink;

typedef struct kn__log_global {
  pthread_mutex_t lock;
  _Atomic bool ready;       /* tables built and the environment read */
  int nloggers, nartifacts;
  kn__logger loggers[KN__LOG_MAX];
  kn__artifact artifacts[KN__ART_MAX];
  kn__log_state state;      /* the settings in force */
  bool env_logs;            /* KILN_LOGS is present: it wins over the API */
  int rank;                 /* -1: no rank prefix */
  int out_fd;               /* KILN_LOGS_OUT, or -1 */
  char *out_path;           /* its path (owned), or NULL */
  char *format;             /* KILN_LOGS_FORMAT (validated), or NULL */
  int nsinks;
  kn__log_sink sinks[KN__SINK_MAX];
} kn__log_global;

extern kn__log_global kn__logs;

/* Build the tables and read the environment, once (takes the lock). */
void kn__log_ensure_init(void);
/* Lookups; -1 when absent. Call with the lock held. */
int kn__log_find(const char *qname);
int kn__log_find_artifact(const char *name);
int kn__log_find_component(const char *name);
/* Create a logger (lock held); -1 when the table is full. */
int kn__log_create(const char *qname);
/* True for "a.b_c.d": word characters and single inner dots. */
bool kn__log_valid_qname(const char *s);
/* Components: count, name, loggers (ends at -1). */
int kn__log_ncomponents(void);
const char *kn__log_component_name(int comp);
const int *kn__log_component_loggers(int comp);
/* Whether some ancestor-or-self of id has a handler under state st. */
bool kn__log_has_handler(const kn__log_state *st, int id, bool self);
/* Install st as the settings in force and recompute every gate (lock held). */
void kn__log_apply(const kn__log_state *st);
/* The state with no settings: kiln at WARNING, everything else inherits. */
void kn__log_state_default(kn__log_state *st);

/* settings.c: parse KILN_LOGS into *st. On an invalid value returns
** KN_EINVAL with the spec's text in kn_last_error. *help is set to 1 or 2
** for "help" / "+help" (st untouched). Lock held. */
kn_status kn__log_parse(const char *spec, kn__log_state *st, int *help);
/* The same; with `unknown` set, names that are not valid are skipped rather
** than an error, and appended to it, each followed by a NUL. */
kn_status kn__log_parse_ex(const char *spec, kn__log_state *st, int *help, kn__sb *unknown);
/* Read KILN_LOGS into the state in force (lock held). */
void kn__log_read_env_settings(void);

/* emit.c: read KILN_LOGS_OUT / KILN_LOGS_FORMAT; close the out file. */
void kn__log_read_env_output(void);
void kn__log_close_output(void);
/* Write text to stderr and the KILN_LOGS_OUT file. */
void kn__log_write_raw(const char *text, size_t n);

/* format.c: append the text of r (no trailing newline) per the configured
** format; lock held. */
struct kn__sb;
void kn__log_format(const kn_log_record *r, struct kn__sb *out);
/* format.c: validate a KILN_LOGS_FORMAT string; KN_EINVAL names the field. */
kn_status kn__log_check_format(const char *fmt);
/* The path shown in a line: relative to kiln's source root, else basename. */
const char *kn__log_display_path(const char *file);
const char *kn__log_basename(const char *file);

#endif
