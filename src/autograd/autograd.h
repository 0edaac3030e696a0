/*
** autograd/autograd.h: the eager autograd graph (internal).
**
** A kn__node is one recorded op (a grad_fn): its derivative rule, the saved
** forward call, and edges to the nodes that produced its inputs. Leaves that
** require grad get an AccumulateGrad node. Nodes are reference counted:
** tensors own their grad_fn, nodes own their next edges.
*/
#ifndef KN_AUTOGRAD_AUTOGRAD_H
#define KN_AUTOGRAD_AUTOGRAD_H

#include "ops/opdef.h"

void kn__node_retain(kn__node *n);
void kn__node_release(kn__node *n);
/* The grad_fn name of a node ("AddBackward0", "AccumulateGrad"); static. */
const char *kn__node_name(const kn__node *n);

#endif
