/*
** optim/optim_int.h: what checkpoint loading needs from the optimizers.
*/
#ifndef KN_OPTIM_OPTIM_INT_H
#define KN_OPTIM_OPTIM_INT_H

#include <stddef.h>

#include "kiln/optim.h"

/* A field of kn_optim_options: its name (as in the struct), offset, and
** whether it is a bool (else a double). */
typedef struct kn__optim_field {
  const char *name;
  size_t offset;
  bool is_bool;
} kn__optim_field;

/* The hyperparameters opt's type uses besides lr (which lives in the state
** tree), as a static table of *n fields. */
const kn__optim_field *kn__optim_fields(const kn_optimizer *opt, int *n);
/* The options opt runs with (defaults resolved). */
kn_optim_options kn__optim_options(const kn_optimizer *opt);
/* Check o with the rules of opt's constructor (the same code): KN_EINVAL
** with the constructor's message, the failing field's name in *field. */
kn_status kn__optim_validate(const kn_optimizer *opt, const kn_optim_options *o,
                             const char **field);
/* Validate o and make it opt's options (lr included; the "lr" tensor is the
** caller's). A change of any other field drops the compiled step, which
** holds them as constants. */
kn_status kn__optim_apply(kn_optimizer *opt, const kn_optim_options *o);
/* Create the state buffers (zeros) that parameter i lacks and the current
** options use. */
kn_status kn__optim_ensure_state(kn_optimizer *opt, int i);
/* Do the current options use a parameter's state entry called name
** ("exp_avg", "momentum_buffer", ...)? Entries they do not use (left by
** other options before a load) are neither saved nor loaded. */
bool kn__optim_uses_state(const kn_optimizer *opt, const char *name);
/* The model's parameter i (the tensor the caller passed; its gradient is
** the one the optimizer reads). Borrowed. */
kn_tensor *kn__optim_param(const kn_optimizer *opt, int i);
/* After loading: take the learning rate from the "lr" tensor and set the
** step count. */
void kn__optim_restored(kn_optimizer *opt, int64_t steps);

#endif
