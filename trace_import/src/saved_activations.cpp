#include "pipesim/trace_import/saved_activations.hpp"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "saturating_bytes.hpp"

namespace pipesim::trace_import {

namespace {

using sim::InputError;

/// Where each op of the trace ran: inside the autograd engine (with the sequence number of the node it
/// evaluates), inside the optimizer, or neither.
struct OpPlace {
  bool backward = false, optimizer = false;
  std::int64_t node_sequence = -1;  ///< of the autograd node whose evaluation holds the op
};

std::vector<OpPlace> places(const ExecutionTrace& et) {
  std::unordered_map<std::int64_t, std::size_t> index;
  index.reserve(et.ops.size());
  for (std::size_t i = 0; i < et.ops.size(); ++i) index.emplace(et.ops[i].id, i);
  std::vector<OpPlace> place(et.ops.size());
  for (std::size_t i = 0; i < et.ops.size(); ++i) {
    const ExecutionOp& op = et.ops[i];
    OpPlace p;
    // Ops are sorted by id and a parent starts before its children: its place is known.
    if (const auto it = index.find(op.parent); it != index.end() && it->second < i) p = place[it->second];
    p.optimizer = p.optimizer || op.optimizer;
    p.backward = p.backward || op.backward_node;
    // The outermost numbered op inside an evaluation is the node itself (AddmmBackward0, …).
    if (p.backward && p.node_sequence < 0 && !op.backward_node && op.sequence >= 0)
      p.node_sequence = op.sequence;
    place[i] = p;
  }
  return place;
}

/// Whether `op` reads a tensor of `storage` (an in-place op, a view, an out= argument): its result there is
/// no new storage.
bool reads(const ExecutionTrace& et, const ExecutionOp& op, std::int64_t storage) {
  const auto begin = et.tensors.begin() + op.first_input;
  return std::any_of(begin, begin + op.inputs, [&](const TensorRef& a) { return a.storage == storage; });
}

/// The storages the forward (ops before the first backward node, outside the optimizer) makes, with the
/// most bytes a tensor of each reaches; the forward's autograd sequence numbers.
std::unordered_map<std::int64_t, std::int64_t> forward_storages(const ExecutionTrace& et,
                                                                const std::vector<OpPlace>& place,
                                                                std::size_t forward_end,
                                                                std::unordered_set<std::int64_t>& sequences) {
  std::unordered_map<std::int64_t, std::int64_t> made;
  for (std::size_t i = 0; i < forward_end; ++i) {
    const ExecutionOp& op = et.ops[i];
    if (place[i].optimizer || place[i].backward) continue;
    if (op.sequence >= 0) sequences.insert(op.sequence);
    for (std::uint32_t k = 0; k < op.inputs + op.outputs; ++k) {
      const TensorRef& t = et.tensors[op.first_input + k];
      // Storage ids are the addresses the trace saw: a result made at an address again is a new storage
      // there, the one before freed (or the same result, recorded again by an op run inside another).
      auto it = made.find(t.storage);
      if (k >= op.inputs && !reads(et, op, t.storage))
        made[t.storage] = t.extent_bytes;
      else if (it != made.end())
        it->second = std::max(it->second, t.extent_bytes);
    }
  }
  return made;
}

/// The offset from the Kineto trace's sequence numbers to the execution trace's: the two are of different
/// steps of one loop, which number their autograd ops alike.
std::int64_t sequence_offset(const ExecutionTrace& et, const StepProfile& step,
                             const std::unordered_set<std::int64_t>& et_forward) {
  if (et_forward.empty())
    throw InputError(et.file, "/nodes", "no autograd op (seq_id) in the forward: trace a training step");
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto& [seq, layer] : step.layer_of_sequence) {
    first = std::min(first, seq);
    last = std::max(last, seq);
  }
  const auto [et_first, et_last] = std::minmax_element(et_forward.begin(), et_forward.end());
  if (et_forward.size() != step.layer_of_sequence.size() || *et_last - *et_first != last - first)
    throw InputError(et.file, "/nodes",
                     fmt::format("its forward runs {} autograd ops, the Kineto trace's {}: trace the same "
                                 "model at the same shapes",
                                 et_forward.size(), step.layer_of_sequence.size()));
  return *et_first - first;
}

/// The layer of the forward op the execution trace numbers `sequence` (-1: none, or no such op), its
/// sequence numbers `offset` past the Kineto trace's.
std::int32_t layer_of_sequence(const StepProfile& step, std::int64_t sequence, std::int64_t offset) {
  std::int64_t kineto = 0;
  if (sequence < 0 || __builtin_sub_overflow(sequence, offset, &kineto)) return -1;
  const auto l = step.layer_of_sequence.find(kineto);
  return l != step.layer_of_sequence.end() ? l->second : -1;
}

/// Each layer's output as the next layers read it in the forward (what a pipeline stage boundary after it
/// sends): the storages its forward ops made that a later layer's forward ops read. A forward op belongs to
/// the layer of its autograd sequence number, and an op without one to the layer of the op before it.
void add_layer_outputs(const ExecutionTrace& et, const std::vector<OpPlace>& place, std::size_t forward_end,
                       const std::unordered_map<std::int64_t, std::int64_t>& made, std::int64_t offset,
                       StepProfile& step) {
  std::unordered_map<std::int64_t, std::int32_t> maker;  // storage -> the layer whose forward made it
  std::unordered_set<std::int64_t> sent;
  std::int32_t layer = 0;
  for (std::size_t i = 0; i < forward_end; ++i) {
    const ExecutionOp& op = et.ops[i];
    if (place[i].optimizer || place[i].backward) continue;
    if (const std::int32_t l = layer_of_sequence(step, op.sequence, offset); l >= 0) layer = l;
    for (std::uint32_t k = 0; k < op.inputs + op.outputs; ++k) {
      const TensorRef& t = et.tensors[op.first_input + k];
      if (k >= op.inputs) {
        if (!reads(et, op, t.storage)) maker[t.storage] = layer;
        continue;
      }
      const auto m = maker.find(t.storage);
      if (m == maker.end() || m->second >= layer || !sent.insert(t.storage).second) continue;
      if (const auto bytes = made.find(t.storage); bytes != made.end())
        add_bytes(step.layers[static_cast<std::size_t>(m->second)].output_bytes, bytes->second);
    }
  }
}

struct BackwardMemory {
  /// The most bytes the backward has made and still needs while each layer's nodes run: the gradients passed
  /// between ops (the logits' at the loss), not those it leaves for the optimizer, nor what the forward
  /// kept. Indexed like the step's layers.
  std::vector<std::int64_t> working_peaks;
  std::int64_t left_for_optimizer = 0;  ///< what it made and the optimizer reads: the parameters' gradients
};

BackwardMemory backward_memory(const ExecutionTrace& et, const std::vector<OpPlace>& place,
                               std::size_t forward_end,
                               const std::function<std::int32_t(std::size_t)>& layer_of, std::size_t layers) {
  struct Life {
    std::int64_t storage, bytes;
    std::size_t birth, last;
  };
  std::unordered_map<std::int64_t, Life> open;
  std::vector<Life> lives;
  std::unordered_set<std::int64_t> after;  // storages read or written once the backward is over
  std::size_t last_backward = forward_end;
  for (std::size_t i = forward_end; i < et.ops.size(); ++i)
    if (place[i].backward) last_backward = i;
  for (std::size_t i = forward_end; i < et.ops.size(); ++i) {
    const ExecutionOp& op = et.ops[i];
    for (std::uint32_t k = 0; k < op.inputs + op.outputs; ++k) {
      const TensorRef& t = et.tensors[op.first_input + k];
      if (!place[i].backward) {
        if (i > last_backward) after.insert(t.storage);
        continue;
      }
      auto it = open.find(t.storage);
      if (k >= op.inputs && !reads(et, op, t.storage)) {
        if (it != open.end()) lives.push_back(it->second);
        open[t.storage] = {t.storage, t.extent_bytes, i, i};
      } else if (it != open.end()) {
        it->second.last = i;
        it->second.bytes = std::max(it->second.bytes, t.extent_bytes);
      }
    }
  }
  BackwardMemory out;
  for (const auto& [storage, life] : open) {
    if (after.count(storage))
      add_bytes(out.left_for_optimizer, life.bytes);
    else
      lives.push_back(life);
  }
  // Sweep the backward's ops: what is alive at each, the most of it per layer.
  std::vector<std::int64_t> change(et.ops.size() + 1, 0);
  for (const Life& l : lives) {
    add_bytes(change[l.birth], l.bytes);
    add_bytes(change[l.last + 1], -l.bytes);
  }
  out.working_peaks.assign(layers, 0);
  std::int64_t live = 0;
  for (std::size_t i = forward_end; i < et.ops.size(); ++i) {
    add_bytes(live, change[i]);
    if (place[i].backward) {
      auto& p = out.working_peaks[static_cast<std::size_t>(layer_of(i))];
      p = std::max(p, live);
    }
  }
  return out;
}

}  // namespace

