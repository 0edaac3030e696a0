/*
** inductor/toolchain.c: turning generated C into loaded code, with caches.
**
** The compiler is KILN_CC (default "cc") with KILN_CFLAGS (default
** "-O3 -march=native -fopenmp -ffp-contract=off"; -shared -fPIC are always
** added), started with fork/exec (no shell); its stderr is captured.
**
** Caches. In memory: a process-wide table key -> loaded entry point (loaded
** code is never unmapped). On disk, under KILN_CACHE_DIR (default
** $XDG_CACHE_HOME/kiln or ~/.cache/kiln), subdirectory "inductor":
**   <key>.c      the source (what inductor_output_code names)
**   <key>.so     the shared object
**   <key>.meta   "kiln-inductor-cache 1 <key> <size> <sha256 of the .so>"
** key = SHA-256 of the source, the compiler's resolved path, size and mtime
** (its identity: an upgrade changes it), the flags and kiln's version. Every
** file is written to a temporary name and renamed, so a reader never sees a
** partial file and two processes compiling the same graph both succeed. A
** .so whose size or digest differs from its .meta (truncated, corrupted,
** replaced) is logged and rebuilt. A directory that cannot be created or
** written means compiling in a temporary directory, with one warning.
*/
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/codeid.h"
#include "core/error.h"
#include "inductor/inductor.h"
#include "logging/log.h"
#include "trace/events.h"

#define DEFAULT_CFLAGS "-O3 -march=native -fopenmp -ffp-contract=off"
#define MAX_ARGS 64

/* ---- the memory cache --------------------------------------------------------- */
typedef struct mem_entry { char key[65]; kn__ind_call_fn call; struct mem_entry *next; } mem_entry;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_entry *mem_head;

static kn__ind_call_fn mem_find(const char *key) {
  pthread_mutex_lock(&mem_lock);
  kn__ind_call_fn fn = NULL;
  for (mem_entry *e = mem_head; e && !fn; e = e->next)
    if (!strcmp(e->key, key)) fn = e->call;
  pthread_mutex_unlock(&mem_lock);
  return fn;
}

static void mem_add(const char *key, kn__ind_call_fn fn) {
  mem_entry *e = calloc(1, sizeof *e);
  if (!e) return; /* only a missed cache hit later */
  memcpy(e->key, key, 65);
  e->call = fn;
  pthread_mutex_lock(&mem_lock);
  e->next = mem_head;
  mem_head = e;
  pthread_mutex_unlock(&mem_lock);
}

void kn__ind_cache_forget_memory(void) {
  pthread_mutex_lock(&mem_lock);
  while (mem_head) {
    mem_entry *e = mem_head;
    mem_head = e->next;
    free(e);
  }
  pthread_mutex_unlock(&mem_lock);
}

/* ---- the toolchain ------------------------------------------------------------ */
typedef struct tool {
  char cc[1024];          /* as given */
  char resolved[4096];    /* found on PATH; "" when missing */
  char flags[2048];
  char ident[4300];       /* resolved path, size, mtime */
} tool;

static bool find_on_path(const char *cc, char *out, size_t n) {
  if (strchr(cc, '/')) return realpath(cc, out) != NULL || (snprintf(out, n, "%s", cc), false);
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  for (const char *p = path; *p;) {
    const char *e = strchr(p, ':');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char cand[4096];
    snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, cc);
    if (access(cand, X_OK) == 0 && realpath(cand, out)) return true;
    p += len + (e ? 1 : 0);
  }
  return false;
}

static void tool_init(tool *t) {
  const char *cc = getenv("KILN_CC"), *fl = getenv("KILN_CFLAGS");
  snprintf(t->cc, sizeof t->cc, "%s", cc && *cc ? cc : "cc");
  snprintf(t->flags, sizeof t->flags, "%s", fl ? fl : DEFAULT_CFLAGS);
  struct stat sb;
  if (!find_on_path(t->cc, t->resolved, sizeof t->resolved)) t->resolved[0] = 0;
  if (t->resolved[0] && stat(t->resolved, &sb) == 0)
    snprintf(t->ident, sizeof t->ident, "%s %lld %lld", t->resolved, (long long)sb.st_size,
             (long long)sb.st_mtime);
  else snprintf(t->ident, sizeof t->ident, "%s (not found)", t->cc);
}

