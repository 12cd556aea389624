// A PyTorch profiler trace (Kineto's chrome-trace JSON, plain or gzip) reduced, as it streams in, to what an
// import needs: the nn.Module and optimizer spans of the CPU threads, the autograd ops that link a backward
// to its forward (their sequence numbers), the CUDA launches and the GPU activity they caused (kernels,
// copies, fills), joined by correlation id, the shapes of the GEMM and element-wise ops a fit reads, and the
// GPU's allocations and frees where the profiler recorded them (profile_memory=True).
// Everything else (other arguments and shapes, Python frames) is skipped while parsing, so memory grows with
// those events only, not with the file.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace pipesim::trace_import {

/// Microseconds as Kineto writes them (floating point, from an arbitrary origin).
using TraceTime = double;

/// A span on a CPU thread: an nn.Module's forward ("nn.Module: Qwen3DecoderLayer_3") or the optimizer's
/// step and zero_grad.
struct CpuSpan {
  std::string name;
  std::int64_t tid = 0;
  TraceTime ts = 0, dur = 0;
};

/// An autograd-recorded op: on the forward thread the op that created a backward node, on the autograd
/// thread the evaluation of that node (same sequence number).
struct AutogradOp {
  std::int64_t sequence = 0;
  std::int64_t tid = 0;
  TraceTime ts = 0, dur = 0;
  bool backward = false;  ///< an `autograd::engine::evaluate_function` span
};

/// An op whose work the shapes the profiler recorded (record_shapes=True) tell: one that reads a weight
/// (aten::linear, aten::embedding, aten::addmm as GPT-2's Conv1D calls it), with the weight's (and bias's)
/// elements and its GEMM's FLOPs, a plain matrix product (aten::mm, aten::bmm: the backward's) with its
/// FLOPs, or scaled dot-product attention with its FLOPs (half the scores when causal).
struct WeightUse {
  enum class Op : std::uint8_t { kLinear, kEmbedding, kAddmm, kAttention, kMatmul };
  Op op = Op::kLinear;
  std::int64_t tid = 0;
  TraceTime ts = 0, dur = 0;
  std::int64_t params = 0;
  double flops = 0;
  /// Every dimension of its operands a multiple of 8 (16 bytes of bf16): cuBLAS's aligned kernels run it.
  bool aligned = true;
};

/// An element-wise op whose bytes its recorded shapes and dtypes (record_shapes=True) tell exactly:
/// aten::copy_ (reads the source, writes the destination: every cast and contiguous copy), the out-of-place
/// add, sub, mul and div (read their tensor operands, write one of the broadcast shape in the widest of
/// their dtypes) and the in-place add_, sub_, mul_ and div_ (read their operands, write the first).
struct StreamingOp {
  std::int64_t tid = 0;
  TraceTime ts = 0, dur = 0;
  std::int64_t bytes = 0;
};

/// A CUDA runtime or driver call: one that put work on the GPU (its correlation joins that work), one that
/// waits for the GPU (`sync`: cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, a blocking
/// cudaMemcpy), or another.
struct Launch {
  std::int64_t correlation = 0;
  std::int64_t tid = 0;
  TraceTime ts = 0, dur = 0;
  bool sync = false;
};

/// A CPU event the profiler recorded: an op (cpu_op, user_annotation, a runtime or driver call) or a Python
/// frame (python_function, with_stack=True). The profiler spends time on each (host_wait.hpp).
struct CpuMark {
  enum class Kind : std::uint8_t { kOp, kPythonFrame };
  TraceTime ts = 0;
  std::int32_t thread = 0;  ///< index into KinetoTrace::threads
  Kind kind = Kind::kOp;
};

/// What ran on the GPU: a kernel, a copy or a fill.
struct GpuActivity {
  enum class Kind : std::uint8_t { kKernel, kMemcpy, kMemset };
  Kind kind = Kind::kKernel;
  std::int64_t correlation = 0;
  TraceTime ts = 0, dur = 0;
  std::int32_t name = 0;    ///< index into KinetoTrace::names
  std::int64_t stream = 0;  ///< the CUDA stream it ran on (the event's tid)
};

/// An allocation (bytes > 0) or a free (bytes < 0) of the GPU's caching allocator, as torch.profiler records
/// them with profile_memory=True: Kineto's "[memory]" instant events of a CUDA device ("Device Type" 1), on
/// the thread that allocated or freed.
struct MemoryEvent {
  TraceTime ts = 0;
  std::int64_t tid = 0;
  std::int64_t addr = 0;
  std::int64_t bytes = 0;
  std::int64_t total_allocated = 0;  ///< the device's allocated bytes after it
  std::int64_t total_reserved = -1;  ///< the caching allocator's reserved bytes after it; -1 not written
};

struct KinetoTrace {
  std::string file;
  std::string device;              ///< the first GPU's name (deviceProperties), when the trace gives it
  std::vector<CpuSpan> modules;    ///< nn.Module spans, in file order
  std::vector<CpuSpan> optimizer;  ///< Optimizer.step / Optimizer.zero_grad spans (CPU side)
  std::vector<CpuSpan> steps;      ///< ProfilerStep#N spans: the steps torch.profiler's schedule recorded
  /// The profiler's own work it records as such (cat "overhead": CUPTI's activity buffer requests), which
  /// holds up the thread that needed the buffer.
  std::vector<CpuSpan> overhead;
  std::vector<AutogradOp> autograd;
  std::vector<WeightUse> weights;
  std::vector<StreamingOp> streaming;
  std::vector<Launch> launches;
  std::vector<GpuActivity> gpu;
  /// Of the first CUDA device the events name, in file order (Kineto writes them after the other CPU
  /// events, not in time order).
  std::vector<MemoryEvent> memory;
  std::vector<std::string> names;     ///< distinct GPU activity names
  std::vector<CpuMark> marks;         ///< every CPU event's start, in file order
  std::vector<std::int64_t> threads;  ///< the tids CpuMark::thread indexes
};

/// Parses a trace from `in`; `file` names it in errors. Throws InputError (file, JSON path, what is wrong)
/// for malformed JSON, a trace without `traceEvents`, events of the wrong shape, or one with no GPU activity.
KinetoTrace parse_kineto_trace(std::istream& in, const std::string& file);

/// Reads a trace file, gzip-compressed or not.
KinetoTrace read_kineto_trace(const std::string& path);

}  // namespace pipesim::trace_import
