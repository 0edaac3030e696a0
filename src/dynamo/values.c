/*
** dynamo/values.c: kiln values (tuples, release, clone), modules (named trees
** of parameters, buffers and submodules) and sources (paths from a call's
** arguments to one value, with PyTorch's source text: L['a'], L['ys'][0],
** L['self']._modules['layers']._modules['0']._parameters['weight']), also
** rooted at a declared global (G['model']) or at an object a trace captured
** (G['ud'], G['__module_0'], G['__tensor_0']: src/dynamo/lift.c).
**
** A module's struct outlives kn_module_free while a cache entry holds it
** (a captured module): kn_module_free destroys its contents and marks it
** freed, and the struct goes with the last reference, so a guard on it
** reads "freed" instead of freed memory.
*/
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strdist.h"
#include "kiln/cuda.h"
#include "dynamo/dynamo.h"
#include "tensor/tensor.h"
#include "tensor/handles.h"

/* ---- tuples --------------------------------------------------------------- */
static _Thread_local struct {
  kn_value **v;
  size_t n, cap;
} pool;

kn_value kn_tuple(int n, const kn_value *items) {
  kn_value r = kn_vnone();
  if (n < 0 || (n > 0 && !items)) {
    kn__error(KN_EINVAL, "kn_tuple: expected n >= 0 items, got n = %d and items %s", n,
              items ? "set" : "NULL");
    return r;
  }
  kn_value *copy = malloc(sizeof *copy * (size_t)(n ? n : 1));
  if (!copy) {
    kn__oom();
    return r;
  }
  if (n) memcpy(copy, items, sizeof *copy * (size_t)n);
  if (pool.n == pool.cap) {
    size_t nc = pool.cap ? pool.cap * 2 : 16;
    kn_value **nv = realloc(pool.v, nc * sizeof *nv);
    if (!nv) {
      free(copy);
      kn__oom();
      return r;
    }
    pool.v = nv;
    pool.cap = nc;
  }
  pool.v[pool.n++] = copy;
  r.kind = KN_VTUPLE;
  r.n = n;
  r.u.items = copy;
  return r;
}

void kn__tuple_pool_mark(size_t *mark) { *mark = pool.n; }

void kn__tuple_pool_release(size_t mark) {
  while (pool.n > mark) free(pool.v[--pool.n]);
  if (pool.n == 0) {
    free(pool.v);
    pool.v = NULL;
    pool.cap = 0;
  }
}

void kn_value_release(kn_value v) {
  if (v.kind == KN_VTENSOR) {
    kn_release(v.u.t);
  } else if (v.kind == KN_VTUPLE || v.kind == KN_VLIST) {
    for (int i = 0; i < v.n; i++) kn_value_release(v.u.items[i]);
    free((void *)v.u.items);
  }
}

kn_status kn__value_clone(kn_value v, kn_value *out) {
  *out = v;
  if (v.kind == KN_VTENSOR) {
    if (v.u.t) kn_retain(v.u.t);
    return KN_OK;
  }
  if (v.kind != KN_VTUPLE && v.kind != KN_VLIST) return KN_OK;
  kn_value *items = calloc((size_t)(v.n ? v.n : 1), sizeof *items);
  if (!items) {
    *out = kn_vnone();
    return kn__oom();
  }
  for (int i = 0; i < v.n; i++) {
    kn_status st = kn__value_clone(v.u.items[i], &items[i]);
    if (st != KN_OK) {
      for (int j = 0; j < i; j++) kn_value_release(items[j]);
      free(items);
      *out = kn_vnone();
      return st;
    }
  }
  out->u.items = items;
  return KN_OK;
}

const char *kn__value_pytype(kn_value_kind k) {
  switch (k) {
  case KN_VNONE: return "<class 'NoneType'>";
  case KN_VTENSOR: return "<class 'torch.Tensor'>";
  case KN_VINT: return "<class 'int'>";
  case KN_VDOUBLE: return "<class 'float'>";
  case KN_VBOOL: return "<class 'bool'>";
  case KN_VLIST: return "<class 'list'>";
  case KN_VTUPLE: return "<class 'tuple'>";
  case KN_VMODULE: return "<class 'kiln.Module'>";
  }
  return "<class 'object'>";
}

void kn__py_float_repr(double d, char *buf, size_t n) {
  if (isnan(d)) {
    snprintf(buf, n, "nan");
    return;
  }
  if (isinf(d)) {
    snprintf(buf, n, d > 0 ? "inf" : "-inf");
    return;
  }
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, n, "%.*g", p, d);
    if (strtod(buf, NULL) == d) break;
  }
  if (!strpbrk(buf, ".en")) {
    size_t l = strlen(buf);
    if (l + 3 <= n) memcpy(buf + l, ".0", 3);
  }
}

