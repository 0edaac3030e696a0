/*
** aot/aot_cache_disk.c: the AOT cache on disk, under the cache root of the
** other caches (KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
** ~/.cache/kiln; core/cachefs.h) unless KILN_AOT_DISK_CACHE=0: one file
** ROOT/aotautograd/<key>.entry per prepared compile:
**
**   kiln-aot-cache 1 <key>
**   <inference> <nuser> <ngrads> <nsaved>
**   <out_diff: one 0/1 per output, or ->
**   <grad_input: indices separated by spaces, or ->
**   <SHA-256 of the forward graph's canonical text> <of the backward's, or ->
**   <bytes of forward code> <bytes of backward code>
**   <forward graph code><backward graph code>
**   sha256 <SHA-256 of everything above>
**
** Graphs are stored as graph code (kn__graph_code) and read back with the
** graph parser; an entry is written only when the parsed code gives the same
** canonical graph (graph_serial.c; the example values' requires_grad marks
** aside: the code does not print them and no runner reads them), so graphs
** with constants (get_attr data) or anything else the printer does not show
** stay in memory only. Files are
** written to a temporary name and renamed (a reader never sees a partial
** entry; two processes writing one key both succeed). On reading, a wrong
** header, key, digest, count or graph hash makes the entry "corrupted": it
** is logged, rebuilt and overwritten.
*/
#include <sha2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot_cache_int.h"
#include "core/cachefs.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "logging/log.h"

#define MAX_ENTRY_BYTES ((size_t)64 << 20)

static atomic_bool warned_dir, warned_setting;

/* KILN_AOT_DISK_CACHE: unset, empty or 1 keeps the disk cache, 0 leaves the
** AOT cache in memory only; anything else is named in one warning per
** process and keeps it. */
static bool disk_wanted(void) {
  return KN_LOG_ENV_FLAG("KILN_AOT_DISK_CACHE", true, KN_LOG_AOT, &warned_setting,
                         "the AOT cache stays on disk");
}

/* ROOT/aotautograd (created, checked), or false when the disk cache is
** turned off or unusable (one warning per process says why). */
static bool cache_open(kn__cachedir *cd) {
  char root[KN__CACHE_PATH_CAP];
  *cd = (kn__cachedir){.fd = -1};
  if (!disk_wanted()) return false;
  kn_status st = kn__cache_root(root, NULL);
  if (st == KN_OK) st = kn__cachedir_open(root, "aotautograd", true, cd);
  if (st != KN_OK && !atomic_exchange(&warned_dir, true))
    KN_LOG(KN_LOG_AOT, KN_WARNING, "AOT cache: %s; not using the disk cache (see \"Trust rules\" "
           "in docs/INDUCTOR.md)", kn_last_error());
  return st == KN_OK;
}

/* ---- writing ------------------------------------------------------------------------ */

/* SHA-256 of g's canonical text without the example values' requires_grad
** marks (":rg"), which graph code does not print and no runner reads. */
static bool graph_digest(const kn__graph *g, char hex[65]) {
  char *ser = kn__graph_serialize(g);
  if (!ser) return false;
  char *w = ser;
  for (const char *r = ser; *r;) {
    if (!strncmp(r, ":rg", 3)) r += 3;
    else *w++ = *r++;
  }
  *w = '\0';
  SHA256Data((const uint8_t *)ser, (size_t)(w - ser), hex);
  free(ser);
  return true;
}

/* Graph code that parses back to the same graph and prints the same (owned),
** or NULL; hash gets the graph's digest. */
static char *round_trip_code(const kn__graph *g, char hash[65]) {
  char *code = kn__graph_code(g, NULL);
  kn__graph *back = code ? kn__graph_parse(code, NULL, 0) : NULL;
  char h2[65];
  char *again = back ? kn__graph_code(back, NULL) : NULL;
  bool same = again && !strcmp(again, code) && graph_digest(g, hash) && graph_digest(back, h2) &&
              !strcmp(hash, h2);
  if (!same)
    KN_LOG(KN_LOG_AOT, KN_DEBUG, "AOT cache: a graph does not round-trip through its code "
           "(%s); kept in memory only", back ? "it reads back differently" : kn_last_error());
  free(again);
  kn__graph_free(back);
  if (!same) free(code);
  return same ? code : NULL;
}

