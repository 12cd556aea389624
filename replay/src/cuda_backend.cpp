// `replay --backend cuda`: flattens the plan for the CUDA replay module (built whenever nvcc exists, loaded
// only here, so pipesim itself never loads CUDA libraries), runs it, and turns what it measured into the
// simulator's timeline with the plan's memory effects applied in measured time order.
#include <algorithm>
#include <cmath>
#include <map>
#include <queue>

#include <fmt/format.h>

#if defined(PIPESIM_WITH_CUDA_REPLAY)
#include <dlfcn.h>
#endif

#include "cuda_backend.hpp"
#include "cuda_replay_abi.hpp"
#include "pipesim/calibrate/adam_workspace.hpp"
#include "pipesim/calibrate/host_info.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/install_paths.hpp"

namespace pipesim::replay {

namespace {

using sim::OpId;

/// The calibration's Adam over `params` parameters (the module's host functions, called from CUDA's host
/// function thread in stream order).
void cpu_adam(std::int64_t params, int threads) {
  static calibrate::AdamWorkspace workspace;
  workspace.step(params, threads);
}

}  // namespace

cuda_abi::Request flatten_for_cuda(const sim::Plan& plan, double scale) {
  cuda_abi::Request r;
  std::map<sim::DeviceId, std::int32_t> gpu_index;
  for (std::size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].kind == sim::DeviceKind::kGpu) gpu_index[static_cast<sim::DeviceId>(d)] = r.gpus++;
  auto gpu_of = [&](sim::DeviceId d) {
    auto it = gpu_index.find(d);
    return it == gpu_index.end() ? -1 : it->second;
  };
  for (const auto& s : plan.streams) r.streams.push_back({gpu_of(s.device)});
  r.resident_bytes.assign(static_cast<std::size_t>(r.gpus), 0);
  for (const auto& [device, index] : gpu_index)
    r.resident_bytes[static_cast<std::size_t>(index)] =
        plan.devices[static_cast<std::size_t>(device)].resident_bytes;
  std::map<std::int32_t, std::vector<OpId>> groups;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const sim::Op& op = plan.ops[i];
    cuda_abi::Op o;
    o.stream = op.stream;
    for (OpId d : op.deps) o.waits.push_back(d);
    // Memory is the plan's, at full size: the work scale shrinks time, not what a GPU must hold.
    const sim::OpExtras& extras = plan.extras_of(op);
    o.alloc_bytes = extras.alloc_bytes;
    o.free_bytes = extras.free_bytes;
    const sim::DeviceId dev = plan.streams[static_cast<std::size_t>(op.stream)].device;
    if (op.fixed_duration >= 0) {
      o.work = cuda_abi::Work::kFixed;
      o.fixed_ns = static_cast<std::int64_t>(static_cast<double>(op.fixed_duration) * scale);
    } else if (const auto* c = sim::compute_of(op.payload)) {
      o.work = cuda_abi::Work::kCompute;
      o.flops = c->flops * scale;
      o.gemm_gflop = c->gemm_gflop;
      // Shape hints, their counts scaled; what rounds to no GEMM at all falls back to square GEMMs.
      for (const auto& g : c->gemms)
        if (const auto n = static_cast<std::int64_t>(std::llround(static_cast<double>(g.count) * scale));
            n > 0)
          o.gemms.insert(o.gemms.end(), {g.m, g.n, g.k, n});
      o.copy_bytes = static_cast<std::int64_t>(static_cast<double>(c->mem_bytes) / 2 * scale);
    } else if (const auto* t = std::get_if<sim::TransferWork>(&op.payload)) {
      o.work = cuda_abi::Work::kCopy;
      o.copy_bytes = static_cast<std::int64_t>(static_cast<double>(t->bytes) * scale);
      o.src_gpu = gpu_of(t->src);
      o.dst_gpu = gpu_of(t->dst);
      if (t->group >= 0 && t->group_size > 1) groups[t->group].push_back(static_cast<OpId>(i));
    } else if (const auto* m = std::get_if<sim::MemoryWork>(&op.payload)) {
      o.work = cuda_abi::Work::kCopy;
      o.copy_bytes = static_cast<std::int64_t>(static_cast<double>(m->bytes) / 2 * scale);
      o.src_gpu = o.dst_gpu = gpu_of(dev);
    } else if (const auto* w = std::get_if<sim::CpuWork>(&op.payload)) {
      o.work = cuda_abi::Work::kCpuAdam;
      o.params = static_cast<std::int64_t>(static_cast<double>(w->params) * scale);
      o.threads = w->threads;
    }
    r.ops.push_back(std::move(o));
  }
  for (const auto& [g, members] : groups)
    for (OpId a : members)
      for (OpId b : members)
        if (a != b)
          for (OpId d : plan.ops[static_cast<std::size_t>(b)].deps)
            r.ops[static_cast<std::size_t>(a)].waits.push_back(d);
  // Kahn's algorithm over the waits and stream order: every event is recorded before anything waits on it.
  const std::size_t n = r.ops.size();
  std::vector<std::vector<std::int32_t>> after(n);
  std::vector<std::int32_t> pending(n, 0), last_on_stream(plan.streams.size(), -1);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::int32_t w : r.ops[i].waits) {
      after[static_cast<std::size_t>(w)].push_back(static_cast<std::int32_t>(i));
      ++pending[i];
    }
    std::int32_t& prev = last_on_stream[static_cast<std::size_t>(r.ops[i].stream)];
    if (prev >= 0) {
      after[static_cast<std::size_t>(prev)].push_back(static_cast<std::int32_t>(i));
      ++pending[i];
    }
    prev = static_cast<std::int32_t>(i);
  }
  std::queue<std::int32_t> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(static_cast<std::int32_t>(i));
  while (!ready.empty()) {
    const std::int32_t i = ready.front();
    ready.pop();
    r.issue_order.push_back(i);
    for (std::int32_t j : after[static_cast<std::size_t>(i)])
      if (--pending[static_cast<std::size_t>(j)] == 0) ready.push(j);
  }
  if (r.issue_order.size() != n)
    throw sim::InputError(
        "plan", "/ops",
        fmt::format("{} of {} ops can never be issued (a collective's members wait for each "
                    "other's successors)",
                    n - r.issue_order.size(), n));
  r.cpu_adam = cpu_adam;
  return r;
}