/* ---- modules ------------------------------------------------------------------- */
typedef struct mod_item {
  char *name;
  size_t len; /* strlen(name) */
  int kind; /* 0 param, 1 buffer, 2 child */
  kn_tensor *t;
  kn_module *child;
} mod_item;

struct kn_module {
  int n, cap;
  mod_item *items;
  int *hx, hcap;              /* with more than HX_MIN items: open-addressing index of the
                              ** names (item index + 1, 0 empty; hcap a power of 2) */
  void *ext;                  /* layer data (src/nn), owned through free_ext */
  void (*free_ext)(void *ext);
  atomic_int refs;            /* the owner's, plus one per source that captured it */
  atomic_bool freed;          /* kn_module_free ran: no contents any more */
};

kn_module *kn_module_new(void) {
  kn_module *m = calloc(1, sizeof(kn_module));
  if (m) atomic_init(&m->refs, 1);
  return m;
}

void kn__module_ref(kn_module *m) { atomic_fetch_add(&m->refs, 1); }

void kn__module_unref(kn_module *m) {
  if (m && atomic_fetch_sub(&m->refs, 1) == 1) free(m);
}

bool kn__module_freed(const kn_module *m) { return atomic_load(&m->freed); }

void kn_module_free(kn_module *m) {
  if (!m || atomic_load(&m->freed)) return;
  for (int i = 0; i < m->n; i++) {
    free(m->items[i].name);
    kn_release(m->items[i].t);
    kn_module_free(m->items[i].child);
  }
  free(m->items);
  free(m->hx);
  m->items = NULL;
  m->hx = NULL;
  m->n = m->cap = m->hcap = 0;
  if (m->free_ext) m->free_ext(m->ext);
  m->ext = NULL;
  m->free_ext = NULL;
  atomic_store(&m->freed, true);
  kn__module_unref(m);
}

void kn__module_set_ext(kn_module *m, void *ext, void (*free_ext)(void *)) {
  if (m->free_ext) m->free_ext(m->ext);
  m->ext = ext;
  m->free_ext = free_ext;
}

void *kn__module_ext(const kn_module *m) { return m ? m->ext : NULL; }

int kn__module_nitems(const kn_module *m) { return m ? m->n : 0; }

const char *kn__module_item(const kn_module *m, int i, int *kind, kn_tensor **t,
                            kn_module **child) {
  const mod_item *it = &m->items[i];
  *kind = it->kind;
  *t = it->t;
  *child = it->child;
  return it->name;
}

/* Names are found by a linear scan up to HX_MIN items, by the hash index
** above: a module path is resolved on every call of a compiled function
** that takes the module (an optimizer's state: hundreds of children). */
#define HX_MIN 8

static uint32_t name_hash(const char *s, size_t len) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static void hx_insert(int *hx, int hcap, const mod_item *it, int i) {
  uint32_t k = name_hash(it->name, it->len) & (uint32_t)(hcap - 1);
  while (hx[k]) k = (k + 1) & (uint32_t)(hcap - 1);
  hx[k] = i + 1;
}

/* Index item n - 1 (just added), growing the index to twice the items'
** capacity when needed. Out of memory, the module keeps no index (its names
** are found by scanning, as in a small module). */
static void hx_add(kn_module *m) {
  if (m->n <= HX_MIN) return;
  if (m->hcap < 2 * m->n) {
    int cap = 2 * m->cap < 32 ? 32 : 2 * m->cap;
    while (cap < 2 * m->n) cap *= 2;
    int *hx = calloc((size_t)cap, sizeof *hx);
    free(m->hx);
    m->hx = hx;
    m->hcap = hx ? cap : 0;
    for (int i = 0; hx && i < m->n; i++) hx_insert(hx, cap, &m->items[i], i);
    return;
  }
  hx_insert(m->hx, m->hcap, &m->items[m->n - 1], m->n - 1);
}

static bool item_is(const mod_item *it, const char *name, size_t len) {
  return it->len == len && !memcmp(it->name, name, len);
}

/* m's entry named by the len bytes at name, or NULL. */
static mod_item *find_item(const kn_module *m, const char *name, size_t len) {
  if (m && m->hx) {
    uint32_t k = name_hash(name, len) & (uint32_t)(m->hcap - 1);
    for (; m->hx[k]; k = (k + 1) & (uint32_t)(m->hcap - 1))
      if (item_is(&m->items[m->hx[k] - 1], name, len)) return &m->items[m->hx[k] - 1];
    return NULL;
  }
  for (int i = 0; m && i < m->n; i++)
    if (item_is(&m->items[i], name, len)) return &m->items[i];
  return NULL;
}

