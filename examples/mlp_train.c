/*
** examples/mlp_train.c: the main demo. Trains a small MLP (2 -> 32 -> 32 -> 1,
** tanh) to fit f(a, b) = sin(2a) * cos(b) on 256 points drawn from a seeded
** generator. The training step's forward pass and loss are a compiled
** function (kn_compile, eager backend): it is traced once into a graph, and
** every later step checks the guards and replays the cached graph; autograd
** runs through it, then plain SGD updates the parameters under no_grad.
** A structured trace goes to the directory named on the command line
** (default kiln_trace_demo); `kiln report DIR` turns it into HTML.
** Prints the loss every 100 steps; it falls by about two orders of magnitude.
** Uses only the public API (#include <kiln/kiln.h>).
*/
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPOINTS 256
#define HIDDEN 32
#define STEPS 1000
#define LR 0.1

typedef struct mlp {
  kn_tensor *w[3], *b[3]; /* owned; leaves that require grad */
  kn_module *module;      /* layers.0.weight ... layers.2.bias (retains them) */
} mlp;

/* Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights, as torch.nn.Linear. */
static kn_tensor *param(int64_t rows, int64_t cols, int64_t fan_in, kn_generator *gen) {
  kn_scope_begin();
  double bound = 1.0 / sqrt((double)fan_in);
  int64_t sizes[2] = {rows, cols};
  int nd = cols > 0 ? 2 : 1;
  kn_tensor *u = kn_rand(nd, sizes, gen, KN_FLOAT32);                 /* [0, 1) */
  kn_tensor *p = kn_add_scalar(kn_mul_scalar(u, kn_float(2 * bound)), kn_float(-bound));
  p = kn_scope_end_keep(p);
  if (p && kn_set_requires_grad(p, true) != KN_OK) {
    kn_release(p);
    return NULL;
  }
  return p;
}

/* The compiled function: loss = mse(mlp(x), y), args = (module, x, y). Inside
** a trace, kn_module_get returns the traced stand-ins of the parameters. */
static kn_value train_loss(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_module *m = args[0].u.m;
  kn_tensor *h = args[1].u.t;
  static const char *const names[3][2] = {{"layers.0.weight", "layers.0.bias"},
                                          {"layers.1.weight", "layers.1.bias"},
                                          {"layers.2.weight", "layers.2.bias"}};
  for (int i = 0; i < 3; i++) {
    h = kn_linear(h, kn_module_get(m, names[i][0]), kn_module_get(m, names[i][1]));
    if (i < 2) h = kn_tanh(h);
  }
  return kn_vtensor(kn_mse_loss(h, args[2].u.t, KN_REDUCTION_MEAN));
}

/* module.layers.<i>.{weight,bias} for the parameters. */
static kn_status build_module(mlp *m) {
  m->module = kn_module_new();
  if (!m->module) return KN_ENOMEM;
  kn_module *layers = kn_module_new();
  kn_status st = layers ? kn_module_add_child(m->module, "layers", layers) : KN_ENOMEM;
  for (int i = 0; i < 3 && st == KN_OK; i++) {
    kn_module *layer = kn_module_new();
    char name[8];
    snprintf(name, sizeof name, "%d", i);
    st = layer ? kn_module_add_child(layers, name, layer) : KN_ENOMEM;
    if (st == KN_OK) st = kn_module_add_param(layer, "weight", m->w[i]);
    if (st == KN_OK) st = kn_module_add_param(layer, "bias", m->b[i]);
  }
  return st;
}

/* p -= lr * p.grad; clear the grad. No graph is recorded for the update. */
static kn_status sgd_step(mlp *m, double lr) {
  bool prev = kn_no_grad_begin();
  kn_status st = KN_OK;
  for (int i = 0; i < 3 && st == KN_OK; i++) {
    kn_tensor *ps[2] = {m->w[i], m->b[i]};
    for (int j = 0; j < 2 && st == KN_OK; j++) {
      st = kn_sub_scaled_(ps[j], kn_grad(ps[j]), kn_float(lr));
      kn_set_grad(ps[j], NULL);
    }
  }
  kn_no_grad_end(prev);
  return st;
}

/* Inputs in [-1.5, 1.5)^2 and targets sin(2a) * cos(b). */
static kn_status make_data(kn_generator *gen, kn_tensor **x, kn_tensor **y) {
  kn_scope_begin();
  kn_tensor *u = kn_rand(KN_SHAPE(NPOINTS, 2), gen, KN_FLOAT32);
  kn_tensor *xs = kn_add_scalar(kn_mul_scalar(u, kn_float(3.0)), kn_float(-1.5));
  kn_tensor *a = kn_narrow(xs, 1, 0, 1), *b = kn_narrow(xs, 1, 1, 1); /* [N, 1] each */
  kn_tensor *ys = kn_mul(kn_sin(kn_mul_scalar(a, kn_float(2))), kn_cos(b));
  *x = kn_retain(xs);
  *y = kn_retain(ys);
  kn_scope_end();
  return *x && *y ? KN_OK : kn_last_status();
}