static void cache_key(const char *src, const tool *t, char key[65]) {
  SHA2_CTX ctx;
  SHA256Init(&ctx);
  const char *parts[] = {src, t->ident, t->flags, kn_version(), "abi 1"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    SHA256Update(&ctx, (const uint8_t *)parts[i], strlen(parts[i]) + 1);
  SHA256End(&ctx, key);
}

/* Read all of fd into sb (the compiler's messages). */
static void drain(int fd, kn__sb *sb) {
  char buf[4096];
  ssize_t r;
  while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
    if (r > 0) kn__sb_putn(sb, buf, (size_t)r);
}

static int split_flags(char *flags, char **argv, int at) {
  char *save = NULL;
  for (char *tok = strtok_r(flags, " \t\n", &save); tok && at < MAX_ARGS - 6;
       tok = strtok_r(NULL, " \t\n", &save))
    argv[at++] = tok;
  return at;
}

/* Run the compiler on src_path -> so_path. KN_OK, or an error with its
** messages (also kept in *msgs). */
static kn_status run_cc(const tool *t, const char *src_path, const char *so_path, kn__sb *msgs) {
  char flags[sizeof t->flags];
  memcpy(flags, t->flags, sizeof flags);
  char *argv[MAX_ARGS];
  int n = 0;
  argv[n++] = (char *)t->cc;
  n = split_flags(flags, argv, n);
  argv[n++] = (char *)"-shared";
  argv[n++] = (char *)"-fPIC";
  argv[n++] = (char *)"-o";
  argv[n++] = (char *)so_path;
  argv[n++] = (char *)src_path;
  argv[n++] = (char *)"-lm";
  argv[n] = NULL;
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) return kn__error(KN_EIO, "inductor: pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return kn__error(KN_EIO, "inductor: fork: %s", strerror(errno));
  }
  if (pid == 0) {
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    execvp(argv[0], argv);
    static const char m[] = "exec failed: no such compiler or not executable\n";
    ssize_t w = write(2, m, sizeof m - 1);
    (void)w;
    _exit(127);
  }
  close(pfd[1]);
  drain(pfd[0], msgs);
  close(pfd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code == 0) return KN_OK;
  KN_LOG(KN_LOG_INDUCTOR, KN_WARNING, "C compiler '%s' failed (exit status %d) on %s:\n%s",
         t->cc, code, src_path, kn__sb_cstr(msgs));
  if (code == 127 && !t->resolved[0])
    return kn__error(KN_EUNSUPPORTED, "inductor: no C compiler: '%s' was not found (set KILN_CC "
                     "to a C compiler, or use backend \"eager\")", t->cc);
  return kn__error(KN_EUNSUPPORTED, "inductor: the C compiler '%s' failed (exit status %d):\n%.1200s",
                   t->cc, code, kn__sb_cstr(msgs));
}

/* ---- files ---------------------------------------------------------------------- */
static kn_status write_atomic(const char *path, const char *data, size_t len) {
  char tmp[4400];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%p", path, (long)getpid(), (void *)&tmp);
  FILE *f = fopen(tmp, "wb");
  if (!f) return kn__error(KN_EIO, "inductor: cannot write '%s': %s", tmp, strerror(errno));
  bool ok = fwrite(data, 1, len, f) == len;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return kn__error(KN_EIO, "inductor: cannot write '%s'", path);
  }
  return KN_OK;
}

static kn_status load_so_timed(const char *path, kn__ind_call_fn *out);

/* dlopen the shared object and find its entry point (phase inductor_load). */
static kn_status load_so(const char *path, kn__ind_call_fn *out) {
  kn__ind_phase ph;
  kn__ind_phase_begin(&ph, "inductor_load");
  kn_status st = load_so_timed(path, out);
  kn__ind_phase_end(&ph);
  return st;
}

static kn_status load_so_timed(const char *path, kn__ind_call_fn *out) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return kn__error(KN_EIO, "inductor: cannot load '%s': %s", path, dlerror());
  int (*abi)(void) = (int (*)(void))dlsym(h, "kn_ind_abi");
  kn__ind_call_fn fn = (kn__ind_call_fn)dlsym(h, "call");
  if (!abi || !fn || abi() != KN__IND_ABI) {
    dlclose(h);
    return kn__error(KN_EIO, "inductor: '%s' is not a kiln inductor object of ABI %d", path,
                     KN__IND_ABI);
  }
  *out = fn; /* the handle stays open for the life of the process */
  return KN_OK;
}

