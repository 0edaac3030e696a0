/*
** inductor/tu_split.c: one generated C program as several translation
** units, compiled in parallel and linked into one shared object
** (toolchain.c; docs/INDUCTOR.md, "Compile time").
**
** The C printer's layout (codegen.c) is: the prelude; the kernels, each
** opening with a line "/" "* kernel <n>: ..." and defined by a line
** "static void kernel<n>(...) {"; the entry point from the
** line "int call(const kn_rt *rt, ...". A kernel's static helpers (a
** reduction's row function) come between its comment and that line. A
** unit is "#define KN_TU_PART 1"
** (and "#define KN_TU_MAIN 1" for unit 0), the prelude (whose definitions
** shared by the whole program, such as the vector-math functions and the
** table pointer they read, are made where KN_TU_MAIN is and only declared
** elsewhere), and a run of consecutive kernels, defined with hidden
** visibility instead of static; unit 0 also declares every kernel and holds
** the entry point. The units are balanced by bytes (the entry point counts
** for unit 0). The single-file program (what the cache keys hash and the
** output_code artifact shows) is unchanged by any of this.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/toolchain.h"

static const char k_kernel[] = "\n/* kernel ";
static const char k_static[] = "static void kernel";
static const char k_entry[] = "\nint call(const kn_rt *rt";

/* The layout of text: prelude end, kernel starts, entry start; false when
** it is not the C printer's. */
typedef struct layout {
  size_t prelude_end, entry;
  int nk;
  size_t *start; /* [nk + 1]: kernel k is [start[k], start[k + 1]) */
} layout;

static int count_kernels(const char *text, const char *end) {
  int n = 0;
  for (const char *p = strstr(text, k_kernel); p && p < end; p = strstr(p + 1, k_kernel)) n++;
  return n;
}

/* The line of kernel chunk [a, b) that defines its kernel function
** ("static void kernel<n>(... ) {"; the lines before it, such as a
** reduction's row function, are the kernel's own static helpers), or NULL. */
static const char *def_line(const char *a, const char *b) {
  for (const char *l = a; l && l < b; l = memchr(l, '\n', (size_t)(b - l)), l = l ? l + 1 : NULL) {
    if ((size_t)(b - l) <= sizeof k_static || strncmp(l, k_static, sizeof k_static - 1)) continue;
    const char *d = l + sizeof k_static - 1;
    if (*d < '0' || *d > '9') continue;
    while (*d >= '0' && *d <= '9') d++;
    const char *eol = memchr(l, '\n', (size_t)(b - l));
    return *d == '(' && eol && eol - l > 3 && !strncmp(eol - 3, ") {", 3) ? l : NULL;
  }
  return NULL;
}

static bool parse(const char *text, layout *L) {
  const char *entry = strstr(text, k_entry), *first = strstr(text, k_kernel);
  if (!entry || !first || first > entry) return false;
  L->nk = count_kernels(text, entry);
  L->start = malloc(((size_t)L->nk + 1) * sizeof *L->start);
  if (!L->start) return false;
  L->prelude_end = (size_t)(first - text) + 1;
  L->entry = (size_t)(entry - text) + 1;
  int k = 0;
  for (const char *p = first; p && p < entry; p = strstr(p + 1, k_kernel))
    L->start[k++] = (size_t)(p - text) + 1;
  L->start[k] = L->entry;
  for (k = 0; k < L->nk; k++)
    if (!def_line(text + L->start[k], text + L->start[k + 1])) return false;
  return true;
}

/* Kernel k with its definition made hidden (not static), into sb. */
static void put_kernel(kn__sb *sb, const char *text, const layout *L, int k) {
  const char *a = text + L->start[k], *def = def_line(a, text + L->start[k + 1]);
  kn__sb_putn(sb, a, (size_t)(def - a));
  kn__sb_puts(sb, "KN_HID void kernel");
  const char *rest = def + sizeof k_static - 1;
  kn__sb_putn(sb, rest, (size_t)(text + L->start[k + 1] - rest));
}

/* Kernel k's declaration, into sb. */
static void put_decl(kn__sb *sb, const char *text, const layout *L, int k) {
  const char *def = def_line(text + L->start[k], text + L->start[k + 1]);
  const char *sig = def + sizeof k_static - 1, *eol = strchr(sig, '\n');
  kn__sb_puts(sb, "KN_HID void kernel");
  kn__sb_putn(sb, sig, (size_t)(eol - 2 - sig)); /* without " {" */
  kn__sb_puts(sb, ";\n");
}

int kn__ind_tu_kernels(const char *text) {
  layout L = {0};
  int n = parse(text, &L) ? L.nk : 0;
  free(L.start);
  return n;
}

/* first[u]: the first kernel of unit u (first[n] = nk). Sizes count the
** entry point first (it is unit 0's); unit u takes the kernels that start
** before (u + 1) / n of the total, at least one, leaving one for every later
** unit. */
static void cut(const layout *L, size_t len, int n, int *first) {
  size_t entry = len - L->entry, total = entry + (L->start[L->nk] - L->start[0]);
  int k = 0;
  for (int u = 0; u < n; u++) {
    first[u] = k;
    size_t goal = total / (size_t)n * (size_t)(u + 1);
    while (k < L->nk - (n - 1 - u) &&
           (k == first[u] || u == n - 1 || entry + (L->start[k] - L->start[0]) < goal))
      k++;
  }
  first[n] = L->nk;
}

kn_status kn__ind_tu_split(const char *text, int n, kn__sb *out, int *got) {
  layout L = {0};
  *got = 1;
  if (n < 2 || !parse(text, &L) || L.nk < 2) {
    free(L.start);
    return KN_OK;
  }
  if (n > L.nk) n = L.nk;
  int *first = malloc(((size_t)n + 1) * sizeof *first);
  if (!first) {
    free(L.start);
    return kn__oom();
  }
  cut(&L, strlen(text), n, first);
  bool failed = false;
  for (int u = 0; u < n; u++) {
    kn__sb_puts(&out[u], u == 0 ? "#define KN_TU_PART 1\n#define KN_TU_MAIN 1\n"
                                : "#define KN_TU_PART 1\n");
    kn__sb_putn(&out[u], text, L.prelude_end);
    if (u == 0)
      for (int k = 0; k < L.nk; k++) put_decl(&out[u], text, &L, k);
    for (int k = first[u]; k < first[u + 1]; k++) put_kernel(&out[u], text, &L, k);
    if (u == 0) kn__sb_puts(&out[u], text + L.entry - 1);
    failed |= kn__sb_failed(&out[u]);
  }
  free(first);
  free(L.start);
  if (failed) return kn__oom();
  *got = n;
  return KN_OK;
}
