/*
** logging/log.h: the logging entry points every kiln subsystem uses.
**
**   KN_LOG(KN_LOG_DYNAMO, KN_INFO, "Step 1: ...", ...);
**   KN_LOG_ARTIFACT(KN_ART_GRAPH_CODE, "TRACED GRAPH\n%s", text);
**
** A disabled call costs one relaxed byte load and one predictable branch:
** kn__log_gate[logger] holds the lowest level that prints (255: nothing),
** and the message is formatted only past that test. Gates start at 0, so the
** first call of the process takes the slow path, which reads KILN_LOGS and
** sets every gate. Artifact loggers of built-in artifacts have constant ids.
*/
#ifndef KN_LOGGING_LOG_H
#define KN_LOGGING_LOG_H

#include <stdarg.h>
#include <stdatomic.h>

#include "kiln/log.h"
#include "logging/log_tables.h"

enum {
#define KN__LOGGER_ENUM(id, qname) id,
  KN_LOGGER_MAP(KN__LOGGER_ENUM)
#undef KN__LOGGER_ENUM
  KN__LOGGER_COUNT
};

enum {
#define KN__ARTIFACT_ENUM(id, name, owner, flags, desc) id,
  KN_ARTIFACT_MAP(KN__ARTIFACT_ENUM)
#undef KN__ARTIFACT_ENUM
  KN__ARTIFACT_COUNT
};

#define KN__LOG_MAX 512   /* loggers, built-in and user */
#define KN__ART_MAX 128   /* artifacts, built-in and user */
#define KN__GATE_OFF 255

/* Lowest printing level per logger id; written under the logging lock. */
extern _Atomic unsigned char kn__log_gate[KN__LOG_MAX];

/* The artifact logger of a built-in artifact ("<owner>.__<name>"). */
#define KN__ART_LOGGER(art) (KN__LOGGER_COUNT + (art))

/* Record flags: attach this thread's last error as a "Traceback" block, or
** the caller's C backtrace as a "Stack" block. */
#define KN__LOG_EXC 1u
#define KN__LOG_STACK 2u

#define KN_LOG_ENABLED(lg, lvl)                                              \
  (__builtin_expect(atomic_load_explicit(&kn__log_gate[(lg)],                \
                                         memory_order_relaxed) <= (lvl), 0))
#define KN_LOG_AT(lg, lvl, flags, ...)                                       \
  do {                                                                       \
    if (KN_LOG_ENABLED(lg, lvl))                                             \
      kn__log_emit((lg), (lvl), (flags), __FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)
#define KN_LOG(lg, lvl, ...) KN_LOG_AT(lg, lvl, 0u, __VA_ARGS__)
/* Like Python's log.exception / exc_info=True: appends the last error. */
#define KN_LOG_EXC(lg, lvl, ...) KN_LOG_AT(lg, lvl, KN__LOG_EXC, __VA_ARGS__)
/* Like stack_info=True: appends the C backtrace of the call. */
#define KN_LOG_STACK(lg, lvl, ...) KN_LOG_AT(lg, lvl, KN__LOG_STACK, __VA_ARGS__)
/* Artifacts log at DEBUG (level letter V). */
#define KN_LOG_ARTIFACT(art, ...) KN_LOG(KN__ART_LOGGER(art), KN_DEBUG, __VA_ARGS__)
#define KN_LOG_ARTIFACT_AT(art, lvl, ...) KN_LOG(KN__ART_LOGGER(art), lvl, __VA_ARGS__)
#define KN_ARTIFACT_ENABLED(art) KN_LOG_ENABLED(KN__ART_LOGGER(art), KN_DEBUG)

/* The slow path behind the macros: re-checks the gate (reading KILN_LOGS on
** the first call), formats and prints one record. */
void kn__log_emit(int logger, int level, unsigned flags, const char *file,
                  int line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void kn__log_vemit(int logger, int level, unsigned flags, const char *file,
                   int line, const char *fmt, va_list ap);

/* A 0/1 environment setting: unset or empty gives dflt, "0" and "1" their
** value; anything else gives dflt and is named once (per *warned, the
** caller's flag) in a WARNING on logger lg: "<name>: expected 0 or 1, found
** '<value>'; <otherwise>", logged at the caller's file and line. */
#define KN_LOG_ENV_FLAG(name, dflt, lg, warned, otherwise) \
  kn__log_env_flag((name), (dflt), (lg), (warned), (otherwise), __FILE__, __LINE__)
bool kn__log_env_flag(const char *name, bool dflt, int lg, atomic_bool *warned,
                      const char *otherwise, const char *file, int line);

/* Forget settings, sinks, rank, KILN_LOGS_OUT and KILN_LOGS_FORMAT, then read
** the environment again as at process start (tests only; user loggers and
** artifacts stay registered). */
void kn__log_reset_for_tests(void);

/* Compile-phase timings for kn_dump_compile_times (thread-safe). */
void kn__compile_time_record(const char *phase, double seconds);
/* A monotonic clock in seconds, and the pair around a timed phase:
**   double t0 = kn__compile_time_begin(); ...; kn__compile_time_end("phase", t0); */
double kn__compile_time_begin(void);
void kn__compile_time_end(const char *phase, double begin);
void kn__compile_times_reset(void);
/* A higher layer that wants every recorded phase too (the profiler, as a
** range) installs a hook; NULL removes it. Logging calls no layer above it. */
typedef void (*kn__compile_time_hook)(const char *phase, double seconds);
void kn__compile_times_set_hook(kn__compile_time_hook hook);

#endif
