// A PyTorch execution trace (torch.profiler.ExecutionTraceObserver's JSON, Chakra's input format; plain or
// gzip) reduced, as it streams in, to what tells a step's activation memory: each op's place in the step (its
// parent, thread and autograd sequence number, whether it is the autograd engine's evaluation of a node or
// the optimizer's span) and the storages its tensor arguments and results lie in. Names, shapes, strides and
// other attributes are skipped while parsing.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace pipesim::trace_import {

/// A tensor argument or result as the trace records it ([tensor id, storage id, offset, elements, element
/// size, device]): its storage and how far into it the tensor reaches, in bytes.
struct TensorRef {
  std::int64_t storage = 0;
  std::int64_t extent_bytes = 0;  ///< (offset + elements) x element size
};

struct ExecutionOp {
  std::int64_t id = 0;
  std::int64_t parent = 0;     ///< ctrl_deps: the op (or thread root) it ran inside
  std::int64_t sequence = -1;  ///< attrs seq_id: the autograd sequence number (-1: none)
  std::int64_t tid = 0;        ///< attrs tid
  bool backward_node = false;  ///< "autograd::engine::evaluate_function: …": the engine running a node
  bool optimizer = false;      ///< "Optimizer.step…" / "Optimizer.zero_grad…"
  std::uint32_t first_input = 0, inputs = 0;    ///< into ExecutionTrace::tensors
  std::uint32_t first_output = 0, outputs = 0;  ///< into ExecutionTrace::tensors
};

struct ExecutionTrace {
  std::string file;
  std::vector<ExecutionOp> ops;  ///< sorted by id: an op's id is taken when it starts, before its children's
  std::vector<TensorRef> tensors;
};

/// Parses an execution trace from `in`; `file` names it in errors. Throws InputError (file, JSON path, what
/// is wrong) for malformed JSON, a trace without `nodes`, a node that is not an object or has no integer id,
/// two nodes of one id, a tensor of negative offset or size, or a trace of no ops.
ExecutionTrace parse_execution_trace(std::istream& in, const std::string& file);

/// Reads an execution trace file, gzip-compressed or not.
ExecutionTrace read_execution_trace(const std::string& path);

}  // namespace pipesim::trace_import
