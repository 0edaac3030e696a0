/*
** support/leakcheck.h: a Criterion suite fixture that opens an autorelease
** scope before each test and, after it, closes the scope and asserts that no
** tensor outlived the test:
**   TestSuite(ops, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);
*/
#ifndef KN_TEST_SUPPORT_LEAKCHECK_H
#define KN_TEST_SUPPORT_LEAKCHECK_H

void kn_test_leakcheck_begin(void);
void kn_test_leakcheck_end(void);

#endif
