/*
** tests/support/fakecuda_exec.c: the fake CUDA driver's modules, kernels
** and graphs (the rest of the fake is fakecuda.c).
**
** cuModuleLoadData takes the images of the fake NVRTC (fakenvrtc.c: a
** magic line, then the CUDA source): it builds the source for the host
** with g++ and tests/cuda/shim.h (CUDA's built-ins for g++) into a shared
** object, with one launcher per `extern "C" __global__` kernel that calls
** the kernel for every thread of every block (sequentially, or with the
** shim's real threads when the kernel synchronises its block or shuffles),
** and loads it. Any other image (a real cubin or PTX) is refused with
** CUDA_ERROR_NOT_SUPPORTED. A launch runs at once with every live
** allocation accessible; one-dimensional grids and blocks only.
**
** Stream capture records launches (their argument values copied, as the
** real driver does), device-to-device copies and memsets as graph nodes;
** cuGraphLaunch replays the nodes on the host, without the caller's launch
** path. fakecuda_exec_counters() reports kernels run by cuLaunchKernel,
** graph launches and kernels replayed by graphs, so a test can tell a replay
** from a second run of the host program.
*/
#define _GNU_SOURCE /* mkdtemp */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/fakecuda.h"

#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#define API __attribute__((visibility("default")))

typedef void (*launcher)(unsigned grid, unsigned block, void **args);

typedef struct fake_fn {
  launcher run;
  const unsigned *argsz; /* sizes of the parameters, 0-ended */
  int nargs;
} fake_fn;

typedef struct fake_module {
  void *so;
  fake_fn *fns[64];
  int nfns;
} fake_module;

typedef struct node {
  const fake_fn *fn; /* NULL: a copy (src) or memset (src NULL, byte), or host work */
  void (*host)(const void *args); /* host work (fake cuBLAS): run(args) */
  unsigned grid, block;
  _Alignas(16) unsigned char args[2048]; /* the parameters' values, each at a
                                          ** multiple of 16 (arg_at) */
  void *dst;
  const void *src;
  int byte;
  size_t n;
} node;

typedef struct graph {
  node *nodes;
  size_t n, cap;
} graph;

static pthread_mutex_t xmu = PTHREAD_MUTEX_INITIALIZER;
static graph *capture;          /* the graph being captured, under xmu */
static const fake_fn *known[1024]; /* every function handed out, under xmu */
static int nknown;
static long n_kernels, n_graph_launches, n_replayed; /* under xmu */

API int fakecuda_exec_counters(long *kernels, long *graph_launches, long *replayed) {
  pthread_mutex_lock(&xmu);
  *kernels = n_kernels;
  *graph_launches = n_graph_launches;
  *replayed = n_replayed;
  pthread_mutex_unlock(&xmu);
  return 0;
}

bool fake_capturing(void) {
  pthread_mutex_lock(&xmu);
  bool on = capture != NULL;
  pthread_mutex_unlock(&xmu);
  return on;
}

/* Append a node to g (xmu held). */
static int add_node(graph *g, const node *nd) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    node *nn = realloc(g->nodes, cap * sizeof *nn);
    if (!nn) return FAKE_OUT_OF_MEMORY;
    g->nodes = nn;
    g->cap = cap;
  }
  g->nodes[g->n++] = *nd;
  return FAKE_SUCCESS;
}

/* Run host work with device memory open (as a kernel runs). */
static void run_host(void (*run)(const void *), const void *args) {
  fake_run_begin();
  run(args);
  fake_run_end();
}

int fake_host_work(void (*run)(const void *args), const void *args, size_t n) {
  node nd = {.host = run};
  if (n > sizeof nd.args) return FAKE_INVALID_VALUE;
  memcpy(nd.args, args, n);
  pthread_mutex_lock(&xmu);
  int r = capture ? add_node(capture, &nd) : FAKE_SUCCESS;
  bool now = !capture;
  if (now) n_kernels++;
  pthread_mutex_unlock(&xmu);
  if (now) run_host(run, nd.args);
  return r;
}

