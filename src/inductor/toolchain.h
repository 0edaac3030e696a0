/*
** inductor/toolchain.h: the pieces of inductor's toolchain and code cache
** shared by toolchain.c (the compiler, loading code), codecache.c (the
** memory and disk caches) and cache_meta.c (the text of the cache's small
** files). Internal to src/inductor (and the fuzz target of the .meta
** reader).
*/
#ifndef KN_INDUCTOR_TOOLCHAIN_H
#define KN_INDUCTOR_TOOLCHAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "inductor/inductor.h"
#include "inductor/target.h"

/* ---- cache_meta.c ----------------------------------------------------------------
** <key>.meta: "kiln-inductor-cache 2 <key> <size> <sha256> <cpu target>\n",
** the shared object's size and SHA-256 and the CPU it was compiled for
** (kn__cpu_target). <graph key>.fxg: "kiln-inductor-graph 1 <graph key>
** <key>\n". */
#define KN__IND_TARGET_CAP 200
#define KN__IND_META_MAX 512                 /* longest .meta (and .fxg) read */
#define KN__IND_SO_MAX ((long long)1 << 32) /* largest shared object loaded */
typedef struct kn__ind_meta {
  char key[65];
  long long size;
  char sha256[65];
  char target[KN__IND_TARGET_CAP];
} kn__ind_meta;
/* Parse a .meta's len bytes into m; false with why when they are not
** exactly what kn__ind_meta_format writes. */
bool kn__ind_meta_parse(const char *s, size_t len, kn__ind_meta *m, char *why, size_t n);
/* m's text into out[n]; returns its length (snprintf's). */
int kn__ind_meta_format(const kn__ind_meta *m, char *out, size_t n);
/* Parse / format a .fxg (graph key -> source key). */
bool kn__ind_fxg_parse(const char *s, size_t len, char gkey[65], char key[65]);
int kn__ind_fxg_format(const char *gkey, const char *key, char *out, size_t n);

/* ---- tu_split.c ----------------------------------------------------------------
** A C program of the C printer's layout as n translation units compiled in
** parallel and linked into one shared object (see tu_split.c). */
#define KN__IND_TU_MAX 16        /* most units of one program */
#define KN__IND_TU_BYTES 49152   /* automatic: a unit per this many bytes of source */
/* The kernels of text when it has the C printer's layout, else 0. */
int kn__ind_tu_kernels(const char *text);
/* Split text into min(n, its kernels) units, out[0..) (initialised by the
** caller; appended to); *got: how many, 1 when not split (n < 2, fewer than
** 2 kernels or not the C printer's layout: out untouched). KN_ENOMEM. */
kn_status kn__ind_tu_split(const char *text, int n, kn__sb *out, int *got);

/* ---- toolchain.c ------------------------------------------------------------------ */
typedef struct kn__ind_tool {
  char cc[1024];       /* KILN_CC as given ("cc" by default) */
  char resolved[4096]; /* found on PATH; "" when missing */
  char flags[2048];    /* KILN_CFLAGS or the default */
  char ident[4300];    /* resolved path, size, mtime */
  double timeout_s;    /* KILN_COMPILE_TIMEOUT (0: none) */
  int jobs;            /* KILN_COMPILE_JOBS: translation units (0: automatic) */
  const kn__ind_target *target; /* compiles and loads; its name is in the keys */
} kn__ind_tool;
/* The compiler and its settings from the environment for target tg
** (KILN_CFLAGS, or tg's default flags; an invalid KILN_COMPILE_TIMEOUT is
** logged once and the default used). */
void kn__ind_tool_init(kn__ind_tool *t, const kn__ind_target *tg);
/* Compile the file src into the shared object so, both named relative to
** the directory dir where the compiler runs; a large program (one unit per
** KN__IND_TU_BYTES of source, at most one per processor that the load
** average leaves idle, or KILN_COMPILE_JOBS units) is split into translation units (tu_split.c)
** compiled at once and linked into so (with umask 077, in a process
** group of its own that is killed when the time limit passes). shown names
** the source in messages. KN_OK, or KN_EUNSUPPORTED naming the failure
** (with the compiler's output). */
kn_status kn__ind_cc(const kn__ind_tool *t, const char *dir, const char *src, const char *so,
                     const char *shown);
/* Load the shared object open on fd (checked by the caller) and find its
** entry point, through the descriptor itself (or an in-memory copy when
** noexec: its directory is on a noexec mount). shown names it in
** messages. The code stays loaded for the life of the process. */
kn_status kn__ind_load_fd(int fd, bool noexec, const char *shown, kn__ind_call_fn *out);
/* The same loading without the entry-point check: the dlopen handle of the
** object open on fd into *handle (stays open for the life of the process;
** the caller finds its symbols). */
kn_status kn__ind_dlopen_fd(int fd, bool noexec, const char *shown, void **handle);

#endif
