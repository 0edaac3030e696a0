/*
** support/dynamo_util.h: helpers for the capture-frontend tests: the
** structured-trace view the seeds compare (StructuredTraceTestingFormatter:
** stack -> STACK, payload hash -> HASH, metrics -> METRICS, describer ids ->
** ID, view_func -> VIEW_FUNC, inductor_output_code's paths -> FILENAME; "str"
** and chromium records dropped), read with
** the strict reader, and a compile counter backend.
*/
#ifndef KN_TEST_SUPPORT_DYNAMO_UTIL_H
#define KN_TEST_SUPPORT_DYNAMO_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The current trace file normalized as the seeds print it, one record per
** line (each ending in '\n'); *defects receives the strict reader's defect
** count (the file is read non-strictly to count them all). Only records
** whose event (or artifact name) is kept by the filter when `owned_only`:
** the records the capture frontend writes (aot_* / inductor_* and the
** compiler artifacts are dropped). Owned string. */
char *kn_test_dyn_trace(bool owned_only, uint64_t *defects);
/* The payload of the n-th record (0-based) whose event is `event` (or, for
** artifacts, whose name is `event`); owned; NULL when absent. */
char *kn_test_dyn_payload(const char *event, int n);
/* The metadata value of the n-th record of `event` as compact JSON (owned),
** NULL when absent. */
char *kn_test_dyn_metadata(const char *event, int n);
/* The same filter applied to expected text (lines as the seed shows them). */
char *kn_test_dyn_filter(const char *text);
/* Occurrences of needle in hay. */
int kn_test_count_sub(const char *hay, const char *needle);



/* Suite fixture for capture-frontend tests: kn_reset() and clean log
** settings before each test; after it, kn_reset() and an expectation that
** no tensor outlived the test. */
void kn_test_dynamo_setup(void);
void kn_test_dynamo_teardown(void);

/* Run fn with stdout redirected to a temporary file; return what was
** printed (owned). */
char *kn_test_capture_stdout(void (*fn)(void *), void *ud);
#endif
