#include "pipesim/trace_import/step_profile.hpp"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/trace_import/memory_events.hpp"

namespace pipesim::trace_import {

namespace {

/// "Qwen3DecoderLayer_12" -> "Qwen3DecoderLayer"; empty when the name has no instance number.
std::string module_class(const std::string& name) {
  const auto underscore = name.rfind('_');
  if (underscore == std::string::npos || underscore + 1 == name.size()) return {};
  const bool digits = std::all_of(name.begin() + static_cast<std::ptrdiff_t>(underscore) + 1, name.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  return digits ? name.substr(0, underscore) : std::string{};
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Spans sorted by start, looked up by the time of a call made inside one (spans of one kind do not
/// overlap: blocks run one after another, as do the autograd engine's evaluations on one thread).
class SpanIndex {
 public:
  void add(std::int64_t tid, double ts, double dur, std::int64_t value) {
    spans_[tid].push_back({ts, ts + dur, value});
  }
  void sort() {
    for (auto& [tid, v] : spans_)
      std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  }
  /// The value of the span of thread `tid` that holds `ts`, or -1.
  std::int64_t find(std::int64_t tid, double ts) const {
    const auto it = spans_.find(tid);
    if (it == spans_.end()) return -1;
    const auto& v = it->second;
    auto after =
        std::upper_bound(v.begin(), v.end(), ts, [](double t, const Span& s) { return t < s.begin; });
    if (after == v.begin()) return -1;
    --after;
    return ts <= after->end ? after->value : -1;
  }

 private:
  struct Span {
    double begin, end;
    std::int64_t value;
  };
  std::unordered_map<std::int64_t, std::vector<Span>> spans_;
};

void add(PassProfile& p, const GpuActivity& a, KernelClass c) {
  p.gpu_us += a.dur;
  ++p.launches;
  p.classes[static_cast<std::size_t>(c)] += a.dur;
}

}  // namespace

namespace {

/// The number of "ProfilerStep#12": 12 (-1 for another name).
std::int64_t step_number(const std::string& name) {
  const std::string digits = name.substr(std::string("ProfilerStep#").size());
  if (digits.empty() || digits.size() > 12 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

/// The step to import: ProfilerStep#`step`, or the last marked for -1.
const CpuSpan& chosen_step(const KinetoTrace& trace, std::int64_t step) {
  const CpuSpan* last = nullptr;
  std::vector<std::string> valid;
  for (const CpuSpan& s : trace.steps) {
    if (step >= 0 && step_number(s.name) == step) return s;
    if (last == nullptr || s.ts > last->ts) last = &s;
    valid.push_back(std::to_string(step_number(s.name)));
  }
  if (step < 0) return *last;
  throw sim::InputError(trace.file, "/traceEvents",
                        fmt::format("no ProfilerStep#{} (--step); valid: {}", step, fmt::join(valid, ", ")));
}

/// The events of one step: CPU spans and launches inside its span, the GPU work they launched (and work
/// launched from no traced call that ran during it).
KinetoTrace within(const KinetoTrace& trace, const CpuSpan& step) {
  const double begin = step.ts, end = step.ts + step.dur;
  auto inside = [&](double ts) { return ts >= begin && ts <= end; };
  KinetoTrace out;
  out.file = trace.file;
  out.device = trace.device;
  out.names = trace.names;
  out.steps = {step};
  for (const CpuSpan& m : trace.modules)
    if (inside(m.ts)) out.modules.push_back(m);
  for (const CpuSpan& o : trace.optimizer)
    if (inside(o.ts)) out.optimizer.push_back(o);
  for (const CpuSpan& o : trace.overhead)
    if (o.ts + o.dur >= begin && o.ts <= end) out.overhead.push_back(o);
  for (const AutogradOp& a : trace.autograd)
    if (inside(a.ts)) out.autograd.push_back(a);
  for (const WeightUse& w : trace.weights)
    if (inside(w.ts)) out.weights.push_back(w);
  std::unordered_map<std::int64_t, bool> launched;  // correlation -> launched inside the step
  for (const Launch& l : trace.launches) {
    launched.emplace(l.correlation, inside(l.ts));
    if (inside(l.ts)) out.launches.push_back(l);
  }
  for (const GpuActivity& a : trace.gpu) {
    const auto it = launched.find(a.correlation);
    if (it != launched.end() ? it->second : inside(a.ts)) out.gpu.push_back(a);
  }
  out.threads = trace.threads;
  for (const CpuMark& m : trace.marks)
    if (inside(m.ts)) out.marks.push_back(m);
  for (const MemoryEvent& m : trace.memory)
    if (inside(m.ts)) out.memory.push_back(m);
  return out;
}

/// Attributes one step's events (the whole trace, or one step's window of it).
StepProfile profile_events(const KinetoTrace& trace, std::int32_t marked_steps, const ProfilerCost& cost);

}  // namespace

StepProfile profile_step(const KinetoTrace& whole, std::int64_t step, const ProfilerCost& cost) {
  if (whole.steps.empty()) {
    if (step >= 0)
      throw sim::InputError(
          whole.file, "/traceEvents",
          "the trace marks no steps (ProfilerStep#N: torch.profiler with a schedule); leave out "
          "--step to import all of it");
    return profile_events(whole, 0, cost);
  }
  const auto marked = static_cast<std::int32_t>(whole.steps.size());
  if (step != kAllSteps) return profile_events(within(whole, chosen_step(whole, step)), marked, cost);
  std::vector<const CpuSpan*> spans;
  for (const CpuSpan& s : whole.steps) spans.push_back(&s);
  std::stable_sort(spans.begin(), spans.end(),
                   [](const CpuSpan* a, const CpuSpan* b) { return a->ts < b->ts; });
  std::vector<StepProfile> each;
  for (const CpuSpan* s : spans) each.push_back(profile_events(within(whole, *s), marked, cost));
  return mean_of_steps(each, whole.file);
}

namespace {

StepProfile profile_events(const KinetoTrace& trace, std::int32_t marked_steps, const ProfilerCost& cost) {
  using sim::InputError;
  if (trace.modules.empty())
    throw InputError(trace.file, "/traceEvents",
                     "no nn.Module spans; profile with with_stack=True (or with_modules=True) so that each "
                     "kernel can be given to its layer");
  // The block: the most repeated module class named like one (…Layer, …Block), the first in file order on
  // a tie.
  std::map<std::string, int> counts;
  std::vector<std::string> order;
  for (const CpuSpan& m : trace.modules) {
    const std::string c = module_class(m.name);
    if (c.empty() || !(ends_with(c, "Layer") || ends_with(c, "Block"))) continue;
    if (counts[c]++ == 0) order.push_back(c);
  }
  StepProfile out;
  out.marked_steps = marked_steps;
  if (!trace.steps.empty()) out.step = trace.steps.front().name;
  for (const std::string& c : order)
    if (out.block_module.empty() || counts[c] > counts[out.block_module]) out.block_module = c;
  if (out.block_module.empty())
    throw InputError(trace.file, "/traceEvents",
                     "no repeated block module (an nn.Module class named …Layer or …Block, e.g. "
                     "LlamaDecoderLayer or GPT2Block)");
  // The model's thread is the one that ran its blocks; blocks in the order they ran.
  std::vector<const CpuSpan*> blocks;
  for (const CpuSpan& m : trace.modules)
    if (module_class(m.name) == out.block_module) blocks.push_back(&m);
  std::sort(blocks.begin(), blocks.end(), [](const CpuSpan* a, const CpuSpan* b) { return a->ts < b->ts; });
  const std::int64_t model_tid = blocks.front()->tid;
  const double first_block = blocks.front()->ts;
  SpanIndex block_at, optimizer_at, backward_at;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    block_at.add(blocks[i]->tid, blocks[i]->ts, blocks[i]->dur, static_cast<std::int64_t>(i));
  for (const CpuSpan& o : trace.optimizer) optimizer_at.add(o.tid, o.ts, o.dur, 0);
  for (const AutogradOp& a : trace.autograd)
    if (a.backward) backward_at.add(a.tid, a.ts, a.dur, a.sequence);
  block_at.sort();
  optimizer_at.sort();
  backward_at.sort();
  const auto n = static_cast<std::int64_t>(blocks.size());
  // Layer index: 0 the embedding, 1..n the blocks, n+1 the head (with the loss).
  auto forward_layer = [&](std::int64_t tid, double ts) -> std::int64_t {
    const std::int64_t b = block_at.find(tid, ts);
    if (b >= 0) return b + 1;
    return ts < first_block ? 0 : n + 1;
  };
  auto& layer_of_sequence = out.layer_of_sequence;
  for (const AutogradOp& a : trace.autograd)
    if (!a.backward && a.tid == model_tid)
      layer_of_sequence.emplace(a.sequence, static_cast<std::int32_t>(forward_layer(a.tid, a.ts)));

  out.layers.resize(static_cast<std::size_t>(n + 2));
  out.layers.front().role = "embedding";
  out.layers.back().role = "head";
  for (std::int64_t i = 1; i <= n; ++i) out.layers[static_cast<std::size_t>(i)].role = "block";
  // Weights: each linear, embedding and addmm the model's thread ran, once: an op recorded inside another
  // (autocast's re-dispatch of a linear, the addmm of a linear with a bias) reads the same weight.
  std::vector<const WeightUse*> uses;
  for (const WeightUse& w : trace.weights)
    if (w.tid == model_tid) uses.push_back(&w);
  std::stable_sort(uses.begin(), uses.end(),
                   [](const WeightUse* a, const WeightUse* b) { return a->ts < b->ts; });
  double outer_end = -1e300;
  std::int64_t embedding_matrix = 0;
  for (const WeightUse* w : uses) {
    if (w->ts < outer_end) continue;
    outer_end = w->ts + w->dur;
    const std::int64_t layer = forward_layer(w->tid, w->ts);
    out.layers[static_cast<std::size_t>(layer)].forward_flops += w->flops;
    if (w->op == WeightUse::Op::kEmbedding && embedding_matrix == 0) embedding_matrix = w->params;
    if (layer == n + 1 && w->params == embedding_matrix && out.head_matrix == 0) {
      out.head_matrix = w->params;
      continue;
    }
    out.layers[static_cast<std::size_t>(layer)].params += w->params;
  }
  std::unordered_map<std::int64_t, const Launch*> launch_of;
  for (const Launch& l : trace.launches) launch_of.emplace(l.correlation, &l);
  const HostWait host = replay_host(trace, cost);
  out.host_wait_us = host.wait_us;
  out.host_cpu_us = host.cpu_us;
  out.replayed_step_us = host.step_us;
  out.profiler_cost = cost;
  for (const GpuActivity& a : trace.gpu) {
    const KernelClass c =
        classify_kernel(trace.names[static_cast<std::size_t>(a.name)], a.kind != GpuActivity::Kind::kKernel);
    out.gpu_us += a.dur;
    ++out.launches;
    out.classes[static_cast<std::size_t>(c)] += a.dur;
    const auto it = launch_of.find(a.correlation);
    PassProfile* pass = &out.unattributed;
    if (it != launch_of.end()) {
      const Launch& l = *it->second;
      if (l.tid == model_tid) {
        pass = optimizer_at.find(l.tid, l.ts) >= 0
                   ? &out.optimizer
                   : &out.layers[static_cast<std::size_t>(forward_layer(l.tid, l.ts))].forward;
      } else if (const std::int64_t seq = backward_at.find(l.tid, l.ts); seq >= 0) {
        const auto layer = layer_of_sequence.find(seq);
        if (layer != layer_of_sequence.end())
          pass = &out.layers[static_cast<std::size_t>(layer->second)].backward;
      }
    }
    add(*pass, a, c);
    pass->host_wait_us += host.before[static_cast<std::size_t>(&a - trace.gpu.data())];
  }
  // Memory events: a forward's on the model's thread outside the optimizer, a backward's inside an
  // evaluation of one of the model's autograd nodes.
  BackwardWindow backward{1e300, -1e300};
  for (const AutogradOp& a : trace.autograd) {
    if (!a.backward) continue;
    backward.begin = std::min(backward.begin, a.ts);
    backward.end = std::max(backward.end, a.ts + a.dur);
  }
  auto place = [&](std::int64_t tid, double ts) -> PassPlace {
    using Pass = PassPlace::Pass;
    if (tid == model_tid)
      return optimizer_at.find(tid, ts) >= 0
                 ? PassPlace{}
                 : PassPlace{Pass::kForward, static_cast<std::int32_t>(forward_layer(tid, ts))};
    const std::int64_t seq = backward_at.find(tid, ts);
    const auto layer = seq >= 0 ? layer_of_sequence.find(seq) : layer_of_sequence.end();
    return layer != layer_of_sequence.end() ? PassPlace{Pass::kBackward, layer->second} : PassPlace{};
  };
  add_memory_events(trace.memory, place, backward, out);
  return out;
}

}  // namespace

ProfilerCost fit_profiler_cost(const KinetoTrace& trace, std::int64_t step, double measured_us,
                               const ProfilerCost& cost) {
  auto scaled = [&](double k) { return ProfilerCost{cost.op_us * k, cost.python_us * k}; };
  auto replayed = [&](double k) { return profile_step(trace, step, scaled(k)).replayed_step_us; };
  // The replay shortens as more of the CPU's time is the profiler's, down to the GPU's own work; 64 times the
  // default costs (320 us an op) leaves the traces of tests/validation none of their CPU time.
  double lo = 0, hi = 64;
  if (replayed(lo) <= measured_us) return scaled(lo);
  const double floor = replayed(hi);
  if (floor >= measured_us) measured_us = floor * (1 + 1e-9);  // the least scale that reaches the GPU's own
  while (hi - lo > 1e-4 * std::max(1.0, lo)) {
    const double mid = (lo + hi) / 2;
    (replayed(mid) > measured_us ? lo : hi) = mid;
  }
  return scaled(hi);
}

StepLaunches step_launches(const StepProfile& step) {
  StepLaunches n;
  const auto blocks = static_cast<std::int32_t>(step.layers.size()) - 2;
  if (blocks < 0) return n;
  n.embedding = {step.layers.front().forward.launches, step.layers.front().backward.launches};
  n.head = {step.layers.back().forward.launches,
            step.layers.back().backward.launches + step.unattributed.launches};
  std::int64_t forward = 0, backward = 0;  // summed in 64 bits: an untrusted trace's counts may be large
  for (std::int32_t i = 1; i <= blocks; ++i) {
    forward += step.layers[static_cast<std::size_t>(i)].forward.launches;
    backward += step.layers[static_cast<std::size_t>(i)].backward.launches;
  }
  if (blocks > 0)
    n.block = {static_cast<std::int32_t>((forward + blocks / 2) / blocks),
               static_cast<std::int32_t>((backward + blocks / 2) / blocks)};
  return n;
}

}  // namespace pipesim::trace_import
