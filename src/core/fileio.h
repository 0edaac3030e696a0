/*
** core/fileio.h: reading a whole file and replacing a file atomically and
** durably (checkpoints, data files).
**
** kn__file_read refuses a directory with a message that says so; regular
** files, FIFOs and character devices are read to their end.
**
** kn__file_save writes through a callback into a new temporary file in the
** destination's directory, named "<dir>/.<name>.<16 random hex>.tmp" and
** created with O_CREAT | O_EXCL | O_NOFOLLOW (so nothing planted under any
** name is followed or reused; mode 0666 less the umask, as fopen), then
** fsync()s it, renames it over path and fsync()s the directory. Readers of
** path see the old file or the whole new one, never a mix, also when several
** processes save the same path at once (the last rename wins); after it
** returns KN_OK the new file survives a power loss. On every error the
** temporary file is removed and path is untouched (unless the directory
** sync fails after the rename: then path is new but KN_EIO says it may not
** be durable).
*/
#ifndef KN_CORE_FILEIO_H
#define KN_CORE_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#include "kiln/core.h"

/* The contents of path in *buf (owned by the caller, free(); NUL-terminated
** after *len bytes). what names the expected content in messages ("a
** safetensors file"). Errors: KN_EINVAL (NULL path, a directory), KN_EIO
** (with strerror of the failing call), KN_ENOMEM. */
kn_status kn__file_read(const char *path, const char *what, char **buf, size_t *len);

/* Writes the whole content to f; returns a status (a failed fwrite is
** noticed by kn__file_save too). */
typedef kn_status (*kn__file_writer)(void *ud, FILE *f);

/* Replace path by what fn writes, atomically and durably (see above). */
kn_status kn__file_save(const char *path, kn__file_writer fn, void *ud);

#endif
