/*
** core/symcache.h: the symbolizer's disk cache, so that a new process
** running the same binaries finds the function, file and line of a return
** address without loading libdw (its load, symbol tables and line tables
** were most of a warm compile's time from the disk cache).
**
** A loaded module (the program, each shared object, found with
** dl_iterate_phdr) is told apart by its GNU build ID, read from its
** PT_NOTE segments in memory. The frames libdw found for addresses in it are
** kept by offset from the module's load address, which is the same in
** every process whatever address-space randomisation does, in
**   <cache root>/symbols/<build ID in hex>.sym
** (cache root: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
** ~/.cache/kiln; the directory and files under the trust rules of
** core/cachefs.h). A file is text: the line "kiln-symbols 1", then one line
** per address, "<offset in hex> <line> <function>\t<file>", or
** "<offset in hex> 0 <function>\t" for a partial frame: what libdw found in
** code without debug info (the function from the symbol table, "?" when
** none; no file, no line). Partial frames are kept only while no separate
** debug file exists for the module's build ID (<debug dir>/.build-id/xx/
** <rest>.debug, what Debian's -dbgsym packages install): once one is
** installed they are looked up in libdw again. So a program built without
** -g stops loading libdw in every new process. A line that does not parse
** is skipped. A module without a build ID is not cached. Raw addresses
** never reach the disk.
**
** Not thread-safe on its own: core/symbolize.c calls it under its lock.
** Errors (an unusable cache directory, an unreadable or unwritable file) are
** not reported: the symbolizer then asks libdw, and this thread's last error
** is left as it was.
*/
#ifndef KN_CORE_SYMCACHE_H
#define KN_CORE_SYMCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/symbolize.h"

/* The frame stored for pc (an address inside the call instruction), if any:
** true with *out set (strings owned by the cache, valid for the life of the
** process). Reads the module's file on the module's first use. */
bool kn__symcache_find(uint64_t pc, kn__srcframe *out);
/* Remember the frame libdw found for pc, to be written by
** kn__symcache_save (in a module with a build ID): a complete one, or a
** partial one (no file, no line) when `searched` says libdw was there to
** search (a frame left empty because libdw could not be loaded is not
** kept) and the module has no separate debug file. */
void kn__symcache_note(uint64_t pc, const kn__srcframe *f, bool searched);
/* Where separate debug files are looked for (default /usr/lib/debug; NULL
** restores it): tests install a fake one. Process-wide; callers hold
** core/symbolize.c's lock or run before any symbolization. */
void kn__symcache_debug_dir(const char *path);
/* Write the file of each module with frames noted since the last save,
** merged with what other processes wrote to it meanwhile. */
void kn__symcache_save(void);

#endif
