/*
** support/trace_util.h: helpers for the trace tests: a scratch directory,
** whole-file reads, and tracing into a fresh directory.
*/
#ifndef KN_TEST_TRACE_UTIL_H
#define KN_TEST_TRACE_UTIL_H

#include <stddef.h>

/* A new empty directory under /tmp; owned (free it); removed with its
** files by kn_test_rmdir. */
char *kn_test_tmpdir(void);
void kn_test_rmdir(char *dir); /* also frees dir */
/* The whole file, NUL-terminated; owned; NULL if unreadable. */
char *kn_test_read_file(const char *path, size_t *len);
/* Enable tracing into a fresh directory with a fixed header clock/pid;
** returns the directory (owned). */
char *kn_test_trace_start(void);
/* The current trace file's contents (owned), "" if none was created. */
char *kn_test_trace_text(void);

#endif