int fake_capture_copy(void *dst, const void *src, int byte, size_t n) {
  node nd = {.dst = dst, .src = src, .byte = byte, .n = n};
  pthread_mutex_lock(&xmu);
  int r = capture ? add_node(capture, &nd) : FAKE_INVALID_VALUE;
  pthread_mutex_unlock(&xmu);
  return r;
}

/* ---- building an image ---------------------------------------------------------- */

/* The end of the matching bracket of the one at p (open/close), or NULL. */
static const char *match(const char *p, char open, char close) {
  int depth = 0;
  for (; *p; p++) {
    if (*p == open) depth++;
    else if (*p == close && --depth == 0) return p;
  }
  return NULL;
}

/* One parameter's type: the text of [b, e) without its last identifier. */
static void param_type(const char *b, const char *e, char *out, size_t n) {
  while (e > b && (e[-1] == ' ' || e[-1] == '\n')) e--;
  const char *name = e;
  while (name > b && (name[-1] == '_' || (name[-1] >= '0' && name[-1] <= '9') ||
                      ((name[-1] | 32) >= 'a' && (name[-1] | 32) <= 'z')))
    name--;
  while (b < name && (*b == ' ' || *b == '\n')) b++;
  snprintf(out, n, "%.*s", (int)(name - b), b);
}

/* The launcher and parameter sizes of the kernel whose name starts at nm
** and parameters at open ('('), appended to f. */
static bool put_launcher(FILE *f, const char *nm, const char *open) {
  const char *close = match(open, '(', ')'), *body = close ? strchr(close, '{') : NULL;
  const char *end = body ? match(body, '{', '}') : NULL;
  if (!end) return false;
  int nlen = (int)(open - nm);
  bool sync = false;
  for (const char *w = body; w < end && !sync; w++)
    sync = !strncmp(w, "__syncthreads", 13) || !strncmp(w, "__shfl", 6) ||
           !strncmp(w, "kn_block_", 9);
  fprintf(f, "extern \"C\" void kn_fake_launch_%.*s(unsigned g, unsigned b, void **a) {\n"
             "  kn_fake_run(g, b, %d, [&] { %.*s(", nlen, nm, sync, nlen, nm);
  char sizes[2048] = "";
  size_t ns = 0;
  int i = 0;
  for (const char *p = open + 1; p < close && close - open > 1; i++) {
    const char *q = p;
    while (q < close && *q != ',') q++;
    char ty[256];
    param_type(p, q, ty, sizeof ty);
    fprintf(f, "%s*(%s *)a[%d]", i ? ", " : "", ty, i);
    ns += (size_t)snprintf(sizes + ns, sizeof sizes - ns, "sizeof(%s), ", ty);
    p = q + 1;
  }
  fprintf(f, "); });\n}\nextern \"C\" const unsigned kn_fake_argsz_%.*s[] = {%s0};\n", nlen, nm,
          sizes);
  return ns < sizeof sizes;
}

static const char prelude[] =
    "#include <functional>\n"
    "static void kn_fake_run(unsigned g, unsigned b, int sync, const std::function<void()> &fn) {\n"
    "  if (sync) { kn_shim_run(g, b, fn); return; }\n"
    "  gridDim = {g, 1, 1};\n  blockDim = {b, 1, 1};\n"
    "  for (unsigned x = 0; x < g; x++) {\n    blockIdx = {x, 0, 0};\n"
    "    for (unsigned t = 0; t < b; t++) {\n      threadIdx = {t, 0, 0};\n      fn();\n    }\n"
    "  }\n}\n";

/* dir/src.cpp: the source and a launcher per kernel. */
static bool write_source(const char *path, const char *src) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  fputs(src, f);
  fputs("\n", f);
  fputs(prelude, f);
  bool ok = true;
  static const char key[] = "extern \"C\" __global__ void ";
  for (const char *p = strstr(src, key); p && ok; p = strstr(p + 1, key)) {
    const char *nm = p + sizeof key - 1, *open = strchr(nm, '(');
    ok = open && put_launcher(f, nm, open);
  }
  return fclose(f) == 0 && ok;
}

