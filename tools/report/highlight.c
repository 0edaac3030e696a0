/*
** tools/report/highlight.c: syntax highlighting at generation time.
**
** Generated code (kiln's C kernels, PyTorch's Python/Triton output code) and
** FX graph code are split into tokens here, in C, and each token is written
** escaped inside a <span class="..."> whose colours come from the page's
** inline style: no script, no network, and the page reads the same with
** JavaScript off. Strings and comments may span lines (Python triple
** quotes, C block comments): the open span is closed at each line end and
** reopened on the next line, so every line stays its own element with its
** #L<n> anchor. The tokenizer is a scanner, not a parser: a construct it
** does not know is printed plainly, never dropped.
*/
#include <string.h>

#include "report/html.h"

static const char *const py_kw[] = {
    "False", "None", "True", "and", "as", "assert", "async", "await", "break",
    "class", "continue", "def", "del", "elif", "else", "except", "finally",
    "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
    NULL};

static const char *const c_kw[] = {
    "auto", "bool", "break", "case", "char", "const", "continue", "default",
    "do", "double", "else", "enum", "extern", "float", "for", "goto", "if",
    "inline", "int", "int16_t", "int32_t", "int64_t", "int8_t", "long",
    "register", "restrict", "return", "short", "signed", "size_t", "sizeof",
    "static", "struct", "switch", "typedef", "uint16_t", "uint32_t",
    "uint64_t", "uint8_t", "union", "unsigned", "void", "volatile", "while",
    "#include", "#define", "#pragma", "#if", "#ifdef", "#ifndef", "#endif",
    "#else", NULL};

typedef struct hl {
  FILE *f;
  rp_lang lang;
  const char *open;   /* class of a string/comment spanning lines, or NULL */
  char quote[4];      /* its closing delimiter ("'''", "*" + "/", ...) */
} hl;

static bool ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

static bool is_kw(const hl *h, const char *s, size_t n) {
  const char *const *kw = h->lang == RP_LANG_C ? c_kw : py_kw;
  for (; *kw; kw++)
    if (strlen(*kw) == n && !memcmp(*kw, s, n)) return true;
  return false;
}

static void span(FILE *f, const char *cls, const char *s, size_t n) {
  fprintf(f, "<span class=\"%s\">", cls);
  rp_html_escn(f, s, n);
  fputs("</span>", f);
}

/* Where the open string or comment (closing delimiter h->quote) ends in
** s[from..n): the index past its end, or n (and *closed false). */
static size_t scan_close(const hl *h, const char *s, size_t from, size_t n,
                         bool *closed) {
  size_t ql = strlen(h->quote);
  for (size_t i = from; i + ql <= n; i++) {
    if (h->quote[0] != '*' && s[i] == '\\') {
      i++;
      continue;
    }
    if (!memcmp(s + i, h->quote, ql)) {
      *closed = true;
      return i + ql;
    }
  }
  *closed = false;
  return n;
}

/* A string or comment whose opening delimiter (skip bytes) is at s: one
** span up to its end or the line's end. Returns the bytes used. */
static size_t open_tok(hl *h, const char *cls, const char *s, size_t skip,
                       size_t n) {
  bool closed;
  size_t used = scan_close(h, s, skip, n, &closed);
  span(h->f, cls, s, used);
  h->open = closed ? NULL : cls;
  return used;
}

/* A quoted string starting at s[0]; only triple quotes continue on the next
** line. */
static size_t string_tok(hl *h, const char *s, size_t n) {
  size_t ql = h->lang == RP_LANG_PY && n >= 3 && s[1] == s[0] && s[2] == s[0]
                  ? 3 : 1;
  memset(h->quote, s[0], ql);
  h->quote[ql] = '\0';
  size_t used = open_tok(h, "s", s, ql, n);
  if (ql == 1) h->open = NULL;
  return used;
}

static size_t number_tok(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && (ident_char(s[i]) || s[i] == '.' ||
                   ((s[i] == '+' || s[i] == '-') && i &&
                    (s[i - 1] == 'e' || s[i - 1] == 'E'))))
    i++;
  return i;
}

/* One token at s (n > 0 bytes left on the line); returns its length. */
static size_t token(hl *h, const char *s, size_t n) {
  bool c = h->lang == RP_LANG_C;
  if ((!c && s[0] == '#') || (c && n > 1 && s[0] == '/' && s[1] == '/')) {
    span(h->f, "c", s, n);
    return n;
  }
  if (c && n > 1 && s[0] == '/' && s[1] == '*') {
    strcpy(h->quote, "*/");
    return open_tok(h, "c", s, 2, n);
  }
  if (s[0] == '"' || s[0] == '\'') return string_tok(h, s, n);
  if (s[0] >= '0' && s[0] <= '9') {
    size_t k = number_tok(s, n);
    span(h->f, "n", s, k);
    return k;
  }
  if (ident_start(s[0]) || (c && s[0] == '#')) {
    size_t k = 1;
    while (k < n && ident_char(s[k])) k++;
    if (is_kw(h, s, k)) span(h->f, "k", s, k);
    else if (k < n && s[k] == '(') span(h->f, "fn", s, k);
    else rp_html_escn(h->f, s, k);
    return k;
  }
  rp_html_escn(h->f, s, 1);
  return 1;
}

static void line_html(hl *h, const char *s, size_t n) {
  size_t i = 0;
  if (h->open) i = open_tok(h, h->open, s, 0, n);
  while (i < n) i += token(h, s + i, n - i);
}

rp_lang rp_guess_lang(const char *s, size_t n) {
  static const char *const c_marks[] = {"#include", "void ", "extern \"C\"",
                                        "int64_t ", "float *", NULL};
  size_t look = n < 4096 ? n : 4096;
  for (int i = 0; c_marks[i]; i++)
    if (memmem(s, look, c_marks[i], strlen(c_marks[i]))) return RP_LANG_C;
  return RP_LANG_PY;
}

void rp_html_code(FILE *f, const char *s, size_t n, rp_lang lang) {
  hl h = {f, lang, NULL, ""};
  fputs("<pre class=\"code\">", f);
  size_t line = 1, i = 0;
  while (i <= n) {
    const char *nl = i < n ? memchr(s + i, '\n', n - i) : NULL;
    size_t end = nl ? (size_t)(nl - s) : n;
    fprintf(f, "<span id=\"L%zu\"><span class=\"ln\">%zu</span>", line, line);
    if (lang == RP_LANG_NONE) rp_html_escn(f, s + i, end - i);
    else line_html(&h, s + i, end - i);
    fputs("</span>\n", f);
    line++;
    if (!nl) break;
    i = end + 1;
  }
  fputs("</pre>\n", f);
}