bool cuda_replay_compiled() {
#if defined(PIPESIM_WITH_CUDA_REPLAY)
  return true;
#else
  return false;
#endif
}

std::vector<sim::Timeline> run_cuda_replay(const sim::Plan& plan, const ReplayOptions& o,
                                           ReplayEnvironment& env) {
  const cuda_abi::Request request = [&] {
    cuda_abi::Request r = flatten_for_cuda(plan, o.work_scale);
    r.iterations = o.iterations;
    r.timeout_s = o.timeout_s;
    return r;
  }();
  cuda_abi::Outcome out;
#if defined(PIPESIM_WITH_CUDA_REPLAY)
  const std::string path = sim::find_module(PIPESIM_CUDA_REPLAY_MODULE_FILE);
  void* module = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (path.empty()) {
    out.why_not =
        "cannot load the CUDA replay module: " + sim::module_search_text(PIPESIM_CUDA_REPLAY_MODULE_FILE);
  } else if (!module) {
    const char* why = dlerror();
    out.why_not = "cannot load the CUDA replay module " + path + ": " + (why ? why : "unknown error");
  } else if (auto entry = reinterpret_cast<void (*)(const cuda_abi::Request*, cuda_abi::Outcome*)>(
                 dlsym(module, "pipesim_cuda_replay_entry"))) {
    entry(&request, &out);
  } else {
    out.why_not = "the CUDA replay module has no entry point";
  }
#else
  out.why_not = "pipesim was built without CUDA (no nvcc found)";
#endif
  if (!out.ran)
    throw sim::InputError(sim::Option{"backend"}, "",
                          fmt::format("the cuda replay did not run: {}; valid here: host", out.why_not));
  const auto host = calibrate::probe_host();
  env.host = fmt::format("{}; {} ({} logical CPUs)", out.device, host.cpu_model, host.cores);
  env.timing = out.timing;
  // The pools' high-water marks, by plan device (GPUs in plan order, as flattened); -1 elsewhere.
  std::vector<sim::DeviceId> gpu_devices;
  for (std::size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].kind == sim::DeviceKind::kGpu) gpu_devices.push_back(static_cast<sim::DeviceId>(d));
  std::vector<sim::Timeline> runs;
  for (std::size_t k = 0; k < out.start.size(); ++k) {
    sim::Timeline tl;
    tl.start.assign(out.start[k].begin(), out.start[k].end());
    tl.end.assign(out.end[k].begin(), out.end[k].end());
    tl.peak_bytes.assign(plan.devices.size(), -1);
    if (k < out.peak_bytes.size())
      for (std::size_t g = 0; g < out.peak_bytes[k].size() && g < gpu_devices.size(); ++g)
        tl.peak_bytes[static_cast<std::size_t>(gpu_devices[g])] = out.peak_bytes[k][g];
    runs.push_back(std::move(tl));
  }
  return runs;
}

}  // namespace pipesim::replay