static void put_header(kn__sb *sb, const char *key, const kn__aot_prepared *p, const char *fh,
                       const char *bh, size_t fl, size_t bl) {
  kn__sb_printf(sb, "kiln-aot-cache 1 %s\n%d %d %d %d\n", key, p->inference ? 1 : 0, p->nuser,
                p->ngrads, p->nsaved);
  for (int i = 0; i < p->nuser && p->out_diff; i++) kn__sb_putc(sb, p->out_diff[i] ? '1' : '0');
  kn__sb_puts(sb, p->out_diff && p->nuser ? "\n" : "-\n");
  for (int i = 0; i < p->ngrads; i++) kn__sb_printf(sb, "%s%d", i ? " " : "", p->grad_input[i]);
  kn__sb_puts(sb, p->ngrads ? "\n" : "-\n");
  kn__sb_printf(sb, "%s %s\n%zu %zu\n", fh, bh, fl, bl);
}

void kn__aot_disk_store(const char *key, const kn__aot_prepared *p) {
  char name[100], fh[65], bh[65] = "-";
  kn__cachedir cd;
  if (!cache_open(&cd)) return;
  snprintf(name, sizeof name, "%.80s.entry", key);
  char *fc = round_trip_code(p->fw, fh), *bc = p->bw ? round_trip_code(p->bw, bh) : NULL;
  if (fc && (bc || !p->bw)) {
    kn__sb sb;
    kn__sb_init(&sb);
    put_header(&sb, key, p, fh, bh, strlen(fc), bc ? strlen(bc) : 0);
    kn__sb_puts(&sb, fc);
    if (bc) kn__sb_puts(&sb, bc);
    char dig[65];
    if (!kn__sb_failed(&sb)) {
      SHA256Data((const uint8_t *)kn__sb_cstr(&sb), sb.len, dig);
      kn__sb_printf(&sb, "\nsha256 %s\n", dig);
    }
    if (!kn__sb_failed(&sb)) {
      (void)kn__cache_sweep(cd.fd, kn__compile_timeout(NULL, 0));
      (void)kn__cache_write(cd.fd, name, kn__sb_cstr(&sb), sb.len);
    }
    kn__sb_fini(&sb);
  }
  free(fc);
  free(bc);
  kn__cachedir_close(&cd);
}

/* ---- reading ------------------------------------------------------------------------ */

/* The body's length when the trailing "\nsha256 <hex>\n" matches it, else 0. */
static size_t verified_body(const char *s, size_t len) {
  const size_t tail = 1 + 7 + 64 + 1;
  if (len <= tail || strncmp(s + len - tail, "\nsha256 ", 8) || s[len - 1] != '\n') return 0;
  char dig[65];
  SHA256Data((const uint8_t *)s, len - tail, dig);
  return strncmp(dig, s + len - tail + 8, 64) ? 0 : len - tail;
}

/* Next line of *s (NUL-terminated in place); NULL at the end. */
static char *next_line(char **s, char *end) {
  char *l = *s, *nl = l < end ? memchr(l, '\n', (size_t)(end - l)) : NULL;
  if (!nl) return NULL;
  *nl = '\0';
  *s = nl + 1;
  return l;
}

static kn__graph *parse_checked(const char *code, size_t len, const char *hash) {
  char *c = strndup(code, len);
  kn__graph *g = c ? kn__graph_parse(c, NULL, 0) : NULL;
  free(c);
  char h[65];
  if (g && (!graph_digest(g, h) || strcmp(h, hash))) {
    kn__graph_free(g);
    g = NULL;
  }
  return g;
}

