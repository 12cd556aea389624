#include "pipesim/sim/report/saved_result.hpp"
#include "pipesim/sim/core/option.hpp"

#include <limits>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

namespace {

using detail::json;

/// The fields of a written result, read loosely: other keys are allowed (the files carry more than the
/// invariants need), and null stands for a number that was not finite.
class Fields {
 public:
  Fields(const json& j, std::string file, std::string path)
      : j_(j), file_(std::move(file)), path_(std::move(path)) {
    if (!j_.is_object()) throw InputError(file_, path_.empty() ? "/" : path_, "expected a JSON object");
  }
  bool has(const char* key) const { return j_.contains(key); }
  const json& get(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end()) fail(key, "missing");
    return *it;
  }
  double number(const char* key) const {
    const json& v = get(key);
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!v.is_number()) fail(key, "expected a number");
    return v.get<double>();
  }
  double number_or(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
  std::int64_t integer(const char* key) const {
    const json& v = get(key);
    if (!v.is_number_integer()) fail(key, "expected an integer");
    return v.get<std::int64_t>();
  }
  std::string string(const char* key) const {
    const json& v = get(key);
    if (!v.is_string()) fail(key, "expected a string");
    return v.get<std::string>();
  }
  bool boolean(const char* key) const {
    const json& v = get(key);
    if (!v.is_boolean()) fail(key, "expected true or false");
    return v.get<bool>();
  }
  Fields object(const char* key) const { return {get(key), file_, path_ + "/" + key}; }
  /// The array at `key`, each element as Fields.
  std::vector<Fields> array(const char* key) const {
    const json& v = get(key);
    if (!v.is_array()) fail(key, "expected an array");
    std::vector<Fields> out;
    for (std::size_t i = 0; i < v.size(); ++i)
      out.emplace_back(v[i], file_, fmt::format("{}/{}/{}", path_, key, i));
    return out;
  }
  [[noreturn]] void fail(const char* key, const std::string& message) const {
    throw InputError(file_, path_ + "/" + key, message);
  }

 private:
  const json& j_;
  std::string file_;
  std::string path_;
};

Metrics read_metrics(const Fields& f) {
  Metrics m;
  m.schedule = f.string("schedule");
  m.num_gpus = static_cast<std::int32_t>(f.integer("num_gpus"));
  m.iterations = static_cast<std::int32_t>(f.integer("iterations"));
  if (m.iterations < 1) f.fail("iterations", "expected at least 1");
  m.step_time_s = f.number("step_time_s");
  m.steady_state_step_time_s = f.number("steady_state_step_time_s");
  m.first_step_time_s = f.number("first_step_time_s");
  m.run_time_s = f.number("run_time_s");
  m.bubble_fraction = f.number("bubble_fraction");
  const Fields bubble = f.object("bubble_breakdown");
  m.bubble_warmup_fraction = bubble.number("warmup");
  m.bubble_intra_fraction = bubble.number("intra");
  m.bubble_drain_fraction = bubble.number("drain");
  const Fields t = f.object("time_breakdown");
  m.time = {t.number("kernels"),         t.number("tp_comm"), t.number("optimizer"),
            t.number("pipeline_bubble"), t.number("pp_comm"), t.number("dp_comm"),
            t.number("cp_comm"),         t.number("offload"), t.number("other")};
  m.tokens_per_s = f.number("tokens_per_s");
  m.tflops_per_gpu = f.number("tflops_per_gpu");
  m.mfu = f.number("mfu");
  m.hfu = f.number("hfu");
  m.peak_gpu_mem_bytes = f.integer("peak_gpu_mem_bytes");
  m.gpu_mem_capacity_bytes = f.integer("gpu_mem_capacity_bytes");
  m.peak_host_mem_bytes = f.integer("peak_host_mem_bytes");
  m.cpu_optimizer_busy_s = f.number("cpu_optimizer_busy_s");
  m.cpu_optimizer_exposed_s = f.number("cpu_optimizer_exposed_s");
  m.oom = f.boolean("oom");
  m.ops = f.integer("ops");
  for (const Fields& g : f.array("per_gpu"))
    m.gpus.push_back({g.string("device"), g.number("busy_s"), g.number("warmup_s"), g.number("intra_s"),
                      g.number("drain_s"), g.integer("peak_mem_bytes")});
  m.simulated_gpus = static_cast<std::int32_t>(m.gpus.size());
  return m;
}