/* ---- the disk cache ------------------------------------------------------------ */
static bool cache_dir(char *out, size_t n) {
  const char *d = getenv("KILN_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  if (d && *d) snprintf(out, n, "%s/inductor", d);
  else if (x && *x) snprintf(out, n, "%s/kiln/inductor", x);
  else if (h && *h) snprintf(out, n, "%s/.cache/kiln/inductor", h);
  else return false;
  return true;
}

static bool mkdirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return false;
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return false;
  return access(buf, W_OK | X_OK) == 0;
}

static atomic_bool warned_unwritable;

static void artifact(const char *name, const char *key, const char *reason) {
  if (!kn__trace_enabled()) return;
  json_t *j = json_pack("{s:s, s:s}", "key", key, "reason", reason);
  if (j) kn__trace_artifact_json(name, j, NULL);
  json_decref(j);
}

/* Is the cached .so at so intact (its .meta names key, size and digest)? */
static bool entry_valid(const char *base, const char *key, char *why, size_t n) {
  char path[4300], line[512], mkey[80] = "", dig[80] = "", fdig[80];
  long long size = -1;
  snprintf(path, sizeof path, "%s.meta", base);
  FILE *f = fopen(path, "r");
  if (!f) return snprintf(why, n, "not in cache"), false;
  bool parsed = fgets(line, sizeof line, f) &&
                sscanf(line, "kiln-inductor-cache 1 %70s %lld %70s", mkey, &size, dig) == 3;
  fclose(f);
  if (!parsed || strcmp(mkey, key))
    return snprintf(why, n, "foreign or corrupted cache entry (bad .meta)"), false;
  snprintf(path, sizeof path, "%s.so", base);
  struct stat sb;
  if (stat(path, &sb) != 0) return snprintf(why, n, "cache entry without its .so"), false;
  if ((long long)sb.st_size != size || !SHA256File(path, fdig) || strcmp(fdig, dig))
    return snprintf(why, n, "truncated or corrupted .so (size or SHA-256 differs from .meta)"),
           false;
  return true;
}

/* Compile into dir as <key>.*; then record the .meta. */
static kn_status build_in(const tool *t, const char *src, const char *base, const char *key,
                          bool record) {
  char cpath[4300], so[4300], tmpso[4400];
  snprintf(cpath, sizeof cpath, "%s.c", base);
  snprintf(so, sizeof so, "%s.so", base);
  snprintf(tmpso, sizeof tmpso, "%s.so.tmp.%ld.%p", base, (long)getpid(), (void *)&tmpso);
  kn_status st = write_atomic(cpath, src, strlen(src));
  if (st != KN_OK) return st;
  kn__sb msgs;
  kn__sb_init(&msgs);
  kn__ind_phase ph;
  kn__ind_phase_begin(&ph, "inductor_cc");
  st = run_cc(t, cpath, tmpso, &msgs);
  kn__ind_phase_end(&ph);
  kn__sb_fini(&msgs);
  if (st != KN_OK || rename(tmpso, so) != 0) {
    unlink(tmpso);
    return st != KN_OK ? st : kn__error(KN_EIO, "inductor: cannot rename into '%s'", so);
  }
  if (!record) return KN_OK;
  char dig[80], meta[300];
  struct stat sb;
  if (stat(so, &sb) != 0 || !SHA256File(so, dig)) return KN_OK; /* entry stays unrecorded */
  int len = snprintf(meta, sizeof meta, "kiln-inductor-cache 1 %s %lld %s\n", key,
                     (long long)sb.st_size, dig);
  snprintf(cpath, sizeof cpath, "%s.meta", base);
  (void)write_atomic(cpath, meta, (size_t)len);
  return KN_OK;
}

