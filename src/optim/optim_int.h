/*
** optim/optim_int.h: what checkpoint loading needs from the optimizers.
*/
#ifndef KN_OPTIM_OPTIM_INT_H
#define KN_OPTIM_OPTIM_INT_H

#include "kiln/optim.h"

/* Create parameter i's state buffers (zeros) if it has none yet. */
kn_status kn__optim_ensure_state(kn_optimizer *opt, int i);
/* After loading: take the learning rate from the "lr" tensor and set the
** step count. */
void kn__optim_restored(kn_optimizer *opt, int64_t steps);

#endif
