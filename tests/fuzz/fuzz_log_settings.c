/*
** fuzz/fuzz_log_settings.c: libFuzzer target for the KILN_LOGS and
** KILN_LOGS_FORMAT parsers. An input is split at its first NUL: the part
** before is a KILN_LOGS value (kn_set_logs_str), the part after a
** KILN_LOGS_FORMAT value. A format the checker accepts is installed and a
** record formatted with it, which must stay short (widths are bounded); a
** rejected value must say why. Nothing may crash, leak or read out of
** bounds. Built with clang -fsanitize=fuzzer,address,undefined by
** tests/CMakeLists.txt and run for a bounded time as a ctest test.
*/
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/log.h"
#include "logging/log_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rejected(kn_status st) {
  if (st != KN_OK && (kn_last_status() != st || !kn_last_error()[0])) abort();
}

static void try_format(const char *fmt) {
  kn_status st = kn__log_check_format(fmt);
  check_rejected(st);
  if (st != KN_OK) return;
  char *copy = strdup(fmt);
  if (!copy) return;
  pthread_mutex_lock(&kn__logs.lock);
  free(kn__logs.format);
  kn__logs.format = copy;
  pthread_mutex_unlock(&kn__logs.lock);
  kn_log_record r = {.name = "kiln.dynamo", .level = KN_INFO, .message = "m\nn",
                     .pathname = "a/b.c", .filename = "b.c", .lineno = 7, .rank = -1};
  char *line = kn_log_format_record(&r);
  /* each conversion adds at most its bounded width or its field */
  if (line && strlen(line) > 8 * strlen(fmt) + 1100 * (strlen(fmt) / 4 + 1)) abort();
  free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 2);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = text[size + 1] = '\0';
  size_t first = strlen(text);
  if (strcmp(text, "help") && strcmp(text, "+help")) /* the help goes to stderr: skip */
    check_rejected(kn_set_logs_str(text));
  if (first < size) try_format(text + first + 1);
  free(text);
  return 0;
}
