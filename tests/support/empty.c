/* Keeps the support library non-empty. */
typedef int kn__test_support_empty;