static kn_status mod_add(kn_module *m, const char *name, int kind, kn_tensor *t, kn_module *c) {
  if (!m || !name || !*name || strchr(name, '.') || (kind < 2 && !t) || (kind == 2 && !c))
    return kn__error(KN_EINVAL, "kn_module_add: expected a module, a name without '.' and a %s; "
                     "found module %s, name %s%s%s and %s %s", kind == 2 ? "child module" : "tensor",
                     m ? "set" : "NULL", name ? "'" : "", name ? name : "NULL", name ? "'" : "",
                     kind == 2 ? "child" : "tensor", (kind == 2 ? !!c : !!t) ? "set" : "NULL");
  if (t && KN__HANDLES_CHECKED() &&
      kn__handle_check(t, kind ? "kn_module_add_buffer" : "kn_module_add_param", "the tensor"))
    return kn_last_status();
  if (find_item(m, name, strlen(name)))
    return kn__error(KN_EINVAL, "kn_module_add: the module already has an entry named '%s'",
                     name);
  if (m->n == m->cap) {
    int nc = m->cap ? m->cap * 2 : 4;
    mod_item *ni = realloc(m->items, sizeof *ni * (size_t)nc);
    if (!ni) return kn__oom();
    m->items = ni;
    m->cap = nc;
  }
  char *nm = strdup(name);
  if (!nm) return kn__oom();
  m->items[m->n++] = (mod_item){nm, strlen(nm), kind, t ? kn_retain(t) : NULL, c};
  if (t) t->in_module = true;
  hx_add(m);
  return KN_OK;
}

kn_status kn_module_add_param(kn_module *m, const char *name, kn_tensor *t) {
  return mod_add(m, name, 0, t, NULL);
}
kn_status kn_module_add_buffer(kn_module *m, const char *name, kn_tensor *t) {
  return mod_add(m, name, 1, t, NULL);
}
kn_status kn_module_add_child(kn_module *m, const char *name, kn_module *child) {
  return mod_add(m, name, 2, NULL, child);
}

/* Item it's tensor on dev (a new leaf keeping requires_grad), replacing it. */
static kn_status item_to_device(mod_item *it, kn_device dev, const char *where) {
  kn_tensor *c = NULL;
  kn_scope_begin();
  kn_status st = kn_to_device(it->t, dev, &c);
  if (st == KN_OK && c != it->t) {
    c = kn_retain(c);
    if (kn_requires_grad(it->t)) st = kn_set_requires_grad(c, true);
    if (st == KN_OK) {
      c->in_module = true;
      kn_release(it->t);
      it->t = c;
    } else {
      kn_release(c);
    }
  }
  kn_scope_end();
  if (st != KN_OK)
    return kn__error(st, "kn_module_to_device: %s%s: %s", where, it->name, kn_last_error());
  return KN_OK;
}

