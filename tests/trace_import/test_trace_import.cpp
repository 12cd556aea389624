// Importing PyTorch profiler traces: kernels classed by name, a small hand-written trace attributed to its
// layers and passes by hand, the workload it becomes, and one clear error for each kind of malformed input.
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/profiled_workload.hpp"
#include "pipesim/trace_import/host_wait.hpp"
#include "pipesim/trace_import/kernel_class.hpp"
#include "pipesim/trace_import/kineto_trace.hpp"
#include "pipesim/trace_import/step_profile.hpp"
#include "pipesim/trace_import/trace_fit.hpp"
#include "pipesim/trace_import/workload_file.hpp"
#include "tiny_trace.hpp"

namespace pipesim::trace_import {
namespace {

using nlohmann::json;
using testing::parse;
using testing::tiny_trace;

TEST(KernelClass, NamesOfTheLibrariesPyTorchRuns) {
  EXPECT_EQ(classify_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"), KernelClass::kGemm);
  EXPECT_EQ(
      classify_kernel("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn>"),
      KernelClass::kGemm);
  EXPECT_EQ(classify_kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7"),
            KernelClass::kAttention);
  EXPECT_EQ(classify_kernel("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>"),
            KernelClass::kAttention);
  EXPECT_EQ(classify_kernel(
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>"),
            KernelClass::kOptimizer);
  EXPECT_EQ(
      classify_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"),
      KernelClass::kElementwise);
  EXPECT_EQ(classify_kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>"),
            KernelClass::kReduction);
  EXPECT_EQ(classify_kernel("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>"),
            KernelClass::kReduction);
  EXPECT_EQ(classify_kernel("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float>"),
            KernelClass::kCopy);
  EXPECT_EQ(classify_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            KernelClass::kCommunication);
  EXPECT_EQ(classify_kernel("Memset (Device)", true), KernelClass::kCopy);
  EXPECT_EQ(classify_kernel("my_custom_kernel"), KernelClass::kOther);
}

TEST(TraceImport, ATinyStepByHand) {
  const StepProfile s = profile_step(parse(tiny_trace().dump()));
  EXPECT_EQ(s.block_module, "TinyBlock");
  ASSERT_EQ(s.layers.size(), 4u);
  // Embedding: its lookup forward, its backward's kernel.
  EXPECT_DOUBLE_EQ(s.layers[0].forward.gpu_us, 5);
  EXPECT_DOUBLE_EQ(s.layers[0].backward.gpu_us, 7);
  EXPECT_EQ(s.layers[0].params, 16000);
  // Each block: a GEMM and an element-wise kernel forward (2 launches), two GEMMs backward.
  for (int b = 1; b <= 2; ++b) {
    EXPECT_DOUBLE_EQ(s.layers[static_cast<std::size_t>(b)].forward.gpu_us, 22) << b;
    EXPECT_EQ(s.layers[static_cast<std::size_t>(b)].forward.launches, 2) << b;
    EXPECT_DOUBLE_EQ(s.layers[static_cast<std::size_t>(b)].backward.gpu_us, 70) << b;
    EXPECT_EQ(s.layers[static_cast<std::size_t>(b)].backward.launches, 2) << b;
    EXPECT_EQ(s.layers[static_cast<std::size_t>(b)].params, 64 * 16 + 64) << b;  // once, with its bias
  }
  // Head: the output GEMM and the softmax; its matrix is shaped like the embedding's.
  EXPECT_DOUBLE_EQ(s.layers[3].forward.gpu_us, 50);
  EXPECT_DOUBLE_EQ(s.layers[3].backward.gpu_us, 80);
  EXPECT_EQ(s.layers[3].params, 0);
  EXPECT_EQ(s.head_matrix, 16000);
  EXPECT_DOUBLE_EQ(s.optimizer.gpu_us, 50);
  EXPECT_DOUBLE_EQ(s.unattributed.gpu_us, 3);
  // Every kernel once: 5 + 2 x (22 + 70) + 50 + 80 + 7 + 3 + 50.
  EXPECT_DOUBLE_EQ(s.gpu_us, 379);
  EXPECT_EQ(s.launches, 15);
  // Launches a pass as a refit framework takes them (calibrate --from-trace --framework-out): the embedding's
  // one and one, the blocks' two and two, the head's two forward and its one backward plus the kernel
  // launched outside every span; with the optimizer's one, the step's 15.
  const StepLaunches n = step_launches(s);
  EXPECT_EQ(std::make_pair(n.embedding.forward, n.embedding.backward), std::make_pair(1, 1));
  EXPECT_EQ(std::make_pair(n.block.forward, n.block.backward), std::make_pair(2, 2));
  EXPECT_EQ(std::make_pair(n.head.forward, n.head.backward), std::make_pair(2, 2));
  EXPECT_DOUBLE_EQ(s.classes[static_cast<std::size_t>(KernelClass::kGemm)], 2 * (20 + 70) + 40 + 80);
  EXPECT_DOUBLE_EQ(s.classes[static_cast<std::size_t>(KernelClass::kOptimizer)], 50);
  // Replayed at 5 us of profiler a recorded op and 2 a Python frame: the CPU keeps ahead of the GPU until the
  // backward starts. Its first call comes 118 us after the softmax's launch, 108 of them the CPU's own (two
  // ops recorded in between), when the GPU has finished at 99 us: it waits 40 us before the head's backward.
  // The CPU's own time from the first launch to the last: 192 us; the step: 379 us of kernels and the wait.
  EXPECT_DOUBLE_EQ(s.layers[3].backward.host_wait_us, 40);
  EXPECT_DOUBLE_EQ(s.host_wait_us, 40);
  EXPECT_DOUBLE_EQ(s.host_cpu_us, 192);
  EXPECT_DOUBLE_EQ(s.replayed_step_us, 419);
  for (const LayerProfile& l : s.layers) {
    if (&l != &s.layers[3]) {
      EXPECT_DOUBLE_EQ(l.forward.host_wait_us + l.backward.host_wait_us, 0) << l.role;
    }
  }

  // The workload: per layer times and launches, parameters at 16 B, the unattributed kernel with the head.
  WorkloadOptions o;
  o.name = "tiny";
  o.tied_embeddings = true;
  const json w = workload_json(s, o);
  const sim::Workload parsed = sim::parse_workload(w.dump(), "tiny.json", sim::Recompute::kNone);
  ASSERT_EQ(parsed.layers.size(), 4u);
  EXPECT_EQ(parsed.layers[1].fwd_ns, 22000);
  // The waits measured, the CPU's cost is in the times: no launch count bounds them again.
  EXPECT_EQ(parsed.layers[1].kernels, 0);
  EXPECT_EQ(parsed.layers[1].input_grad_extra_kernels, 0);
  EXPECT_EQ(parsed.layers[3].bwd_input_ns + parsed.layers[3].bwd_weight_ns, 83000 + 40000);
  EXPECT_EQ(parsed.layers[1].param_bytes, 16 * (64 * 16 + 64));
  EXPECT_EQ(parsed.optimizer_ns, 50000);
  // Five blocks from the two: their mean five times, the optimizer scaled by the parameters it updates.
  o.blocks = 5;
  const sim::Workload deeper =
      sim::parse_workload(workload_json(s, o).dump(), "deeper.json", sim::Recompute::kNone);
  ASSERT_EQ(deeper.layers.size(), 7u);
  EXPECT_EQ(deeper.layers[5].bwd_input_ns + deeper.layers[5].bwd_weight_ns, 70000);
  const double traced = 16000 + 2 * 1088, written = 16000 + 5 * 1088;
  EXPECT_EQ(deeper.optimizer_ns, std::llround(50000 * written / traced));
}

/// Two steps of the tiny loop, as torch.profiler's schedule records them: ProfilerStep#3, then #4 5 ms later
/// with every kernel twice as long (its correlation ids 1,000 on); `second_block_renamed`: #4's second block
/// is not one (another model).
json two_steps(bool second_block_renamed = false) {
  const json one = tiny_trace();
  json events = json::array();
  for (int copy = 0; copy < 2; ++copy) {
    const double shift = 5000.0 * copy;
    events.push_back({{"ph", "X"},
                      {"cat", "user_annotation"},
                      {"name", "ProfilerStep#" + std::to_string(3 + copy)},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", shift - 1},
                      {"dur", 400}});
    for (json e : one["traceEvents"]) {
      e["ts"] = e["ts"].get<double>() + shift;
      if (e["args"].contains("correlation"))
        e["args"]["correlation"] = e["args"]["correlation"].get<int>() + 1000 * copy;
      if (e["cat"] == "kernel") e["dur"] = e["dur"].get<double>() * (1 + copy);
      if (copy == 1 && second_block_renamed && e["name"] == "nn.Module: TinyBlock_1")
        e["name"] = "nn.Module: Tiny_1";
      events.push_back(e);
    }
  }
  return {{"traceEvents", events}};
}

TEST(TraceImport, ImportsOneOfTheStepsATraceMarks) {
  const json one = tiny_trace();
  const std::string two = two_steps().dump();
  const StepProfile alone = profile_step(parse(one.dump()));
  const StepProfile third = profile_step(parse(two), 3), last = profile_step(parse(two));
  EXPECT_EQ(third.step, "ProfilerStep#3");
  EXPECT_EQ(third.marked_steps, 2);
  EXPECT_EQ(last.step, "ProfilerStep#4");
  EXPECT_TRUE(alone.step.empty());
  // Each step alone: the tiny step's two blocks and times, the second's doubled.
  ASSERT_EQ(third.layers.size(), 4u);
  ASSERT_EQ(last.layers.size(), 4u);
  EXPECT_DOUBLE_EQ(third.gpu_us, alone.gpu_us);
  EXPECT_DOUBLE_EQ(last.gpu_us, 2 * alone.gpu_us);
  EXPECT_DOUBLE_EQ(last.layers[1].backward.gpu_us, 2 * alone.layers[1].backward.gpu_us);
  EXPECT_EQ(last.layers[1].params, alone.layers[1].params);
  EXPECT_EQ(last.launches, alone.launches);
  auto error = [&](const std::string& text, std::int64_t step) -> std::string {
    try {
      profile_step(parse(text), step);
    } catch (const sim::InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error(two, 7).find("no ProfilerStep#7 (--step); valid: 3, 4"), std::string::npos)
      << error(two, 7);
  EXPECT_NE(error(one.dump(), 3).find("the trace marks no steps"), std::string::npos) << error(one.dump(), 3);
}

TEST(TraceImport, TheMeanOfEveryStepATraceMarks) {
  const StepProfile alone = profile_step(parse(tiny_trace().dump()));
  const StepProfile mean = profile_step(parse(two_steps().dump()), kAllSteps);
  EXPECT_EQ(mean.step, "ProfilerStep#3 to ProfilerStep#4");
  EXPECT_EQ(mean.averaged_steps, 2);
  EXPECT_EQ(mean.marked_steps, 2);
  // The kernels of #4 run twice as long as #3's: the mean 1.5 times the tiny step's, layer by layer and class
  // by class; launches, parameters and FLOPs as in each.
  ASSERT_EQ(mean.layers.size(), 4u);
  EXPECT_DOUBLE_EQ(mean.gpu_us, 1.5 * alone.gpu_us);
  for (std::size_t l = 0; l < 4; ++l) {
    EXPECT_DOUBLE_EQ(mean.layers[l].forward.gpu_us, 1.5 * alone.layers[l].forward.gpu_us);
    EXPECT_DOUBLE_EQ(mean.layers[l].backward.gpu_us, 1.5 * alone.layers[l].backward.gpu_us);
    EXPECT_EQ(mean.layers[l].backward.launches, alone.layers[l].backward.launches);
    EXPECT_EQ(mean.layers[l].params, alone.layers[l].params);
    EXPECT_DOUBLE_EQ(mean.layers[l].forward_flops, alone.layers[l].forward_flops);
  }
  for (std::size_t c = 0; c < alone.classes.size(); ++c)
    EXPECT_DOUBLE_EQ(mean.classes[c], 1.5 * alone.classes[c]);
  EXPECT_DOUBLE_EQ(mean.optimizer.gpu_us, 1.5 * alone.optimizer.gpu_us);
  EXPECT_EQ(mean.launches, alone.launches);
  // The replays' mean: each step's replay from its own events.
  const StepProfile third = profile_step(parse(two_steps().dump()), 3),
                    last = profile_step(parse(two_steps().dump()));
  EXPECT_DOUBLE_EQ(mean.replayed_step_us, (third.replayed_step_us + last.replayed_step_us) / 2);
  EXPECT_DOUBLE_EQ(mean.host_wait_us, (third.host_wait_us + last.host_wait_us) / 2);
  // A trace that marks no steps is one step, as without kAllSteps.
  EXPECT_DOUBLE_EQ(profile_step(parse(tiny_trace().dump()), kAllSteps).gpu_us, alone.gpu_us);
  // Steps of other models are not averaged.
  try {
    profile_step(parse(two_steps(true).dump()), kAllSteps);
    ADD_FAILURE() << "averaged steps of two models";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "ProfilerStep#3 runs 2 blocks of TinyBlock, ProfilerStep#4 1 of TinyBlock: "
                  "the steps averaged must run one model"),
              std::string::npos)
        << e.what();
  }
}

TEST(TraceImport, TheProfilersCostFromAStepMeasuredWithoutIt) {
  const KinetoTrace trace = parse(tiny_trace().dump());
  const ProfilerCost base{5, 2};
  // The tiny step replays in 419 us at 5 and 2 us (ATinyStepByHand), in 379 (its kernels alone) once the
  // profiler's cost leaves the CPU no part, and longest with no cost taken out.
  const double raw = profile_step(trace, -1, ProfilerCost{0, 0}).replayed_step_us;
  EXPECT_GT(raw, 419);
  // A measured 430 us: the costs scaled alike, to a replay of 430.
  const ProfilerCost fit = fit_profiler_cost(trace, -1, 430, base);
  EXPECT_NEAR(fit.op_us / fit.python_us, 2.5, 1e-9);
  EXPECT_LT(fit.op_us, 5);
  EXPECT_NEAR(profile_step(trace, -1, fit).replayed_step_us, 430, 430 * 1e-3);
  // Measured longer than the trace with nothing taken out: no cost. Shorter than the kernels alone: the least
  // cost that leaves the CPU out, which replays the kernels' 379 us.
  EXPECT_EQ(fit_profiler_cost(trace, -1, raw + 100, base).op_us, 0);
  const ProfilerCost gpu_bound = fit_profiler_cost(trace, -1, 300, base);
  EXPECT_NEAR(profile_step(trace, -1, gpu_bound).replayed_step_us, 379, 379 * 1e-3);
  EXPECT_LT(gpu_bound.op_us, 64 * 5);
}

TEST(TraceImport, AProfiledLayerLastsAtLeastItsLaunchesDispatch) {
  const StepProfile s = profile_step(parse(tiny_trace().dump()));
  WorkloadOptions o;
  o.name = "tiny";
  // A workload that counted its launches but not what the GPU waited for them (a benchmark's).
  json file = workload_json(s, o);
  for (json& layer : file["layers"]) layer.erase("fwd_host_wait_ms"), layer.erase("bwd_host_wait_ms");
  sim::Workload w = sim::parse_workload(file.dump(), "tiny.json", sim::Recompute::kNone);
  // At 24 us a launch, a block's forward (2 launches, 22 us of GPU) takes 48 us; its backward (2 launches,
  // 70 us) keeps its GPU time; the head's forward (2 launches, 50 us) too.
  sim::bound_by_dispatch(24000, w.layers);
  EXPECT_EQ(w.layers[1].fwd_ns, 48000);
  EXPECT_EQ(w.layers[1].bwd_input_ns + w.layers[1].bwd_weight_ns, 70000);
  EXPECT_EQ(w.layers[3].fwd_ns, 50000);
}

TEST(HostWait, TheGpuWaitsForTheCpuLessTheProfilersOwnTime) {
  // One thread launches five kernels on one stream (1 ms after each launch in the trace: the replay sets its
  // own starts) and synchronizes once. The profiler costs 5 us an op (each CUDA call is one) and 2 a frame.
  testing::TraceEvents t;
  t.launch(1, 0, "void a<float>", 10);
  for (double ts : {2.0, 4.0, 6.0}) t.add("cpu_op", "aten::view", 1, ts, 0.5);
  for (double ts : {3.0, 5.0}) t.add("python_function", "model.py(7): forward", 1, ts, 0.5);
  t.launch(1, 30, "void b<float>", 5);
  t.launch(1, 32, "void c<float>", 100);
  t.add("cuda_runtime", "cudaDeviceSynchronize", 1, 40, 120, {{"correlation", 99}});
  for (const auto& [ts, dur] : {std::pair{162.0, 3.0}, std::pair{163.0, 1.0}})  // the second inside the first
    t.events.push_back({{"ph", "X"},
                        {"cat", "overhead"},
                        {"name", "Activity Buffer Request"},
                        {"pid", -1},
                        {"tid", 0},
                        {"ts", ts},
                        {"dur", dur}});
  t.launch(1, 170, "void d<float>", 1);
  t.add("python_function", "model.py(9): forward", 1, 190, 0.5);
  t.launch(1, 200, "void e<float>", 4);
  const KinetoTrace trace = parse(json{{"traceEvents", t.events}}.dump());
  const HostWait w = replay_host(trace, ProfilerCost{5, 2});
  // a: starts at 0, ends at 10. b: 30 us later less 4 ops (three views and b's own launch) and 2 frames:
  // 6 us of CPU; it waits for a, 10 to 15. c: 2 us, all the profiler's: 15 to 115. The synchronize: 3 us of
  // CPU (8 less its own 5), then the CPU waits for the GPU (115) and the trace goes on from the call's end
  // (160). d: 10 us less its launch (5) and the profiler's buffer requests (3, the second inside the first):
  // 2, at 117, 2 us after the GPU went idle. e: 30 less its launch and a frame: 23, at 140, 22 us after d
  // ended.
  ASSERT_EQ(w.before.size(), 5u);
  EXPECT_DOUBLE_EQ(w.before[0] + w.before[1] + w.before[2], 0);
  EXPECT_DOUBLE_EQ(w.before[3], 2);
  EXPECT_DOUBLE_EQ(w.before[4], 22);
  EXPECT_DOUBLE_EQ(w.wait_us, 24);
  EXPECT_DOUBLE_EQ(w.cpu_us, 6 + 0 + 3 + 2 + 23);
  EXPECT_DOUBLE_EQ(w.step_us, 144);
  EXPECT_EQ(w.launches, 5);
  // Without the profiler's cost taken out, the CPU's traced time is all its own: b launches at 30, the GPU
  // idles 20 us before it, and so on.
  const HostWait raw = replay_host(trace, ProfilerCost{0, 0});
  EXPECT_DOUBLE_EQ(raw.before[1], 20);
  EXPECT_GT(raw.step_us, w.step_us);
}

TEST(TraceImport, GemmEfficiencyFromTheTracesGemms) {
  // The blocks' linears: 2 x 8 rows x 64 x 16 = 16,384 FLOPs in 20 us; the head's 2 x 8 x 1,000 x 16 =
  // 256,000 in 40 us. Autocast's inner linear is the outer one's.
  const KinetoTrace trace = parse(tiny_trace().dump());
  const std::vector<GemmTiming> g = gemm_timings(trace);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_DOUBLE_EQ(g[0].flops, 16384);
  EXPECT_DOUBLE_EQ(g[0].gpu_us, 20);
  EXPECT_DOUBLE_EQ(g[2].flops, 256000);
  EXPECT_DOUBLE_EQ(g[2].gpu_us, 40);
  // Against a peak of 1 TFLOP/s: 16,384 / 20 us = 0.82 GFLOP/s, 8.2e-4 of it; 256,000 / 40 us, 6.4e-3.
  sim::HardwareProfile base = sim::load_hardware_profile("h100-sxm-8x");
  base.gpu.peak_tflops["bf16"] = 1;
  const TraceFit fit = fit_profile(trace, base, "bf16", "fitted");
  EXPECT_EQ(fit.gemms, 3);
  const auto& curve = fit.profile.gpu.gemm_efficiency;
  ASSERT_GE(curve.size(), 3u);
  EXPECT_DOUBLE_EQ(curve[0].x, 1.6e-5);
  EXPECT_NEAR(curve[0].y, 16384 / 20e-6 / 1e12, 1e-12);
  EXPECT_DOUBLE_EQ(curve[1].x, 2.6e-4);
  EXPECT_NEAR(curve[1].y, 256000 / 40e-6 / 1e12, 1e-12);
  // The base curve beyond the sizes seen is kept.
  EXPECT_EQ(curve.back().x, base.gpu.gemm_efficiency.back().x);
  EXPECT_NE(fit.profile.gpu.sources.at("gemm_efficiency").find("--from-trace"), std::string::npos);
}

/// A trace of element-wise ops with their shapes and dtypes, one GEMM (fit_profile needs one), on thread 1.
/// `copies` casts of 4096 x 4096 fp32 into bf16 (100,663,296 B each) run 40 us apiece.
json streaming_trace(int copies) {
  testing::TraceEvents ev;
  auto op = [&](const std::string& name, double ts, double dur, json dims, json types) {
    ev.add("cpu_op", name, 1, ts, dur, {{"Input Dims", std::move(dims)}, {"Input type", std::move(types)}});
  };
  auto launch = [&](double ts, const std::string& kernel, double dur) { ev.launch(1, ts, kernel, dur); };
  const json big = {{4096, 4096}, {4096, 4096}}, cast = {"c10::BFloat16", "float"};
  const std::string copy_kernel =
      "void at::native::vectorized_elementwise_kernel<8, bfloat16_copy_kernel_cuda>";
  double t = 0;
  for (int i = 0; i < copies; ++i, t += 10) {
    op("aten::copy_", t, 5, big, cast);
    launch(t + 1, copy_kernel, 40);
  }
  // An add's promoting copy inside it: the kernel is the copy's (the innermost op holding its launch).
  op("aten::add", t, 8, big, {"float", "c10::BFloat16"});
  op("aten::copy_", t + 1, 5, big, cast);
  launch(t + 2, copy_kernel, 40);
  t += 10;
  // 1024 x 1024 fp32 plus itself: reads 8 MiB, writes 4 MiB; under 16 MiB, timed but not rated.
  op("aten::add", t, 5, {{1024, 1024}, {1024, 1024}}, {"float", "float"});
  launch(t + 1, "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>", 6);
  t += 10;
  // Two kernels, a GEMM's kernel and a dtype not known here: none timed.
  op("aten::mul_", t, 5, big, {"float", "float"});
  launch(t + 1, "void at::native::vectorized_elementwise_kernel<4, MulFunctor<float>>", 30);
  launch(t + 2, "void at::native::vectorized_elementwise_kernel<4, MulFunctor<float>>", 30);
  t += 10;
  op("aten::copy_", t, 5, big, cast);
  launch(t + 1, "nvjet_sm90_tst_128x128", 40);
  t += 10;
  op("aten::copy_", t, 5, big, {"c10::complex<float>", "float"});
  launch(t + 1, copy_kernel, 40);
  t += 10;
  op("aten::mm", t, 5, {{64, 64}, {64, 64}}, {"float", "float"});
  launch(t + 1, "nvjet_sm90_tst_128x128", 10);
  return {{"traceEvents", ev.events}};
}

TEST(TraceImport, StreamingRateFromTheTracesElementwiseOps) {
  const KinetoTrace trace = parse(streaming_trace(8).dump());
  // Recorded: the copies (8 + the nested one + the GEMM-launching one), both adds, the mul_; not the complex
  // copy.
  EXPECT_EQ(trace.streaming.size(), 13u);
  const std::vector<StreamingTiming> t = streaming_timings(trace);
  ASSERT_EQ(t.size(), 10u);  // the 8 casts, the nested cast, the small add
  const double cast_bytes = 4096.0 * 4096 * (2 + 4);
  int casts = 0;
  for (const StreamingTiming& s : t) {
    if (s.bytes == cast_bytes && s.gpu_us == 40) ++casts;
    if (s.bytes != cast_bytes) {
      EXPECT_DOUBLE_EQ(s.bytes, 1024.0 * 1024 * 4 * 3);
      EXPECT_DOUBLE_EQ(s.gpu_us, 6);
    }
  }
  EXPECT_EQ(casts, 9);
  // 9 casts of 100,663,296 B in 40 us each: 2,516.58 GB/s. Through a framework whose element-wise kernels
  // reach 0.88 of the GPU's rate, on a GPU of 3,350 GB/s: an efficiency of 2,516.58 / (3,350 x 0.88).
  const sim::HardwareProfile base = sim::load_hardware_profile("h100-sxm-8x");
  const TraceFit fit = fit_profile(trace, base, "bf16", "fitted", 0.88);
  EXPECT_EQ(fit.streaming_ops, 9);
  EXPECT_NEAR(fit.streaming_GBps, cast_bytes / 40e-6 / 1e9, 1e-9);
  EXPECT_NEAR(fit.profile.gpu.hbm_efficiency, cast_bytes / 40e-6 / 1e9 / (base.gpu.hbm_GBps * 0.88), 1e-12);
  EXPECT_NE(fit.profile.gpu.sources.at("hbm_efficiency").find("--from-trace"), std::string::npos);
  // Seven rated ops are too few (8 needed): the base profile's rate stays.
  const TraceFit few = fit_profile(parse(streaming_trace(6).dump()), base, "bf16", "fitted", 0.88);
  EXPECT_EQ(few.streaming_ops, 0);
  EXPECT_EQ(few.profile.gpu.hbm_efficiency, base.gpu.hbm_efficiency);
  EXPECT_EQ(few.profile.gpu.sources.at("hbm_efficiency"), base.gpu.sources.at("hbm_efficiency"));
}

std::string error_of(const std::string& text) {
  try {
    profile_step(parse(text));
  } catch (const sim::InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(TraceImport, MalformedTracesGetOneLineEach) {
  json good = tiny_trace();
  auto with = [&](auto edit) {
    json t = good;
    edit(t);
    return t.dump();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "malformed JSON"},
      {"{", "malformed JSON"},
      {"[1, 2]", "/traceEvents: missing"},
      {"{\"traceEvents\": 3}", "/traceEvents: missing"},
      {"{\"traceEvents\": {\"a\": 1}}", "/traceEvents: missing"},
      {"{\"traceEvents\": [1]}", "/traceEvents/0: expected an event object"},
      {"{\"traceEvents\": [null]}", "/traceEvents/0: expected an event object"},
      {"{\"traceEvents\": [\"x\"]}", "no GPU kernels"},
      {"{\"traceEvents\": []}", "no GPU kernels"},
      {"{\"traceEvents\": [], \"traceEvents\": []}", "a second traceEvents array"},
      {good.dump().substr(0, good.dump().size() / 2), "malformed JSON"},
      {with([](json& t) { t["traceEvents"][4]["ts"] = "soon"; }), "/traceEvents/4/ts: expected a number"},
      {with([](json& t) { t["traceEvents"][4]["dur"] = -1; }), "/traceEvents/4/dur: -1; valid"},
      {with([](json& t) { t["traceEvents"][4]["dur"] = nullptr; }), "/traceEvents/4/dur: expected a number"},
      {with([](json& t) { t["traceEvents"][4].erase("ts"); }), "/traceEvents/4/ts: missing"},
      {with([](json& t) { t["traceEvents"][4].erase("dur"); }), "/traceEvents/4/dur: missing"},
      {with([](json& t) { t["traceEvents"][4]["ts"] = true; }), "/traceEvents/4/ts: expected a number"},
      {with([](json& t) { t["traceEvents"][4]["ts"] = 1e300; }), "/traceEvents/4/ts: 1e+300; valid"},
      {with([](json& t) {
         for (auto& e : t["traceEvents"])
           if (e["cat"] == "python_function") e["cat"] = "cpu_op";
       }),
       "no nn.Module spans"},
      {with([](json& t) {
         for (auto& e : t["traceEvents"])
           if (e["cat"] == "python_function" &&
               e["name"].get<std::string>().find("TinyBlock") != std::string::npos)
             e["name"] = "nn.Module: Tiny_0";
       }),
       "no repeated block module"},
      {with([](json& t) {
         for (auto& e : t["traceEvents"])
           if (e["cat"] == "kernel") e["args"].erase("correlation");
       }),
       "no GPU kernels"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string err = error_of(text);
    EXPECT_NE(err.find(expected), std::string::npos) << text.substr(0, 80) << " -> " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_EQ(err.rfind("t.json", 0), 0u) << err;
  }
}

TEST(TraceImport, ReadsGzipAndPlainFilesAndNamesUnreadableOnes) {
  const std::string text = tiny_trace().dump();
  const std::string plain = ::testing::TempDir() + "tiny.json",
                    packed = ::testing::TempDir() + "tiny.json.gz";
  std::ofstream(plain) << text;
  gzFile gz = gzopen(packed.c_str(), "wb");
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  EXPECT_EQ(read_kineto_trace(plain).gpu.size(), read_kineto_trace(packed).gpu.size());
  EXPECT_EQ(read_kineto_trace(packed).gpu.size(), 15u);
  try {
    read_kineto_trace(::testing::TempDir() + "none.json.gz");
    ADD_FAILURE() << "no error";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
  // A gzip stream cut short.
  std::ifstream in(packed, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = ::testing::TempDir() + "cut.json.gz";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  try {
    read_kineto_trace(cut);
    ADD_FAILURE() << "no error";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pipesim::trace_import
