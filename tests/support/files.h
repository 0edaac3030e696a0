/*
** support/files.h: small file helpers shared by tests.
*/
#ifndef KN_TEST_SUPPORT_FILES_H
#define KN_TEST_SUPPORT_FILES_H

#include <stddef.h>

/* The whole file as a NUL-terminated string (owned: free() it), its length
** in *len (optional). NULL if it cannot be read. */
char *kn_test_read_file(const char *path, size_t *len);

#endif
