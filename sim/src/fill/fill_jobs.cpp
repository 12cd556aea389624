#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "core/data_dir.hpp"
#include "core/json_reader.hpp"
#include "pipesim/sim/fill/fill.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/model.hpp"

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

namespace {

constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50, kMaxUnits = std::int64_t{1} << 40;

/// One unit (one transformer block over one batch: forward for inference, forward and backward for
/// training) priced by the cost model on this GPU with flash attention; `block` gets the block's costs.
FillShape model_unit(const ModelSpec& m, std::int64_t batch, std::int64_t seq, bool training,
                     const HardwareProfile& hw, const std::string& dtype, LayerCost* block_out = nullptr) {
  CostOptions co{batch, seq, 1, Recompute::kNone};
  co.attention = AttentionKernel::kFlash;
  const LayerCost block = model_layer_costs(m, co)[1];
  Duration ns = hw.op_ns(block.fwd_flops, block.gemm_gflop, block.kernels, dtype, block.fwd_mem_bytes,
                         block.expert_fwd_flops, block.expert_gemm_gflop, block.expert_weight_bytes);
  double flops = block.fwd_flops;
  if (training) {
    ns += hw.op_ns(block.bwd_input_flops + block.bwd_weight_flops, block.gemm_gflop, 2 * block.kernels + block.input_grad_extra_kernels, dtype,
                   block.bwd_mem_bytes, block.expert_bwd_input_flops + block.expert_bwd_weight_flops,
                   block.expert_gemm_gflop, 2 * block.expert_weight_bytes);
    flops += block.bwd_input_flops + block.bwd_weight_flops;
  }
  if (block_out) *block_out = block;
  return {batch, std::max<Duration>(1, ns), flops,
          training ? block.stored_activation_bytes + block.output_bytes : 2 * block.output_bytes};
}

/// A fill job that runs a model: its unit at its batch, and at halved batches down to `min_batch` for
/// bubbles the full unit does not fit (PipeFill sizes fill work to the bubble).
FillJob model_job(JsonObject& o, const HardwareProfile& hw, const std::string& dtype) {
  FillJob job;
  const ModelSpec m = load_model(o.string("model"));
  const std::string mode = o.string_or("mode", "inference");
  if (mode != "inference" && mode != "training") o.fail("mode", "unknown mode; valid: inference, training");
  const bool training = mode == "training";
  const std::int64_t batch = o.integer_or("batch", 8, 1, 1 << 20);
  const std::int64_t seq = o.integer_or("seq", 512, 1, 1 << 20);
  const std::int64_t samples = o.integer("samples", 1, kMaxUnits);
  const std::int64_t min_batch = o.integer_or("min_batch", 1, 1, 1 << 20);
  if (min_batch > batch)
    o.fail("min_batch", fmt::format("{} is above the batch; valid: 1 .. {}", min_batch, batch));
  LayerCost block;
  const FillShape unit = model_unit(m, batch, seq, training, hw, dtype, &block);
  job.name = o.string_or("name", fmt::format("{}-{}", m.name, mode));
  job.unit_ns = unit.unit_ns;
  job.unit_flops = unit.unit_flops;
  job.unit_memory_bytes = unit.unit_memory_bytes;
  job.batch = batch;
  for (std::int64_t b = batch / 2; b >= min_batch; b /= 2)
    job.smaller.push_back(model_unit(m, b, seq, training, hw, dtype));
  const std::int64_t batches = (samples + batch - 1) / batch;
  if (batches > kMaxUnits / std::max<std::int64_t>(1, m.layers) / batch)
    o.fail("samples", "too many; valid: fewer samples");
  job.units = batches * m.layers;
  // A chunk brings one block's state: 16-bit weights for inference, weights with gradients and Adam state
  // (16 B per parameter) for training, which go back to host memory after it.
  job.state_bytes = block.params * (training ? 16 : 2);
  job.writes_back = training;
  return job;
}

FillJob measured_job(JsonObject& o) {
  FillJob job;
  job.name = o.string("name");
  job.unit_ns = duration_from_ms(o.number("unit_ms", 1e-6, 1e7));
  job.unit_flops = o.number_or("unit_gflop", 0, 0, 1e12) * 1e9;
  job.units = o.integer("units", 1, kMaxUnits);
  job.unit_memory_bytes = o.integer_or("unit_memory_bytes", 0, 0, kMaxBytes);
  job.state_bytes = o.integer_or("state_bytes", 0, 0, kMaxBytes);
  job.writes_back = o.boolean_or("writes_back", false);
  return job;
}

FillJob parse_job(const json& j, const std::string& file, const std::string& path, const HardwareProfile& hw,
                  const std::string& dtype) {
  JsonObject o(j, file, path);
  if (o.string_or("format", "pipesim-fill-job") != "pipesim-fill-job")
    o.fail("format", "expected \"pipesim-fill-job\"");
  if (o.integer_or("version", 1, 0, 1000) != 1) o.fail("version", "unsupported version; valid: 1");
  FillJob job = o.has("model") ? model_job(o, hw, dtype) : measured_job(o);
  job.arrival_s = o.number_or("arrival_s", 0, 0, 1e9);
  job.deadline_s = o.number_or("deadline_s", 0, 0, 1e9);
  o.accept("description");
  o.accept("source");
  o.finish();
  return job;
}

}  // namespace

std::vector<FillJob> load_fill_jobs(const std::string& spec, const HardwareProfile& hw,
                                    const std::string& dtype) {
  std::vector<FillJob> out;
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) throw InputError(Option{"fill_jobs"}, "", "an empty name; give NAME[,NAME] or a file");
    const std::string file = resolve_shipped(item, "fill_jobs", "fill job");
    const json root = detail::parse_json_text(detail::read_text_file(file), file);
    if (root.is_array()) {
      if (root.empty()) throw InputError(file, "", "an empty list; give at least one fill job");
      for (std::size_t i = 0; i < root.size(); ++i)
        out.push_back(parse_job(root[i], file, fmt::format("/{}", i), hw, dtype));
    } else {
      out.push_back(parse_job(root, file, "", hw, dtype));
    }
  }
  if (out.size() > 4096)
    throw InputError(Option{"fill_jobs"}, "", "more than 4096 fill jobs; valid: at most 4096");
  return out;
}

std::vector<std::string> shipped_fill_jobs() {
  return shipped_names("fill_jobs");
}

}  // namespace pipesim::sim