/* Build the source into dir/mod.so and load it. */
static void *build(const char *src) {
  const char *tmp = getenv("TMPDIR");
  char dir[512], path[600], cmd[2000];
  snprintf(dir, sizeof dir, "%s/kiln-fakecuda-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return NULL;
  snprintf(path, sizeof path, "%s/src.cpp", dir);
  void *so = NULL;
  if (write_source(path, src)) {
    snprintf(cmd, sizeof cmd,
             "g++ -std=c++17 -O1 -fPIC -shared -pthread -w -include %s -o %s/mod.so %s 1>&2",
             KN_FAKECUDA_SHIM, dir, path);
    if (system(cmd) == 0) {
      snprintf(path, sizeof path, "%s/mod.so", dir);
      so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (!so) fprintf(stderr, "fakecuda: %s\n", dlerror());
    }
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "fakecuda: could not remove %s\n", dir);
  return so;
}

API int cuModuleLoadData(void **m, const void *image) {
  *m = NULL;
  if (!image) return FAKE_INVALID_VALUE;
  if (strncmp(image, FAKE_PTX_MAGIC, sizeof FAKE_PTX_MAGIC - 1) != 0) return FAKE_NOT_SUPPORTED;
  fake_module *mod = calloc(1, sizeof *mod);
  if (!mod) return FAKE_OUT_OF_MEMORY;
  mod->so = build((const char *)image + sizeof FAKE_PTX_MAGIC - 1);
  if (!mod->so) {
    free(mod);
    return FAKE_INVALID_IMAGE;
  }
  *m = mod;
  return FAKE_SUCCESS;
}

API int cuModuleGetFunction(void **f, void *m, const char *name) {
  *f = NULL;
  fake_module *mod = m;
  if (!mod || !name) return FAKE_INVALID_HANDLE;
  char sym[300];
  snprintf(sym, sizeof sym, "kn_fake_launch_%s", name);
  launcher run = (launcher)(uintptr_t)dlsym(mod->so, sym);
  snprintf(sym, sizeof sym, "kn_fake_argsz_%s", name);
  const unsigned *argsz = dlsym(mod->so, sym);
  if (!run || !argsz) return FAKE_NOT_FOUND;
  fake_fn *fn = calloc(1, sizeof *fn);
  if (!fn || mod->nfns == 64) {
    free(fn);
    return FAKE_OUT_OF_MEMORY;
  }
  fn->run = run;
  fn->argsz = argsz;
  while (argsz[fn->nargs]) fn->nargs++;
  pthread_mutex_lock(&xmu);
  int r = nknown < 1024 ? FAKE_SUCCESS : FAKE_OUT_OF_MEMORY;
  if (r == FAKE_SUCCESS) known[nknown++] = fn;
  pthread_mutex_unlock(&xmu);
  if (r != FAKE_SUCCESS) {
    free(fn);
    return r;
  }
  mod->fns[mod->nfns++] = fn;
  *f = fn;
  return FAKE_SUCCESS;
}

static void forget(const fake_fn *fn) {
  pthread_mutex_lock(&xmu);
  for (int i = 0; i < nknown; i++)
    if (known[i] == fn) known[i] = known[--nknown];
  pthread_mutex_unlock(&xmu);
}

API int cuModuleUnload(void *m) {
  fake_module *mod = m;
  if (!mod) return FAKE_INVALID_HANDLE;
  for (int i = 0; i < mod->nfns; i++) {
    forget(mod->fns[i]);
    free(mod->fns[i]);
  }
  dlclose(mod->so);
  free(mod);
  return FAKE_SUCCESS;
}

/* ---- launches and graphs ---------------------------------------------------------- */

/* Where parameter i of fn lives in a node's args (-1: they do not fit): the
** parameters one after another, each rounded up to 16 bytes (a struct
** passed by value, as the copy kernels' geometry, is larger). */
static long arg_at(const fake_fn *fn, int i) {
  long at = 0;
  for (int k = 0; k < i; k++) at += (fn->argsz[k] + 15) / 16 * 16;
  return at + fn->argsz[i] <= (long)sizeof ((node *)0)->args ? at : -1;
}

/* Run a kernel node. */
static void run_kernel(const node *nd) {
  void *argv[16];
  for (int i = 0; i < nd->fn->nargs; i++) argv[i] = (void *)(nd->args + arg_at(nd->fn, i));
  fake_run_begin();
  nd->fn->run(nd->grid, nd->block, argv);
  fake_run_end();
}

static bool is_known(const void *f) {
  for (int i = 0; i < nknown; i++)
    if (known[i] == f) return true;
  return false;
}

API int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shmem, void *s, void **args, void **extra) {
  (void)shmem, (void)s, (void)extra;
  pthread_mutex_lock(&xmu);
  const fake_fn *fn = is_known(f) ? f : NULL;
  int r = !fn ? FAKE_NOT_SUPPORTED
          : gy != 1 || gz != 1 || by != 1 || bz != 1 || fn->nargs > 16 ? FAKE_NOT_SUPPORTED
          : FAKE_SUCCESS;
  node nd = {.fn = fn, .grid = gx, .block = bx};
  for (int i = 0; r == FAKE_SUCCESS && i < fn->nargs; i++) {
    long at = arg_at(fn, i);
    if (at < 0) r = FAKE_NOT_SUPPORTED;
    else memcpy(nd.args + at, args[i], fn->argsz[i]);
  }
  if (r == FAKE_SUCCESS && capture) r = add_node(capture, &nd);
  else if (r == FAKE_SUCCESS) n_kernels++;
  bool run_now = r == FAKE_SUCCESS && !capture;
  pthread_mutex_unlock(&xmu);
  if (run_now) run_kernel(&nd);
  return r;
}

