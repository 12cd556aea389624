// Activation memory from an execution trace: what each layer's forward keeps for the backward. A storage the
// forward makes (an op's result in a storage none of its arguments lie in) that the backward reads before it
// writes it anew is kept from one pass to the other: the activations autograd saved, the weights autocast
// cast for them, the logits the loss keeps. Each is given to the layer whose forward op made the autograd
// node that reads it first. The execution trace and the Kineto trace are of two steps of the same loop: their
// forwards' autograd sequence numbers differ by one offset, and the Kineto trace knows each op's layer.
#pragma once

#include "pipesim/trace_import/execution_trace.hpp"
#include "pipesim/trace_import/step_profile.hpp"

namespace pipesim::trace_import {

/// Fills the layers' saved_bytes. Throws InputError naming the execution trace when it has no backward or
/// no autograd ops in its forward, or when its forward's autograd ops are not the Kineto trace's (another
/// model, another shape).
void add_saved_activations(const ExecutionTrace& et, StepProfile& step);

}  // namespace pipesim::trace_import
