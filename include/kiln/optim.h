/*
** kiln/optim.h: optimizers (torch.optim in C), gradient clipping and
** learning-rate schedules.
**
**   kn_tensor **ps; int n = kn_nn_parameters(model, &ps);
**   kn_optimizer *opt = kn_adam(ps, n, &(kn_optim_options){.lr = 1e-3});
**   free(ps);
**   ... kn_backward(loss, NULL); kn_optim_step(opt); kn_optim_zero_grad(opt);
**   kn_optim_free(opt);
**
** The updates follow torch 1.13's single-tensor implementations (SGD with
** momentum/dampening/nesterov/weight decay, Adam, AdamW, RMSprop with
** momentum and centering). Per-parameter state (momentum_buffer, exp_avg,
** exp_avg_sq, square_avg, grad_avg) is created on the first step that sees
** a gradient, as in PyTorch; the step count and the learning rate are 0-d
** float64 tensors, so a compiled step does not specialise on them.
**
** The optimizer keeps its parameters and state in a kn_module (the state
** tree, kn_optim_state): child "<i>" of parameter i holds "param" and its
** state buffers. kn_optim_step_fn is the step as a kn_fn, for kn_compile:
** args[0] = kn_vmodule(kn_optim_state(opt)), args[1] = a kn_vlist of the n
** gradients; ud = the optimizer. Run the compiled step with grad mode off
** (kn_optim_step_compiled does all of this).
**
** Ownership: parameters are retained by the optimizer (kn_optim_free
** releases them). Constructors return an owned optimizer or NULL with
** kn_last_error() (bad hyperparameters use PyTorch's messages, e.g.
** "Invalid learning rate: -1.0").
*/
#ifndef KILN_OPTIM_H
#define KILN_OPTIM_H

#include "kiln/compile.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_optimizer kn_optimizer;

/* Hyperparameters. A field left 0 takes PyTorch's default for that
** optimizer, except where 0 is meaningful (momentum, weight_decay,
** dampening): those are used as given. Defaults: lr 1e-3 (Adam, AdamW),
** 1e-2 (RMSprop), SGD has none (lr must be given); betas 0.9/0.999; eps
** 1e-8; AdamW weight_decay 1e-2 (set weight_decay < 0 for 0); RMSprop alpha
** 0.99. */
typedef struct kn_optim_options {
  double lr;
  double momentum, dampening, weight_decay;
  bool nesterov;
  double beta1, beta2, eps;
  double alpha;
  bool centered;
  /* Keep a float32 master copy of each bfloat16/float16 parameter (state
  ** entry "master", saved in checkpoints): the update runs on the copy, with
  ** the gradient widened to float32 and float32 state buffers, and the
  ** parameter receives the copy rounded to its dtype. Small updates then
  ** accumulate instead of rounding away. Float32 parameters are unaffected. */
  bool master_weights;
} kn_optim_options;

KN_API kn_optimizer *kn_sgd(kn_tensor *const *params, int n, const kn_optim_options *o);
KN_API kn_optimizer *kn_adam(kn_tensor *const *params, int n, const kn_optim_options *o);
KN_API kn_optimizer *kn_adamw(kn_tensor *const *params, int n, const kn_optim_options *o);
KN_API kn_optimizer *kn_rmsprop(kn_tensor *const *params, int n, const kn_optim_options *o);
KN_API void kn_optim_free(kn_optimizer *opt);

/* One update of every parameter that has a gradient (grad mode is turned
** off for it). */
KN_API kn_status kn_optim_step(kn_optimizer *opt);
/* The same through a compiled function (one graph for all parameters,
** compiled on first use and cached in the optimizer; backend as opts, NULL
** = the default backend, "inductor"). Every parameter must have a gradient. */
KN_API kn_status kn_optim_step_compiled(kn_optimizer *opt, const kn_compile_options *opts);
/* Drop every parameter's gradient (set_to_none=True). */
KN_API void kn_optim_zero_grad(kn_optimizer *opt);
KN_API double kn_optim_lr(const kn_optimizer *opt);
KN_API kn_status kn_optim_set_lr(kn_optimizer *opt, double lr);
/* Steps taken so far. */
KN_API int64_t kn_optim_steps(const kn_optimizer *opt);
/* Type name ("Adam"), static. */
KN_API const char *kn_optim_name(const kn_optimizer *opt);

/* The state tree (borrowed; lives as long as opt): "lr", "step" and child
** "<i>" per parameter with "param" and its state buffers. */
KN_API kn_module *kn_optim_state(kn_optimizer *opt);
KN_API int kn_optim_num_params(const kn_optimizer *opt);
/* The step as a kn_fn (see the top of this file). Returns none; errors are
** reported through the trace/call as an error status of the op that failed. */
KN_API kn_value kn_optim_step_fn(const kn_value *args, int nargs, void *opt);