/* The kiln command: tools/kiln of the build tree this program was built in
** (it sits in <build>/examples/), else `kiln` from PATH (installed). */
static void kiln_command(const char *argv0, char *buf, size_t n) {
  const char *slash = strrchr(argv0, '/');
  snprintf(buf, n, "kiln");
  if (!slash) return;
  char cand[4200];
  snprintf(cand, sizeof cand, "%.*s/../tools/kiln", (int)(slash - argv0), argv0);
  FILE *f = fopen(cand, "rb");
  if (!f) return;
  fclose(f);
  /* print it the short way: <build>/tools/kiln when argv0 is <build>/examples/x */
  const char *dir_end = slash;
  const char *parent = dir_end;
  while (parent > argv0 && parent[-1] != '/') parent--;
  if (!strncmp(parent, "examples", (size_t)(dir_end - parent)) && dir_end - parent == 8)
    snprintf(buf, n, "%.*stools/kiln", (int)(parent - argv0), argv0);
  else
    snprintf(buf, n, "%s", cand);
}

int main(int argc, char **argv) {
  const char *trace_dir = argc > 1 ? argv[1] : "kiln_trace_demo";
  kn_generator *gen = kn_generator_new(1234);
  mlp m = {{NULL}, {NULL}, NULL};
  kn_tensor *x = NULL, *y = NULL;
  kn_compiled *step_fn = NULL;
  kn_compile_counter counter = {0, 0, "eager"};
  int rc = 1;
  if (kn_trace_enable(trace_dir) != KN_OK) goto done;
  if (!gen || make_data(gen, &x, &y) != KN_OK) goto done;
  m.w[0] = param(HIDDEN, 2, 2, gen), m.b[0] = param(HIDDEN, 0, 2, gen);
  m.w[1] = param(HIDDEN, HIDDEN, HIDDEN, gen), m.b[1] = param(HIDDEN, 0, HIDDEN, gen);
  m.w[2] = param(1, HIDDEN, HIDDEN, gen), m.b[2] = param(1, 0, HIDDEN, gen);
  for (int i = 0; i < 3; i++)
    if (!m.w[i] || !m.b[i]) goto done;
  if (build_module(&m) != KN_OK) goto done;
  kn_compile_options opts = {0};
  opts.backend_fn = kn_compile_counter_backend; /* counts graphs, compiles with "eager" */
  opts.backend_ud = &counter;
  opts.arg_names = (const char *const[]){"self", "x", "y"};
  opts.narg_names = 3;
  step_fn = kn_compile_fn(train_loss, NULL, 3, "train_loss", __FILE__, __LINE__, &opts);
  if (!step_fn) goto done;

  printf("kiln %s demo: MLP 2-%d-%d-1 (tanh), %d points, SGD lr=%.2f, forward+loss compiled\n",
         kn_version(), HIDDEN, HIDDEN, NPOINTS, LR);
  double first = 0, last = 0;
  for (int step = 0; step <= STEPS; step++) {
    kn_scope_begin();
    kn_value args[3] = {kn_vmodule(m.module), kn_vtensor(x), kn_vtensor(y)}, out;
    kn_status st = kn_call(step_fn, args, 3, &out);
    kn_tensor *loss = st == KN_OK ? out.u.t : NULL;
    double l = NAN;
    if (st == KN_OK) st = kn_item_double(loss, &l);
    if (st == KN_OK) st = kn_backward(loss, NULL);
    if (st == KN_OK) st = sgd_step(&m, LR);
    if (loss) kn_value_release(out);
    kn_scope_end();
    if (st != KN_OK) goto done;
    if (step == 0) first = l;
    last = l;
    if (step % 100 == 0) printf("step %4d  loss %.6f\n", step, l);
  }
  printf("loss fell from %.6f to %.6f (%.1fx)\n", first, last, first / last);
  printf("%d steps ran %d compiled graph(s) with %d ops (traced once, then guards + replay)\n",
         STEPS + 1, counter.frame_count, counter.op_count);
  char *path = kn_trace_file_path();
  printf("structured trace: %s\n", path ? path : "(none)");
  char kiln[4200];
  kiln_command(argv[0], kiln, sizeof kiln);
  printf("HTML report: %s report --overwrite -o %s_report %s\n", kiln, trace_dir, trace_dir);
  free(path);
  rc = last < first ? 0 : 1;
done:
  if (rc && kn_last_status() != KN_OK) fprintf(stderr, "error: %s\n", kn_last_error());
  kn_compiled_free(step_fn);
  kn_module_free(m.module);
  for (int i = 0; i < 3; i++) kn_release(m.w[i]), kn_release(m.b[i]);
  kn_release(x);
  kn_release(y);
  kn_generator_free(gen);
  return rc;
}