static kn_status tree_to_device(kn_module *m, kn_device dev, const char *prefix) {
  for (int i = 0; i < m->n; i++) {
    mod_item *it = &m->items[i];
    kn_status st = KN_OK;
    if (it->kind < 2) {
      st = item_to_device(it, dev, prefix);
    } else {
      char sub[512];
      snprintf(sub, sizeof sub, "%s%s.", prefix, it->name);
      st = tree_to_device(it->child, dev, sub);
    }
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

kn_status kn_module_to_device(kn_module *m, kn_device dev) {
  if (!m) return kn__error(KN_EINVAL, "kn_module_to_device: expected a module, found NULL");
  if (dev != KN_CPU && dev != KN_CUDA)
    return kn__error(KN_EINVAL, "kn_module_to_device: expected the device KN_CPU or KN_CUDA, "
                                "got %d", (int)dev);
  return tree_to_device(m, dev, "");
}

static _Thread_local kn__module_subst_fn subst_fn;
static _Thread_local void *subst_ud;

void kn__module_set_subst(kn__module_subst_fn fn, void *ud) {
  subst_fn = fn;
  subst_ud = ud;
}


static kn_tensor *mod_lookup(kn_module *m, const char *path) {
  const char *dot = strchr(path, '.');
  mod_item *it = find_item(m, path, dot ? (size_t)(dot - path) : strlen(path));
  if (!it) return NULL;
  if (dot) return it->kind == 2 ? mod_lookup(it->child, dot + 1) : NULL;
  return it->kind < 2 ? it->t : NULL;
}

kn_tensor *kn__module_lookup(kn_module *m, const char *path) {
  return m && path ? mod_lookup(m, path) : NULL;
}

kn_status kn__module_suffix(const kn_module *m, const char *path, char *buf, size_t n,
                            bool *is_param) {
  static const char *const kinds[] = {"_parameters", "_buffers", "_modules"};
  size_t used = 0;
  buf[0] = 0;
  for (const char *p = path;;) {
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    const mod_item *it = find_item(m, p, len);
    if (!it || (dot != NULL) != (it->kind == 2))
      return kn__error(KN_EINVAL, "no tensor '%s' in the module", path);
    int w = snprintf(buf + used, n - used, ".%s['%s']", kinds[it->kind], it->name);
    if (w < 0 || used + (size_t)w >= n) return kn__error(KN_ERANGE, "module path too long: '%s'", path);
    used += (size_t)w;
    if (!dot) {
      *is_param = it->kind == 0;
      return KN_OK;
    }
    m = it->child;
    p = dot + 1;
  }
}

/* The error of kn_module_child at the segment [seg, seg+len) of path, below
** the module `at` (named by the path before seg, "" for the root). */
static void child_error(const kn_module *at, const char *path, const char *seg, size_t len,
                        const mod_item *it) {
  char where[300] = "the module";
  if (seg > path) snprintf(where, sizeof where, "'%.*s'", (int)(seg - path - 1), path);
  if (it) {
    kn__error(KN_EINVAL, "kn_module_child: '%s': '%.*s' is a %s of %s, not a child module", path,
              (int)len, seg, it->kind == 0 ? "parameter" : "buffer", where);
  } else {
    char list[600] = "";
    int nc = 0;
    for (int i = 0; i < at->n; i++) {
      if (at->items[i].kind != 2) continue;
      size_t l = strlen(list);
      if (nc++ < 8) snprintf(list + l, sizeof list - l, "%s'%s'", nc > 1 ? ", " : "", at->items[i].name);
    }
    kn__error(KN_EINVAL, "kn_module_child: '%s': no child '%.*s' in %s (%s%s%s)", path, (int)len,
              seg, where, nc ? "its children: " : "it has no children", list,
              nc > 8 ? ", ..." : "");
  }
  kn__error_null_result();
}

kn_module *kn_module_child(kn_module *m, const char *path) {
  if (!m || !path || !*path) {
    kn__error(KN_EINVAL, "kn_module_child: expected a module and a child's name or dotted path "
              "(\"encoder.layers.0\"), found %s and %s%s%s", m ? "a module" : "NULL",
              path ? "'" : "", path ? path : "NULL", path ? "'" : "");
    kn__error_null_result();
    return NULL;
  }
  for (const char *p = path;;) {
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    mod_item *it = len ? find_item(m, p, len) : NULL;
    if (!it || it->kind != 2) {
      child_error(m, path, p, len, it);
      return NULL;
    }
    if (!dot) return it->child;
    m = it->child;
    p = dot + 1;
  }
}

/* The 3 existing paths nearest to a missing one (edit distance). */
typedef struct nearest {
  const char *want;
  char path[3][256];
  int dist[3], n;
} nearest;

static kn_status near_visit(void *ud, const char *suffix, const char *path, kn_tensor *t,
                            bool is_param) {
  (void)suffix, (void)t, (void)is_param;
  nearest *nr = ud;
  int d = kn__edit_distance(nr->want, path, false), k = nr->n < 3 ? nr->n++ : 3;
  while (k > 0 && nr->dist[k - 1] > d) {
    if (k < 3) {
      nr->dist[k] = nr->dist[k - 1];
      memcpy(nr->path[k], nr->path[k - 1], sizeof nr->path[k]);
    }
    k--;
  }
  if (k < 3) {
    nr->dist[k] = d;
    snprintf(nr->path[k], sizeof nr->path[k], "%s", path);
  }
  return KN_OK;
}

static void missing_path(kn_module *m, const char *path) {
  nearest nr = {.want = path};
  (void)kn__module_visit(m, near_visit, &nr);
  char list[900] = "";
  for (int i = 0; i < nr.n; i++) {
    size_t l = strlen(list);
    snprintf(list + l, sizeof list - l, "%s'%s'", i ? ", " : "", nr.path[i]);
  }
  kn__error(KN_EINVAL, "kn_module_get: no tensor '%s' in the module%s%s%s", path,
            nr.n ? " (nearest: " : " (it holds no tensors)", list, nr.n ? ")" : "");
  kn__error_null_result();
}

kn_tensor *kn_module_get(kn_module *m, const char *path) {
  if (!m || !path) {
    kn__error(KN_EINVAL, "kn_module_get: expected a module and a path, found %s and %s",
              m ? "a module" : "NULL", path ? path : "NULL");
    kn__error_null_result();
    return NULL;
  }
  if (subst_fn) {
    kn_tensor *t = NULL;
    if (subst_fn(subst_ud, m, path, &t) != KN_OK) {
      kn__error_null_result();
      return NULL;
    }
    if (t) return t;
  }
  kn_tensor *t = mod_lookup(m, path);
  if (!t) missing_path(m, path);
  return t;
}

int kn__module_count(const kn_module *m) {
  int n = 0;
  for (int i = 0; m && i < m->n; i++)
    n += m->items[i].kind == 2 ? kn__module_count(m->items[i].child) : 1;
  return n;
}

static kn_status visit(kn_module *m, char *suffix, size_t slen, char *path, size_t plen,
                       kn__module_visit_fn fn, void *ud) {
  static const char *const kinds[] = {"_parameters", "_buffers", "_modules"};
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < m->n; i++) {
      mod_item *it = &m->items[i];
      if (it->kind != pass) continue;
      int a = snprintf(suffix + slen, 1024 - slen, ".%s['%s']", kinds[it->kind], it->name);
      int b = snprintf(path + plen, 1024 - plen, "%s%s", plen ? "." : "", it->name);
      if (a < 0 || b < 0 || slen + (size_t)a >= 1024 || plen + (size_t)b >= 1024)
        return kn__error(KN_ERANGE, "module path too long at '%s'", it->name);
      kn_status st = it->kind == 2 ? visit(it->child, suffix, slen + (size_t)a, path,
                                           plen + (size_t)b, fn, ud)
                                   : fn(ud, suffix, path, it->t, it->kind == 0);
      suffix[slen] = 0;
      path[plen] = 0;
      if (st != KN_OK) return st;
    }
  return KN_OK;
}

kn_status kn__module_visit(kn_module *m, kn__module_visit_fn fn, void *ud) {
  char suffix[1024] = "", path[1024] = "";
  return m ? visit(m, suffix, 0, path, 0, fn, ud) : KN_OK;
}

/* ---- sources ------------------------------------------------------------------- */
/* The value a source starts from: an argument, a declared global or a
** captured object; false when it is gone (a freed module). */
static bool src_root(const kn__src *s, const kn_value *args, int nargs, kn_value *v) {
  if (s->arg >= 0) {
    if (s->arg >= nargs) return false;
    *v = args[s->arg];
  } else if (s->arg == KN__SRC_GLOBAL && s->gmod) {
    *v = *s->gmod ? kn_vmodule(*s->gmod) : kn_vnone();
  } else if (s->arg == KN__SRC_GLOBAL && s->gten) {
    *v = *s->gten ? kn_vtensor(*s->gten) : kn_vnone();
  } else if (s->arg == KN__SRC_OBJECT && s->omod) {
    if (atomic_load(&s->omod->freed)) return false;
    *v = kn_vmodule(s->omod);
  } else if (s->arg == KN__SRC_OBJECT && s->otensor) {
    *v = kn_vtensor(s->otensor);
  } else {
    return false;
  }
  return true;
}

bool kn__src_get(const kn__src *s, const kn_value *args, int nargs, kn_value *out) {
  kn_value v;
  if (!src_root(s, args, nargs, &v)) return false;
  for (int k = 0; k < s->nidx; k++) {
    if ((v.kind != KN_VLIST && v.kind != KN_VTUPLE) || s->idx[k] >= v.n) return false;
    v = v.u.items[s->idx[k]];
  }
  if (s->modpath) {
    if (v.kind != KN_VMODULE) return false;
    kn_tensor *t = mod_lookup(v.u.m, s->modpath);
    if (!t) return false;
    v = kn_vtensor(t);
  }
  *out = v;
  return true;
}

kn_status kn__src_copy(kn__src *dst, const kn__src *s) {
  *dst = *s;
  dst->expr = s->expr ? strdup(s->expr) : NULL;
  dst->modpath = s->modpath ? strdup(s->modpath) : NULL;
  if (dst->omod) kn__module_ref(dst->omod);
  kn_retain(dst->otensor);
  if ((s->expr && !dst->expr) || (s->modpath && !dst->modpath)) {
    kn__src_fini(dst);
    return kn__oom();
  }
  return KN_OK;
}

void kn__src_fini(kn__src *s) {
  free(s->expr);
  free(s->modpath);
  s->expr = s->modpath = NULL;
  kn__module_unref(s->omod);
  kn_release(s->otensor);
  s->omod = NULL;
  s->otensor = NULL;
}
