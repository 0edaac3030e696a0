/*
** kiln/checkpoint.h: saving and loading state in the safetensors format
** (torch.save / load_state_dict in C). A file is an 8-byte little-endian
** header length, a JSON header naming each tensor's dtype ("F32"), shape
** and data_offsets (plus "__metadata__"), then the raw little-endian data:
** the files open with the safetensors reference readers
** (safetensors.torch.load_file) and kiln reads files they write.
**
**   kn_save(model, "model.safetensors");      // parameters + buffers
**   kn_load(model, "model.safetensors");      // strict: same names/shapes/dtypes
**
** Loading reads and validates the whole file first (a truncated or
** corrupted file is KN_EPARSE naming what is wrong), then compares it with
** the module and reports every difference at once in PyTorch's words
** (KN_EINVAL):
**   Error(s) in loading state_dict for Sequential:
**       Missing key(s) in state_dict: "5.bias".
**       Unexpected key(s) in state_dict: "6.weight".
**       size mismatch for 5.weight: copying a param with shape [10, 32] from
**       checkpoint, the shape in current model is [10, 64].
** Only then are the values copied in, so a failed load changes nothing.
**
** Saving is atomic and durable: the file is written to a new temporary file
** in path's directory (a random name, created exclusively: a file or link
** someone planted is never followed or reused), flushed to disk with fsync,
** renamed over path, and the directory is fsync'd. Readers of path see the
** old file or the whole new one; two processes saving one path at once each
** leave a whole file (the last rename wins); once kn_save returns KN_OK the
** file survives a crash or power loss; a failed save removes its temporary
** file and leaves path as it was. A symbolic link at path itself is
** replaced by the file, not followed. A path that is a directory is
** KN_EINVAL saying so (for loading too).
*/
#ifndef KILN_CHECKPOINT_H
#define KILN_CHECKPOINT_H

#include "kiln/compile.h"
#include "kiln/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The module's parameters and buffers under their dotted names
** (state_dict), with __metadata__ {"format": "pt"}. */
KN_API kn_status kn_save(kn_module *m, const char *path);
/* Load a file written by kn_save (or any safetensors file with the same
** names, shapes and dtypes) into m's tensors, in place. */
KN_API kn_status kn_load(kn_module *m, const char *path);

/* The optimizer's state: "lr" and per parameter i "<i>.step",
** "<i>.exp_avg", ... (not the parameters themselves), with __metadata__
** {"optimizer": "Adam", "steps": "<n>", "num_params": "<n>"} and the
** type's other hyperparameters as kn_optim_options names them ("beta1",
** "beta2", "eps", "weight_decay"; SGD "momentum", "dampening",
** "weight_decay", "nesterov"; RMSprop "alpha", "eps", "weight_decay",
** "momentum", "centered"), numbers as %.17g, bools as "true"/"false". */
KN_API kn_status kn_optim_save(kn_optimizer *opt, const char *path);
/* Restore it into an optimizer of the same type over the same number of
** parameters: the state buffers (created as the loaded options need them),
** the step count, the learning rate and the recorded hyperparameters (as
** PyTorch's load_state_dict restores param_groups; a file without them
** leaves the optimizer's own). Loaded hyperparameters pass the constructors'
** checks (the same code): a bad one is KN_EINVAL naming it, e.g. "loading
** 'opt.safetensors': hyperparameter 'lr' in the checkpoint: Invalid learning
** rate: -1", and a failed load leaves the options as they were. */
KN_API kn_status kn_optim_load(kn_optimizer *opt, const char *path);

#ifdef __cplusplus
}
#endif
#endif