/* ---- gradient scaling (float16 training) ---------------------------------------- */
/* torch.cuda.amp.GradScaler's algorithm, for float16 gradients that would
** underflow: scale the loss before backward, unscale the gradients before
** the step, skip the step when a gradient holds inf or NaN, and adjust the
** scale (halve it after an overflow, double it after growth_interval steps
** without one).
**
**   kn_grad_scaler *sc = kn_grad_scaler_new(NULL);      // PyTorch's defaults
**   for (...) {
**     kn_backward(kn_grad_scaler_scale(sc, loss), NULL);
**     kn_grad_scaler_step(sc, opt, NULL);   // unscales, steps unless inf/NaN
**     kn_grad_scaler_update(sc);
**     kn_optim_zero_grad(opt);
**   }
**
** The scale is a float32 value as in PyTorch (init 65536); unscaling
** multiplies each gradient in place by float32(1 / scale). An optimizer is
** unscaled at most once between updates (kn_grad_scaler_unscale before
** kn_grad_scaler_step lets a caller clip unscaled gradients). */
typedef struct kn_grad_scaler kn_grad_scaler;
/* Fields left 0 take PyTorch's defaults: init_scale 65536, growth_factor
** 2.0, backoff_factor 0.5, growth_interval 2000. */
typedef struct kn_grad_scaler_options {
  double init_scale, growth_factor, backoff_factor;
  int64_t growth_interval;
} kn_grad_scaler_options;
/* A new scaler (owned: kn_grad_scaler_free), or NULL with KN_EINVAL naming a
** bad option (growth_factor must be > 1, backoff_factor in (0, 1),
** init_scale and growth_interval > 0). o may be NULL (defaults). */
KN_API kn_grad_scaler *kn_grad_scaler_new(const kn_grad_scaler_options *o);
KN_API void kn_grad_scaler_free(kn_grad_scaler *s);
/* loss * scale (a new reference in the open scope), or NULL. */
KN_API kn_tensor *kn_grad_scaler_scale(kn_grad_scaler *s, kn_tensor *loss);
/* Divide the gradients of opt's parameters by the scale, in place, noting
** whether any holds inf or NaN. KN_ESTATE when opt was already unscaled (or
** stepped) since the last update. */
KN_API kn_status kn_grad_scaler_unscale(kn_grad_scaler *s, kn_optimizer *opt);
/* Unscale (unless done) and run kn_optim_step unless a gradient held inf or
** NaN; *stepped (may be NULL) says which. KN_ESTATE when opt already stepped
** since the last update. */
KN_API kn_status kn_grad_scaler_step(kn_grad_scaler *s, kn_optimizer *opt, bool *stepped);
/* Adjust the scale from the optimizers unscaled since the last update
** (backoff after any inf/NaN, growth after growth_interval clean updates;
** a growth that would overflow float32 is not applied) and forget them. */
KN_API kn_status kn_grad_scaler_update(kn_grad_scaler *s);
KN_API double kn_grad_scaler_get_scale(const kn_grad_scaler *s);

/* ---- gradient clipping ------------------------------------------------------- */
/* torch.nn.utils.clip_grad_norm_: scale the gradients of params[0..n) so
** their total norm_type-norm (2.0, or INFINITY) is at most max_norm. The
** total norm before clipping goes to *total_norm (may be NULL). Parameters
** without a gradient are skipped. */
KN_API kn_status kn_clip_grad_norm(kn_tensor *const *params, int n, double max_norm,
                                   double norm_type, double *total_norm);

/* ---- learning-rate schedules --------------------------------------------------- */
typedef enum kn_lr_schedule_kind {
  KN_LR_STEP,   /* StepLR: base * gamma^(epoch / step_size) */
  KN_LR_COSINE, /* CosineAnnealingLR: eta_min + (base - eta_min)(1 + cos(pi e / t_max)) / 2 */
  KN_LR_LINEAR  /* LinearLR (warm-up): base * (start + (end - start) min(e, total) / total) */
} kn_lr_schedule_kind;

typedef struct kn_lr_schedule {
  kn_lr_schedule_kind kind;
  int64_t step_size;   /* STEP */
  double gamma;        /* STEP */
  int64_t t_max;       /* COSINE */
  double eta_min;      /* COSINE */
  double start_factor; /* LINEAR (PyTorch: 1/3) */
  double end_factor;   /* LINEAR (PyTorch: 1.0) */
  int64_t total_iters; /* LINEAR (PyTorch: 5) */
} kn_lr_schedule;

/* The learning rate at epoch (0, 1, ...) for a base rate: the closed
** forms above (the values PyTorch's chained schedulers produce). NAN for an
** invalid schedule (step_size, t_max or total_iters < 1). */
KN_API double kn_lr_at(const kn_lr_schedule *s, double base_lr, int64_t epoch);

#ifdef __cplusplus
}
#endif
#endif