API int cuStreamBeginCapture_v2(void *s, int mode) {
  (void)s;
  if (mode < 0 || mode > 2) return FAKE_INVALID_VALUE;
  graph *g = calloc(1, sizeof *g);
  if (!g) return FAKE_OUT_OF_MEMORY;
  pthread_mutex_lock(&xmu);
  int r = capture ? FAKE_CAPTURE_UNSUPPORTED : FAKE_SUCCESS;
  if (r == FAKE_SUCCESS) capture = g;
  pthread_mutex_unlock(&xmu);
  if (r != FAKE_SUCCESS) free(g);
  return r;
}

API int cuStreamEndCapture(void *s, void **out) {
  (void)s;
  pthread_mutex_lock(&xmu);
  graph *g = capture;
  capture = NULL;
  pthread_mutex_unlock(&xmu);
  *out = g;
  return g ? FAKE_SUCCESS : FAKE_INVALID_VALUE;
}

API int cuGraphInstantiateWithFlags(void **exec, void *gr, unsigned long long flags) {
  (void)flags;
  *exec = NULL;
  const graph *g = gr;
  if (!g) return FAKE_INVALID_VALUE;
  graph *x = calloc(1, sizeof *x);
  node *nodes = g->n ? malloc(g->n * sizeof *nodes) : NULL;
  if (!x || (g->n && !nodes)) {
    free(x);
    free(nodes);
    return FAKE_OUT_OF_MEMORY;
  }
  if (g->n) memcpy(nodes, g->nodes, g->n * sizeof *nodes);
  x->nodes = nodes;
  x->n = x->cap = g->n;
  *exec = x;
  return FAKE_SUCCESS;
}

API int cuGraphLaunch(void *exec, void *s) {
  (void)s;
  const graph *x = exec;
  if (!x) return FAKE_INVALID_VALUE;
  if (fake_capturing()) return FAKE_CAPTURE_UNSUPPORTED;
  pthread_mutex_lock(&xmu);
  n_graph_launches++;
  pthread_mutex_unlock(&xmu);
  for (size_t i = 0; i < x->n; i++) {
    const node *nd = &x->nodes[i];
    if (!nd->fn && !nd->host) {
      fake_copy_now(nd->dst, nd->src, nd->byte, nd->n);
      continue;
    }
    pthread_mutex_lock(&xmu);
    n_replayed++; /* a kernel, or host work standing for one */
    pthread_mutex_unlock(&xmu);
    if (nd->host) run_host(nd->host, nd->args);
    else run_kernel(nd);
  }
  return FAKE_SUCCESS;
}

static int free_graph(void *gr) {
  graph *g = gr;
  if (!g) return FAKE_INVALID_VALUE;
  free(g->nodes);
  free(g);
  return FAKE_SUCCESS;
}

API int cuGraphExecDestroy(void *exec) { return free_graph(exec); }

API int cuGraphDestroy(void *gr) { return free_graph(gr); }
