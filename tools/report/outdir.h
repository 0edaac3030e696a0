/*
** tools/report/outdir.h: the report's output directory, kept safe.
**
** OUT must be empty or absent unless --overwrite is given; overwriting removes
** its contents without following symlinks. Every file is created relative to
** a directory descriptor of OUT, one path component at a time with
** O_NOFOLLOW, so neither a "../" in a name nor a symlink planted inside OUT
** can make a write land outside it. Names derived from trace content go
** through rp_safe_name first.
*/
#ifndef KN_TOOLS_REPORT_OUTDIR_H
#define KN_TOOLS_REPORT_OUTDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kiln/core.h"

typedef struct rp_out {
  int fd;            /* O_DIRECTORY descriptor of OUT, -1 when closed */
  char *path;        /* OUT as given; owned */
} rp_out;

/* Longest file name component rp_safe_name produces. */
#define RP_NAME_MAX 120

/* Create OUT (and missing parents) or check it is an empty directory; with
** overwrite, empty it first. KN_EIO / KN_EINVAL with a message otherwise. */
kn_status rp_out_prepare(rp_out *o, const char *path, bool overwrite);
void rp_out_close(rp_out *o);
/* Open rel ("a/b/c.html", components checked, directories created) for
** writing, truncating. Returns an owned FILE* (fclose it) or NULL with
** kn_last_error() set. */
FILE *rp_out_fopen(rp_out *o, const char *rel);
/* Whether rel exists inside OUT (without following a final symlink). */
bool rp_out_exists(rp_out *o, const char *rel);
/* Remove rel (a file) inside OUT; false if it was not there. */
bool rp_out_unlink(rp_out *o, const char *rel);
/* Copy src (any bytes, NUL ends it) into dst as a safe single file-name
** component: only [A-Za-z0-9._-], others become '_', no leading '.', never
** empty, at most min(cap - 1, RP_NAME_MAX) bytes. Returns dst. */
char *rp_safe_name(char *dst, size_t cap, const char *src);
/* Whether rel is a safe relative path: components of rp_safe_name's
** alphabet, none empty, "." or "..", no leading '/'. */
bool rp_rel_path_ok(const char *rel);

#endif
