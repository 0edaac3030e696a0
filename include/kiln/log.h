/*
** kiln/log.h: component logs (KILN_LOGS), modelled on torch._logging.
**
** Loggers have dotted names under "kiln" ("kiln.dynamo.guards"). A component
** ("dynamo", "aot", "inductor", ...) is an alias for one or more loggers and
** is set by level; an artifact ("graph_code", "recompiles", ...) is a named
** message kind set on or off. Settings come from the KILN_LOGS environment
** variable (read once, at the first log call) or from kn_set_logs(); the
** variable wins. All settings are process-wide state guarded by a mutex;
** docs/LOGGING.md is the user's guide.
*/
#ifndef KILN_LOG_H
#define KILN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Levels: the numbers of Python's logging module. */
enum {
  KN_NOTSET = 0,
  KN_DEBUG = 10,
  KN_INFO = 20,
  KN_WARNING = 30,
  KN_ERROR = 40,
  KN_CRITICAL = 50
};

/* A logger: an index into the process-wide logger table, never freed. */
typedef int kn_logger_id;

/* ---- settings ----------------------------------------------------------- */

/* One setting of kn_set_logs: a component, artifact or logger name and a
** tagged value. Build them with KN_LOG_LEVEL / KN_LOG_FLAG. */
typedef enum kn_log_value_kind { KN_LOG_SET_LEVEL, KN_LOG_SET_FLAG } kn_log_value_kind;
typedef struct kn_log_setting {
  const char *name;       /* "all", a component, an artifact or a logger qname */
  kn_log_value_kind kind; /* a level for components/loggers, a flag for artifacts */
  int value;              /* KN_DEBUG.. for levels; 0/1 for flags */
} kn_log_setting;
#define KN_LOG_LEVEL(name, level) {(name), KN_LOG_SET_LEVEL, (level)}
#define KN_LOG_FLAG(name, on) {(name), KN_LOG_SET_FLAG, (on)}

/* The preset of torch._logging.DEFAULT_LOGGING (2.4), for
**   kn_log_setting s[] = {KN_LOG_DEFAULT_LOGGING}; kn_set_logs(s, 9); */
#define KN_LOG_DEFAULT_LOGGING                                                  \
  KN_LOG_LEVEL("dynamo", KN_DEBUG), KN_LOG_LEVEL("aot", KN_DEBUG),              \
      KN_LOG_LEVEL("inductor", KN_DEBUG), KN_LOG_LEVEL("fsdp", KN_DEBUG),       \
      KN_LOG_FLAG("ddp_graphs", 1), KN_LOG_FLAG("graph_breaks", 1),             \
      KN_LOG_FLAG("guards", 1), KN_LOG_FLAG("recompiles", 1),                   \
      KN_LOG_LEVEL("dynamic", KN_INFO)

/* Replace all log settings (not additive: one call undoes the previous one).
** Settings apply in array order, so a later one wins where two share a
** logger. Errors (KN_EINVAL, settings unchanged, message in kn_last_error):
**   "Expected bool to enable artifact aot_graphs, received 5"
**   "Unrecognized log level for log dynamo: 7, valid level values are: 50,40,30,20,10,0"
**   "Unrecognized log or artifact name passed to set_logs: foo"
** If KILN_LOGS is set (even empty) the call only logs a warning and returns
** KN_OK. n == 0 restores the defaults (warnings and errors only). */
KN_API kn_status kn_set_logs(const kn_log_setting *settings, size_t n);
/* The same with a KILN_LOGS string ("+dynamo,recompiles"). "help" and
** "+help" print the help to stderr and change nothing. */
KN_API kn_status kn_set_logs_str(const char *spec);
/* The distributed rank: lines then start with "[rank<R>]:"; -1 clears. */
KN_API void kn_set_log_rank(int rank);
/* The KILN_LOGS help text ("+help" lists every artifact when verbose).
** Owned by the caller (free()); NULL on OOM. */
KN_API char *kn_log_help(bool verbose);

/* ---- user loggers and artifacts ---------------------------------------- */

