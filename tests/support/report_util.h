/*
** support/report_util.h: helpers for the `kiln report` tests: run the built
** kiln binary, read and list the files of a report, build trace records with
** correct payload MD5s, and walk every href of every generated page.
*/
#ifndef KN_TESTS_REPORT_UTIL_H
#define KN_TESTS_REPORT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A fresh temporary directory (mkdtemp); owned string, free() it. */
char *ru_tmpdir(void);
/* rm -rf of a directory tree (no symlink following). */
void ru_rmtree(const char *dir);
/* Run `kiln report <args>` (a shell-quoted argument string); stderr goes
** to *err (owned, may be NULL). Returns the exit status. */
int ru_kiln(const char *args, char **err);
/* ru_kiln with the arguments formatted printf-style. */
int ru_kilnf(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "a/b" (owned). */
char *ru_path2(const char *a, const char *b);
/* The whole file (owned, NUL-terminated) or NULL; *n gets the length. */
char *ru_read(const char *path, size_t *n);
/* Number of '\n'-terminated lines (plus a final unterminated one). */
size_t ru_lines(const char *path);
/* Every regular file under dir, relative, sorted, joined by '\n' (owned). */
char *ru_list(const char *dir);
/* Append one trace record to f: header with the given JSON metadata (without
** has_payload) and, if payload is not NULL, its MD5 and tab lines. */
void ru_record(FILE *f, int line, const char *meta, const char *payload);
/* Check every href/src in every .html under dir resolves to an existing
** file (fragments and http(s) links skipped). Returns the number of
** broken links and prints them; *checked receives how many were checked. */
size_t ru_check_links(const char *dir, size_t *checked);

#endif

/* Write a small kiln trace with kiln's own trace writer into a new file in
** dir: function fn compiled as [0/0], recompiled as [0/1] because the guard
** "L['x'].size()[0] == 4" failed, a graph break in frame [1/0], chromium
** events and compilation_metrics. Returns the file path (owned). */
char *ru_write_kiln_trace(const char *dir);

/* Write a trace of a real compiled function (kiln's tracer, guards and
** shape environment) into a new file in dir: y = x * 2 + 1 called with x of
** sizes [4, 3], [8, 3] and [16, 3], so [0/0] is static, the size change
** recompiles it as [0/1] with a dynamic first dimension (create_symbol,
** guards added) and [16, 3] hits [0/1]. Returns the path (owned) or NULL. */
char *ru_write_real_kiln_trace(const char *dir);

/* A trace of a compiled function whose shape guards come from an op and
** from user code: ru_pair_add(x, y) adds two [4, 3] inputs with every size
** dynamic (kn_add needs Eq guards between their sizes) and reads x's size(0)
** with kn_size (Eq(s0, 4)). Returns the path (owned) or NULL. */
char *ru_write_guarded_kiln_trace(const char *dir);