FillClaims read_fill(const Fields& f, const Metrics& m) {
  FillClaims c;
  c.main_slowdown = f.number("main_slowdown");
  // Results written before the limit was recorded hold no promise to check against.
  c.max_slowdown = f.number_or("main_slowdown_limit", std::numeric_limits<double>::infinity());
  c.utilization_before = f.number("utilization_without_fill");
  c.utilization_after = f.number("utilization_with_fill");
  c.fill_gpu_equivalents = f.number("fill_gpu_equivalents");
  c.num_gpus = m.num_gpus;
  c.run_time_s = m.run_time_s;
  for (const Fields& j : f.array("jobs"))
    c.jobs.push_back(
        {j.string("name"), j.integer("units_done"), j.integer("units"), j.number("completed_s")});
  return c;
}

SavedResult read_result(const Fields& f, const std::string& path) {
  SavedResult r;
  r.path = path;
  r.metrics = read_metrics(f);
  r.global_batch = f.integer("global_batch");
  r.seq = static_cast<std::int32_t>(f.integer("seq"));
  r.gpu_capacity_bytes = f.integer("gpu_mem_capacity_bytes");
  if (f.has("fill")) r.fill = read_fill(f.object("fill"), r.metrics);
  return r;
}

}  // namespace

std::vector<SavedResult> load_saved_results(const std::string& path) {
  return parse_saved_results(detail::read_text_file(path), path);
}

std::vector<SavedResult> parse_saved_results(const std::string& text, const std::string& path) {
  const json root = detail::parse_json_text(text, path);
  std::vector<SavedResult> out;
  if (root.is_array()) {  // simulate --schedule all
    for (std::size_t i = 0; i < root.size(); ++i)
      out.push_back(read_result(Fields(root[i], path, fmt::format("/{}", i)), path));
    return out;
  }
  const Fields top(root, path, "");
  if (!top.has("format")) {
    out.push_back(read_result(top, path));
    return out;
  }
  if (top.string("format") != "pipesim-timeline")
    top.fail("format", ("expected \"pipesim-timeline\", or the JSON of simulate " +
                        spelled(Option{"format"}) + " json"));
  SavedResult r = read_result(top.object("metrics"), path);
  r.has_ops = true;
  r.measured = top.has("source") && top.string("source") != "simulated";
  const std::vector<Fields> ops = top.array("ops");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].integer("op") != static_cast<std::int64_t>(i))
      ops[i].fail("op", fmt::format("expected {}", i));
    r.start.push_back(ops[i].integer("start_ns"));
    r.end.push_back(ops[i].integer("end_ns"));
  }
  out.push_back(std::move(r));
  return out;
}

void check_saved_result(const SavedResult& r, const Plan* plan) {
  check_metrics(r.metrics, r.global_batch, r.seq, /*against_peak=*/!r.measured);
  if (r.fill) check_fill(*r.fill);
  if (!r.has_ops || plan == nullptr) return;
  if (r.start.size() != plan->ops.size())
    throw InputError(r.path, "/ops",
                     fmt::format("{} ops, but the plan has {}: not a timeline of this plan", r.start.size(),
                                 plan->ops.size()));
  Timeline tl;
  tl.start.assign(r.start.begin(), r.start.end());
  tl.end.assign(r.end.begin(), r.end.end());
  // Memory per GPU, by name from the result's per-GPU entries; other devices are not reported.
  tl.peak_bytes.assign(plan->devices.size(), 0);
  tl.capacity_bytes.assign(plan->devices.size(), 0);
  for (std::size_t d = 0; d < plan->devices.size(); ++d) {
    const Device& dev = plan->devices[d];
    if (dev.kind != DeviceKind::kGpu) continue;
    tl.capacity_bytes[d] = r.gpu_capacity_bytes;
    tl.peak_bytes[d] = dev.resident_bytes;  // a GPU without compute has no entry: nothing to compare
    for (const GpuMetrics& g : r.metrics.gpus)
      if (g.device == dev.name) tl.peak_bytes[d] = g.peak_mem_bytes;
  }
  check_timeline(*plan, tl, r.metrics);
}

}  // namespace pipesim::sim