/* Find or create the logger named qname ("kiln.myext", "myapp.io"). Named in
** KILN_LOGS or kn_set_logs it is controlled like kiln's own: a child of a
** registered logger prints through it, any other name becomes a registered
** log of its own. KN_EINVAL on a malformed name, KN_ERANGE when the table
** (512 loggers) is full. */
KN_API kn_status kn_log_get_logger(const char *qname, kn_logger_id *out);

#define KN_ARTIFACT_OFF_BY_DEFAULT 1u /* only printed when named explicitly */
#define KN_ARTIFACT_VISIBLE 2u        /* listed by KILN_LOGS=help */
#define KN_ARTIFACT_RAW 4u            /* printed as the bare message, no prefix */
/* Register artifact `name` emitted by the module logger owner_qname; *out is
** its artifact logger ("<owner>.__<name>"). The strings are copied.
** KN_EINVAL if the name is taken or malformed. */
KN_API kn_status kn_log_register_artifact(const char *name, const char *owner_qname,
                                          const char *description, unsigned flags,
                                          kn_logger_id *out);

/* Whether a record of this level on this logger would be printed. */
KN_API bool kn_log_enabled(kn_logger_id id, int level);
/* Emit one record (printf-style); lines of a multi-line message each get
** the full prefix. Call through KN_LOG_TO() so disabled calls format nothing. */
KN_API void kn_log_write(kn_logger_id id, int level, const char *file, int line,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define KN_LOG_TO(id, level, ...)                                     \
  do {                                                               \
    if (kn_log_enabled((id), (level)))                               \
      kn_log_write((id), (level), __FILE__, __LINE__, __VA_ARGS__);  \
  } while (0)

/* ---- records and sinks (capture for tests and tools) -------------------- */

/* One record. All pointers are borrowed and valid only during the sink call. */
typedef struct kn_log_record {
  const char *name;       /* logger qname, "kiln.dynamo.guards.__recompiles" */
  int level;              /* KN_DEBUG .. KN_CRITICAL */
  const char *artifact;   /* "recompiles", or NULL for a module logger */
  bool raw;               /* the artifact prints its bare message */
  const char *compile_id; /* "0/1" or "0/1_1"; NULL outside a compile */
  const char *message;    /* the formatted message, without appendices */
  const char *exc_text;   /* "Traceback (most recent call last):..." or NULL */
  const char *stack_text; /* "Stack (most recent call last):..." or NULL */
  const char *pathname;   /* the source path as compiled (__FILE__) */
  const char *filename;   /* its basename */
  int lineno;
  int64_t created_us;     /* wall clock, microseconds since the epoch */
  int pid;
  int rank;               /* -1 when no rank is set */
} kn_log_record;

typedef void (*kn_log_sink_fn)(const kn_log_record *rec, void *userdata);
/* While an exclusive sink is installed, records go to sinks only (nothing is
** written to stderr or KILN_LOGS_OUT). */
#define KN_LOG_SINK_EXCLUSIVE 1u
/* Install a sink that receives every record that is printed (exactly what
** reaches stderr). Sinks run under the logging lock, in install order; they
** may log (the lock is recursive). KN_ERANGE when 8 sinks are installed. */
KN_API kn_status kn_log_add_sink(kn_log_sink_fn fn, void *userdata, unsigned flags);
/* Remove the sink installed with this fn and userdata; false if none. */
KN_API bool kn_log_remove_sink(kn_log_sink_fn fn, void *userdata);
/* Format a record the way the stderr output does (no trailing newline),
** honouring KILN_LOGS_FORMAT. Owned by the caller (free()); NULL on OOM. */
KN_API char *kn_log_format_record(const kn_log_record *rec);

/* ---- compile times ------------------------------------------------------ */

/* The "compilation metrics" table of every recorded phase, one row per phase
** in first-recorded order; aggregate sums a row's times, otherwise they are
** listed ", "-separated. Owned by the caller (free()); NULL on OOM. */
KN_API char *kn_compile_times(bool aggregate);
/* Log the aggregate table at INFO on logger kiln.dynamo.utils (so it shows
** with KILN_LOGS=kiln.dynamo.utils). Also run at exit once a time is recorded. */
KN_API void kn_dump_compile_times(void);

#ifdef __cplusplus
}
#endif
#endif
