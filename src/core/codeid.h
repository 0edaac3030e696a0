/*
** core/codeid.h: the identity of the code kiln runs as (libkiln.so, or the
** program kiln is linked into), for cache keys that must never match
** entries written by another build of kiln.
*/
#ifndef KN_CORE_CODEID_H
#define KN_CORE_CODEID_H

#include <stddef.h>

/* Writes "<absolute path> <size> <mtime seconds>.<nanoseconds>" of the file
** holding kiln's code into out (n bytes, truncated if needed), or
** "(unknown)" when neither dladdr nor /proc/self/exe names a file that can
** be stat'ed. dladdr names a program by its argv[0], which is relative
** ("./prog") and stops naming it after a chdir: then /proc/self/exe does.
** Thread-safe; no allocation. */
void kn__code_ident(char *out, size_t n);

#endif