static bool parse_arrays(char *od, char *gi, kn__aot_prepared *p) {
  p->out_diff = calloc((size_t)p->nuser + 1, sizeof *p->out_diff);
  p->grad_input = calloc((size_t)p->ngrads + 1, sizeof *p->grad_input);
  if (!p->out_diff || !p->grad_input) return false;
  if (strcmp(od, "-") && (int)strlen(od) != p->nuser) return false;
  for (int i = 0; strcmp(od, "-") && i < p->nuser; i++) p->out_diff[i] = od[i] == '1';
  char *q = gi;
  for (int i = 0; i < p->ngrads; i++) {
    char *e;
    long v = strtol(q, &e, 10);
    if (e == q || v < 0) return false;
    p->grad_input[i] = (int)v;
    q = e;
  }
  return true;
}

/* Fill p from an entry body; false (p partly filled) when it does not hold. */
static bool parse_entry(char *s, size_t len, const char *key, kn__aot_prepared *p) {
  char *end = s + len, *l[6];
  for (int i = 0; i < 6; i++)
    if (!(l[i] = next_line(&s, end))) return false;
  char k[80], fh[80], bh[80];
  int inf;
  size_t fl, bl;
  if (sscanf(l[0], "kiln-aot-cache 1 %70s", k) != 1 || strcmp(k, key) ||
      sscanf(l[1], "%d %d %d %d", &inf, &p->nuser, &p->ngrads, &p->nsaved) != 4 ||
      sscanf(l[4], "%70s %70s", fh, bh) != 2 || sscanf(l[5], "%zu %zu", &fl, &bl) != 2 ||
      p->nuser < 0 || p->ngrads < 0 || p->nsaved < 0 || fl + bl != (size_t)(end - s))
    return false;
  p->inference = inf == 1;
  if (!parse_arrays(l[2], l[3], p)) return false;
  p->fw = parse_checked(s, fl, fh);
  p->bw = p->inference ? NULL : parse_checked(s + fl, bl, bh);
  if (!p->fw || (!p->inference && !p->bw)) return false;
  const kn__gnode *fo = kn__graph_output_node(p->fw);
  return fo && fo->nargs == p->nuser + p->nsaved;
}

bool kn__aot_disk_load(const char *key, bool inference, kn__aot_prepared *out, char *why,
                       size_t n) {
  char name[100], path[KN__CACHE_PATH_CAP + 100], fwhy[400];
  kn__cachedir cd;
  bool missing = true;
  size_t len = 0;
  snprintf(why, n, "not in cache");
  if (!cache_open(&cd)) return false;
  snprintf(name, sizeof name, "%.80s.entry", key);
  snprintf(path, sizeof path, "%s/%s", cd.path, name);
  char *s = kn__cache_read(cd.fd, name, MAX_ENTRY_BYTES, &len, &missing, fwhy, sizeof fwhy);
  kn__cachedir_close(&cd);
  if (!s && missing) return false;
  if (!s) {
    snprintf(why, n, "corrupted cache entry (rebuilt)");
    KN_LOG(KN_LOG_AOT, KN_WARNING, "AOT cache: %s: %s; rebuilding", path, fwhy);
    return false;
  }
  size_t body = verified_body(s, len);
  kn__aot_prepared p = {0};
  bool ok = body > 0 && parse_entry(s, body, key, &p) && p.inference == inference;
  free(s);
  if (!ok) {
    snprintf(why, n, "corrupted cache entry (rebuilt)");
    KN_LOG(KN_LOG_AOT, KN_WARNING, "AOT cache: %s is not a valid entry for its key; rebuilding",
           path);
    kn__graph_free(p.fw);
    kn__graph_free(p.bw);
    free(p.out_diff);
    free(p.grad_input);
    return false;
  }
  out->inference = p.inference;
  out->nuser = p.nuser;
  out->ngrads = p.ngrads;
  out->nsaved = p.nsaved;
  out->fw = p.fw;
  out->bw = p.bw;
  out->out_diff = p.out_diff;
  out->grad_input = p.grad_input;
  return true;
}