/* path made absolute as Python's os.path.abspath does: joined to the
** working directory when relative, "." and "x/.." segments and repeated
** slashes dropped (symbolic links are not resolved). False if it does not fit. */
static bool abs_path(const char *path, char *out, size_t n) {
  char joined[8400];
  if (path[0] != '/' && !getcwd(joined, sizeof joined - 1)) return false;
  size_t cl = path[0] == '/' ? 0 : strlen(joined);
  if (snprintf(joined + cl, sizeof joined - cl, "/%s", path) >= (int)(sizeof joined - cl)) return false;
  size_t len = 0;
  for (char *save = NULL, *seg = strtok_r(joined, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
    if (!strcmp(seg, ".")) continue;
    if (!strcmp(seg, "..")) { /* back to the previous '/' */
      while (len > 0 && out[--len] != '/') {}
      continue;
    }
    int w = snprintf(out + len, n - len, "/%s", seg);
    if (w < 0 || (size_t)w >= n - len) return false;
    len += (size_t)w;
  }
  if (len == 0 && n > 1) out[len++] = '/';
  out[len] = '\0';
  return true;
}

/* The inductor_output_code record (filename: the path kiln wrote the source
** to; file_path: the same made absolute, as PyTorch writes it) and the
** output_code log artifact. */
static void output_code(const char *src, const char *path) {
  KN_LOG_ARTIFACT(KN_ART_OUTPUT_CODE, "Output code written to: %s\nOutput code: \n%s", path, src);
  if (!kn__trace_enabled()) return;
  char abs[4400];
  json_t *md = json_pack("{s:s, s:s}", "filename", path, "file_path",
                         abs_path(path, abs, sizeof abs) ? abs : path);
  kn__trace_opts o = {.file = __FILE__, .line = __LINE__};
  if (md) (void)kn__trace_structured("inductor_output_code", md, src, SIZE_MAX, &o);
}

/* No usable cache directory: compile in a temporary one, then remove it. */
static kn_status build_bypass(const tool *t, const char *src, const char *key, const char *akey,
                              const char *why, kn__ind_call_fn *fn) {
  const char *tmp = getenv("TMPDIR");
  char dir[4096], base[4200];
  snprintf(dir, sizeof dir, "%s/kiln-inductor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return kn__error(KN_EIO, "inductor: cannot create a temporary directory "
                                      "for the compiler: %s", strerror(errno));
  snprintf(base, sizeof base, "%s/%s", dir, key);
  char cpath[4300];
  snprintf(cpath, sizeof cpath, "%s.c", base);
  output_code(src, cpath);
  artifact("fx_graph_cache_bypass", akey, why);
  kn_status st = build_in(t, src, base, key, false);
  char so[4300];
  snprintf(so, sizeof so, "%s.so", base);
  if (st == KN_OK) st = load_so(so, fn);
  unlink(so);
  snprintf(so, sizeof so, "%s.c", base);
  unlink(so);
  rmdir(dir);
  return st;
}

static kn_status load_disk(const tool *t, const char *src, const char *dir, const char *key,
                           const char *akey, kn__ind_call_fn *fn) {
  char base[4200], why[200], so[4300];
  snprintf(base, sizeof base, "%s/%s", dir, key);
  snprintf(so, sizeof so, "%s.so", base);
  if (entry_valid(base, key, why, sizeof why) && load_so(so, fn) == KN_OK) {
    char cpath[4300];
    snprintf(cpath, sizeof cpath, "%s.c", base);
    output_code(src, cpath);
    artifact("fx_graph_cache_hit", akey, "found on disk");
    return KN_OK;
  }
  if (strcmp(why, "not in cache"))
    KN_LOG(KN_LOG_INDUCTOR_CODECACHE, KN_WARNING, "inductor cache: %s: %s; rebuilding", base, why);
  char cpath[4300];
  snprintf(cpath, sizeof cpath, "%s.c", base);
  output_code(src, cpath); /* the seeds' order: output code, then the cache artifact */
  artifact("fx_graph_cache_miss", akey, why);
  kn_status st = build_in(t, src, base, key, true);
  return st == KN_OK ? load_so(so, fn) : st;
}

static void graph_key(const char *text, const tool *t, char key[65]) {
  char kid[4400];
  kn__code_ident(kid, sizeof kid); /* a rebuilt kiln never reuses an older one's entries */
  SHA2_CTX ctx;
  SHA256Init(&ctx);
  const char *parts[] = {"kiln-inductor-graph", text, t->ident, t->flags, kn_version(), kid,
                         "abi 1"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    SHA256Update(&ctx, (const uint8_t *)parts[i], strlen(parts[i]) + 1);
  SHA256End(&ctx, key);
}

/* Find the source's shared object in memory, on disk, or build it;
** artifacts name akey (the graph key). */
static kn_status load_source(const tool *t, const char *src, const char *akey, bool dir_ok,
                             const char *dir, kn__ind_loaded *out) {
  cache_key(src, t, out->key);
  out->call = mem_find(out->key);
  if (out->call) {
    artifact("fx_graph_cache_hit", akey, "found in memory");
    return KN_OK;
  }
  kn_status st;
  if (!dir_ok) {
    if (!atomic_exchange(&warned_unwritable, true))
      KN_LOG(KN_LOG_INDUCTOR_CODECACHE, KN_WARNING, "inductor: cache directory '%s' cannot be "
             "created or written; compiling without a disk cache (set KILN_CACHE_DIR)", dir);
    st = build_bypass(t, src, out->key, akey, "cache directory not writable", &out->call);
  } else {
    st = load_disk(t, src, dir, out->key, akey, &out->call);
  }
  if (st == KN_OK) mem_add(out->key, out->call);
  return st;
}

/* The source file's text when someone will read it (output_code), else "". */
static char *read_source(const char *path) {
  if (!kn__trace_enabled() && !KN_ARTIFACT_ENABLED(KN_ART_OUTPUT_CODE)) return NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  kn__sb sb;
  kn__sb_init(&sb);
  drain(fileno(f), &sb);
  fclose(f);
  char *s = kn__sb_take(&sb);
  kn__sb_fini(&sb);
  return s;
}

/* <gkey>.fxg names the source key of a graph; a hit loads its .so without
** generating code. */
static bool graph_hit(const char *dir, const char *gkey, kn__ind_loaded *out) {
  char path[4300], line[256], g[80] = "", k[80] = "";
  snprintf(path, sizeof path, "%s/%s.fxg", dir, gkey);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fgets(line, sizeof line, f) &&
            sscanf(line, "kiln-inductor-graph 1 %70s %70s", g, k) == 2 && !strcmp(g, gkey) &&
            strlen(k) == 64;
  fclose(f);
  char base[4200], why[200], so[4300];
  snprintf(base, sizeof base, "%s/%s", dir, k);
  if (!ok || !entry_valid(base, k, why, sizeof why)) {
    KN_LOG(KN_LOG_INDUCTOR_CODECACHE, KN_DEBUG, "inductor cache: graph entry %s unusable (%s)",
           path, ok ? why : "bad .fxg");
    return false;
  }
  snprintf(so, sizeof so, "%s.so", base);
  if (load_so(so, &out->call) != KN_OK) return false;
  memcpy(out->key, k, 65);
  snprintf(path, sizeof path, "%s.c", base);
  char *src = read_source(path);
  if (src) output_code(src, path);
  free(src);
  artifact("fx_graph_cache_hit", gkey, "found on disk");
  return true;
}

static void graph_record(const char *dir, const char *gkey, const char *key) {
  char path[4300], line[200];
  snprintf(path, sizeof path, "%s/%s.fxg", dir, gkey);
  int len = snprintf(line, sizeof line, "kiln-inductor-graph 1 %s %s\n", gkey, key);
  (void)write_atomic(path, line, (size_t)len);
}

kn_status kn__ind_load_graph(const char *graph_text, bool by_graph, kn__ind_gen_fn gen, void *ud,
                             kn__ind_loaded *out) {
  tool *t = calloc(1, sizeof *t);
  if (!t) return kn__oom();
  tool_init(t);
  char gkey[65], dir[4096] = "(no HOME)";
  graph_key(graph_text, t, gkey);
  memcpy(out->graph_key, gkey, 65);
  kn_status st = KN_OK;
  if (by_graph && (out->call = mem_find(gkey))) {
    artifact("fx_graph_cache_hit", gkey, "found in memory");
    free(t);
    return KN_OK;
  }
  bool dir_ok = cache_dir(dir, sizeof dir) && mkdirs(dir);
  if (!(by_graph && dir_ok && graph_hit(dir, gkey, out))) {
    char *src = gen(ud);
    st = src ? load_source(t, src, gkey, dir_ok, dir, out) : kn_last_status();
    free(src);
    if (st == KN_OK && dir_ok && by_graph) graph_record(dir, gkey, out->key);
  }
  if (st == KN_OK && by_graph) mem_add(gkey, out->call);
  free(t);
  return st;
}
