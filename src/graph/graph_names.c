/*
** graph/graph_names.c: node names as torch.fx gives them.
**
** FX's _Namespace: a candidate is sanitized (characters illegal in a Python
** identifier become '_', a leading digit gets a '_' prefix), split into a
** base and a numeric suffix ("output_1" -> "output", 1), and bumped
** ("add_1", "add_2", ...) while it is in use or would shadow a Python
** keyword or builtin ("sum" -> "sum_1" the first time, "input" -> "input_1").
*/
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_int.h"

/* Python 3 keywords, builtins (incl. the site module's), and the names FX
** reserves for its generated code (inf, nan, NoneType, torch, device,
** fx_pytree, pytree, math). Sorted for bsearch (strcmp order). */
static const char *const reserved[] = {
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException",
    "BaseExceptionGroup", "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning",
    "ChildProcessError", "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError",
    "ConnectionResetError", "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning",
    "EnvironmentError", "Exception", "ExceptionGroup", "False", "FileExistsError",
    "FileNotFoundError", "FloatingPointError", "FutureWarning", "GeneratorExit", "IOError",
    "ImportError", "ImportWarning", "IndentationError", "IndexError", "InterruptedError",
    "IsADirectoryError", "KeyError", "KeyboardInterrupt", "LookupError", "MemoryError",
    "ModuleNotFoundError", "NameError", "None", "NoneType", "NotADirectoryError",
    "NotImplemented", "NotImplementedError", "OSError", "OverflowError",
    "PendingDeprecationWarning", "PermissionError", "ProcessLookupError", "RecursionError",
    "ReferenceError", "ResourceWarning", "RuntimeError", "RuntimeWarning",
    "StopAsyncIteration", "StopIteration", "SyntaxError", "SyntaxWarning", "SystemError",
    "SystemExit", "TabError", "TimeoutError", "True", "TypeError", "UnboundLocalError",
    "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError",
    "UnicodeWarning", "UserWarning", "ValueError", "Warning", "ZeroDivisionError",
    "__build_class__", "__debug__", "__doc__", "__import__", "__loader__", "__name__",
    "__package__", "__spec__", "abs", "aiter", "all", "and", "anext", "any", "as", "ascii",
    "assert", "async", "await", "bin", "bool", "break", "breakpoint", "bytearray", "bytes",
    "callable", "chr", "class", "classmethod", "compile", "complex", "continue", "copyright",
    "credits", "def", "del", "delattr", "device", "dict", "dir", "divmod", "elif", "else",
    "enumerate", "eval", "except", "exec", "exit", "filter", "finally", "float", "for",
    "format", "from", "frozenset", "fx_pytree", "getattr", "global", "globals", "hasattr",
    "hash", "help", "hex", "id", "if", "import", "in", "inf", "input", "int", "is",
    "isinstance", "issubclass", "iter", "lambda", "len", "license", "list", "locals", "map",
    "math", "max", "memoryview", "min", "nan", "next", "nonlocal", "not", "object", "oct",
    "open", "or", "ord", "pass", "pow", "print", "property", "pytree", "quit", "raise",
    "range", "repr", "return", "reversed", "round", "set", "setattr", "slice", "sorted",
    "staticmethod", "str", "sum", "super", "torch", "try", "tuple", "type", "vars", "while",
    "with", "yield", "zip",
};

static int cmp_name(const void *key, const void *elem) {
  return strcmp((const char *)key, *(const char *const *)elem);
}

bool kn__gnames_reserved(const char *name) {
  return bsearch(name, reserved, sizeof reserved / sizeof reserved[0], sizeof reserved[0],
                 cmp_name) != NULL;
}

void kn__gnames_init(kn__gnames *ns) {
  kn__hm_init(&ns->used, true);
  kn__hm_init(&ns->count, true);
}

void kn__gnames_fini(kn__gnames *ns) {
  kn__hm_fini(&ns->used);
  kn__hm_fini(&ns->count);
}

void kn__gnames_release(kn__gnames *ns, const char *name) { kn__hm_del(&ns->used, name); }

void kn__gnames_snake(const char *s, char *out, size_t cap) {
  size_t j = 0;
  bool prev_lower = false;
  for (; *s && j + 2 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (prev_lower && isupper(c)) out[j++] = '_';
    out[j++] = (char)tolower(c);
    prev_lower = islower(c) != 0;
  }
  out[j] = '\0';
}

/* Characters illegal in an identifier become '_' (one per run, as FX's
** regex [^0-9a-zA-Z_]+); "" -> "_unnamed"; leading digit -> "_" prefix. */
static void sanitize(const char *in, char *out, size_t cap) {
  size_t j = 0;
  bool run = false;
  if (isdigit((unsigned char)*in)) out[j++] = '_';
  for (; *in && j + 1 < cap; in++) {
    unsigned char c = (unsigned char)*in;
    if (isalnum(c) || c == '_') {
      out[j++] = (char)c;
      run = false;
    } else if (!run) {
      out[j++] = '_';
      run = true;
    }
  }
  out[j] = '\0';
  if (j == 0) snprintf(out, cap, "_unnamed");
}

/* Split "base_<digits>" into base and number; num -1 when there is none. */
static void split_suffix(char *cand, long long *num) {
  size_t len = strlen(cand), k = len;
  *num = -1;
  while (k > 0 && isdigit((unsigned char)cand[k - 1])) k--;
  if (k == len || k < 2 || cand[k - 1] != '_' || len - k > 15) return;
  *num = strtoll(cand + k, NULL, 10);
  cand[k - 1] = '\0';
}

const char *kn__gnames_create(kn__gnames *ns, kn__arena *a, const char *candidate,
                              kn__gnode *node) {
  char base[256], name[288];
  long long num;
  sanitize(candidate, base, sizeof base);
  split_suffix(base, &num);
  if (num < 0) snprintf(name, sizeof name, "%s", base);
  else snprintf(name, sizeof name, "%s_%lld", base, num);
  if (num <= 0) num = (long long)(intptr_t)kn__hm_get(&ns->count, base, NULL);
  bool found;
  for (;;) {
    kn__hm_get(&ns->used, name, &found);
    if (!found && !kn__gnames_reserved(name)) break;
    num++;
    snprintf(name, sizeof name, "%s_%lld", base, num);
  }
  char *s = kn__arena_strdup(a, name);
  if (!s || !kn__hm_put(&ns->used, name, node) ||
      !kn__hm_put(&ns->count, base, (void *)(intptr_t)num))
    return NULL;
  return s;
}

char *kn__graph_source_to_target(const char *source) {
  size_t n = strlen(source);
  char *out = malloc(n + 2);
  if (!out) return NULL;
  size_t j = 0;
  bool run = false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)source[i];
    if (isalnum(c)) {
      out[j++] = (char)c;
      run = false;
    } else if (!run) { /* Dynamo: re.sub(r"[^a-zA-Z0-9]+", "_", name) */
      out[j++] = '_';
      run = true;
    }
  }
  out[j] = '\0';
  return out;
}
