// The hand-written Kineto trace of one tiny training step that the trace-import tests share.
#pragma once

#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "pipesim/trace_import/kineto_trace.hpp"

namespace pipesim::trace_import::testing {

using nlohmann::json;

/// A Kineto trace's events as tests write them: complete events on CPU threads (pid 1), and CUDA launches
/// with the kernel each puts on the GPU (pid 0, thread 7) 1 ms later, joined by correlation id. Times in us.
struct TraceEvents {
  json events = json::array();
  int correlation = 0;

  void add(const char* cat, const std::string& name, int tid, double ts, double dur,
           json args = json::object()) {
    events.push_back({{"ph", "X"},
                      {"cat", cat},
                      {"name", name},
                      {"pid", 1},
                      {"tid", tid},
                      {"ts", ts},
                      {"dur", dur},
                      {"args", std::move(args)}});
  }
  /// A launch at `ts` on `tid` and its kernel on the GPU `dur` long.
  void launch(int tid, double ts, const std::string& kernel, double dur) {
    ++correlation;
    add("cuda_runtime", "cudaLaunchKernel", tid, ts, 1, {{"correlation", correlation}});
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"name", kernel},
                      {"pid", 0},
                      {"tid", 7},
                      {"ts", 1000 + ts},
                      {"dur", dur},
                      {"args", {{"correlation", correlation}}}});
  }
};

/// One step of a model with an embedding, two blocks and a head, on thread 1 (forward, optimizer) and
/// thread 2 (autograd). Times in us.
inline json tiny_trace() {
  TraceEvents events;
  auto x = [&](const char* cat, const std::string& name, int tid, double ts, double dur,
               json args = json::object()) { events.add(cat, name, tid, ts, dur, std::move(args)); };
  auto launch = [&](int tid, double ts, const std::string& kernel, double dur) {
    events.launch(tid, ts, kernel, dur);
  };
  x("python_function", "nn.Module: TinyForCausalLM_0", 1, 0, 100);
  x("python_function", "nn.Module: Embedding_0", 1, 1, 4);
  x("cpu_op", "aten::embedding", 1, 2, 2, {{"Sequence number", 10}, {"Input Dims", {{1000, 16}, {1, 8}}}});
  launch(1, 3, "void at::native::indexSelectLargeIndex<float>", 5);
  for (int b = 0; b < 2; ++b) {
    const double t = 10 + 30 * b;
    x("python_function", "nn.Module: TinyBlock_" + std::to_string(b), 1, t, 25);
    x("cpu_op", "aten::linear", 1, t + 1, 6,
      {{"Sequence number", 20 + b}, {"Input Dims", {{1, 8, 16}, {64, 16}, {64}}}});
    x("cpu_op", "aten::linear", 1, t + 2, 3,
      {{"Input Dims", {{1, 8, 16}, {64, 16}, {64}}}});  // autocast's re-dispatch
    launch(1, t + 3, "nvjet_sm90_tst_128x128", 20);
    launch(1, t + 8, "void at::native::vectorized_elementwise_kernel<4>", 2);
  }
  x("cpu_op", "aten::linear", 1, 80, 5,
    {{"Sequence number", 30}, {"Input Dims", {{1, 8, 16}, {1000, 16}, {}}}});
  launch(1, 81, "nvjet_sm90_tst_256x128", 40);
  launch(1, 83, "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4>", 10);
  // Backward on thread 2, head first.
  x("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 2, 200, 10, {{"Sequence number", 30}});
  launch(2, 201, "nvjet_sm90_tst_256x128", 80);
  for (int b = 1; b >= 0; --b) {
    const double t = 220 + 20 * (1 - b);
    x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 2, t, 10,
      {{"Sequence number", 20 + b}});
    launch(2, t + 1, "nvjet_sm90_tst_128x128", 40);
    launch(2, t + 2, "nvjet_sm90_tst_128x128", 30);
  }
  x("cpu_op", "autograd::engine::evaluate_function: EmbeddingBackward0", 2, 270, 10,
    {{"Sequence number", 10}});
  launch(2, 271, "void at::native::embedding_backward_feature_kernel<float>", 7);
  launch(2, 290, "void at::native::vectorized_elementwise_kernel<4>", 3);  // outside every evaluation
  x("user_annotation", "Optimizer.step#AdamW.step", 1, 300, 20);
  launch(1, 301, "void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>", 50);
  return {{"schemaVersion", 1}, {"traceEvents", events.events}};
}

inline KinetoTrace parse(const std::string& text) {
  std::istringstream in(text);
  return parse_kineto_trace(in, "t.json");
}

}  // namespace pipesim::trace_import::testing
