/*
** support/files.h: small file helpers shared by tests.
*/
#ifndef KN_TEST_SUPPORT_FILES_H
#define KN_TEST_SUPPORT_FILES_H

#include <stddef.h>

/* The whole file as a NUL-terminated string (owned: free() it), its length
** in *len (optional). NULL if it cannot be read. */
char *kn_test_read_file(const char *path, size_t *len);

/* The generated C of every graph compiled into the kiln cache directory
** dir (the .c files of dir/inductor, concatenated; owned: free() it). Never NULL:
** an empty string when there are none. */
char *kn_test_inductor_sources(const char *dir);

/* How many times what occurs in s (overlapping occurrences counted). */
int kn_test_count_of(const char *s, const char *what);

#endif