void add_saved_activations(const ExecutionTrace& et, StepProfile& step) {
  const std::vector<OpPlace> place = places(et);
  const auto first_backward =
      std::find_if(et.ops.begin(), et.ops.end(), [](const ExecutionOp& op) { return op.backward_node; });
  if (first_backward == et.ops.end())
    throw InputError(et.file, "/nodes",
                     "no autograd::engine::evaluate_function node: trace a step with its backward");
  const auto forward_end = static_cast<std::size_t>(first_backward - et.ops.begin());
  std::unordered_set<std::int64_t> forward_sequences;
  const auto made = forward_storages(et, place, forward_end, forward_sequences);
  const std::int64_t offset = sequence_offset(et, step, forward_sequences);
  // The execution trace's figures replace what the Kineto trace's memory events gave.
  for (LayerProfile& l : step.layers) l.saved_bytes = l.backward_working_bytes = l.output_bytes = 0;
  add_layer_outputs(et, place, forward_end, made, offset, step);
  const auto head = static_cast<std::int32_t>(step.layers.size()) - 1;
  // An op of the backward belongs to the layer whose forward op made the node it evaluates (the head when
  // none did: the loss's own gradient).
  auto layer_of = [&](std::size_t i) {
    const std::int32_t layer = layer_of_sequence(step, place[i].node_sequence, offset);
    return layer >= 0 ? layer : head;
  };
  // A storage the forward made and the backward reads before it writes it anew was kept.
  std::unordered_set<std::int64_t> touched;
  for (std::size_t i = forward_end; i < et.ops.size(); ++i) {
    if (!place[i].backward) continue;
    const ExecutionOp& op = et.ops[i];
    for (std::uint32_t k = 0; k < op.inputs + op.outputs; ++k) {
      const TensorRef& t = et.tensors[op.first_input + k];
      if (!touched.insert(t.storage).second || k >= op.inputs) continue;
      if (const auto m = made.find(t.storage); m != made.end())
        add_bytes(step.layers[static_cast<std::size_t>(layer_of(i))].saved_bytes, m->second);
    }
  }
  const BackwardMemory backward = backward_memory(et, place, forward_end, layer_of, step.layers.size());
  for (std::size_t l = 0; l < step.layers.size(); ++l)
    step.layers[l].backward_working_bytes = backward.working_peaks[l];
  step.step_grad_bytes = backward.left_for_optimizer;
  step.has_saved_bytes = true;
  step.memory_source = "execution trace";
}

}  // namespace pipesim::trace_import
