/*
** aot/aot_cache_int.h: the AOT cache's disk half (aot_cache_disk.c), used
** by aot_cache.c. Both do nothing under KILN_AOT_DISK_CACHE=0 or when the
** cache root cannot be used.
*/
#ifndef KN_AOT_CACHE_INT_H
#define KN_AOT_CACHE_INT_H

#include "aot/aot.h"

/* The entry for key from DIR/aotautograd: fills out's graphs, counts and
** arrays (owned by out) and returns true; else false with why ("not in
** cache", or a corrupted entry, which is logged). inference must match. */
bool kn__aot_disk_load(const char *key, bool inference, kn__aot_prepared *out, char *why,
                       size_t n);
/* Write p under key (atomically), when its graphs round-trip through graph
** code; failures only mean a later miss. */
void kn__aot_disk_store(const char *key, const kn__aot_prepared *p);

#endif
