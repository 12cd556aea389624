#include "job/framework_split.hpp"

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

PipelineSplit parse_pipeline_split(const std::string& word) {
  if (word == "even") return PipelineSplit::kEven;
  if (word == "block-costs") return PipelineSplit::kBlockCosts;
  throw InputError("", "", fmt::format("unknown value '{}'; valid: even, block-costs", word));
}

const char* to_string(PipelineSplit split) {
  return split == PipelineSplit::kEven ? "even" : "block-costs";
}

std::vector<std::int32_t> block_cost_partition(const ModelSpec& model, std::int32_t stages) {
  // nanotron sums integer costs (numpy cumsum) and compares them with float thresholds; doubles hold
  // these sums exactly up to 2^53.
  const double h = static_cast<double>(model.hidden);
  const double head_dim = static_cast<double>(model.hidden / model.heads);
  const double block =
      4 * static_cast<double>(model.heads) * head_dim * h + 3 * static_cast<double>(model.ffn_hidden) * h;
  const double output_layer = static_cast<double>(model.vocab) * h;
  const double total = static_cast<double>(model.layers) * block + output_layer;
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(stages), 0);
  std::int32_t stage = 0;
  double cumulative = 0;
  // The embedding costs nothing and never closes a stage; the blocks and the output layer may.
  auto place = [&](double cost, bool is_block) {
    cumulative += cost;
    if (is_block) ++blocks[static_cast<std::size_t>(stage)];
    const double threshold = total * (static_cast<double>(stage + 1) / static_cast<double>(stages));
    if (cumulative > threshold && stage + 1 < stages) ++stage;
  };
  for (std::int64_t i = 0; i < model.layers; ++i) place(block, true);
  place(output_layer, false);
  // pipesim keeps the output layer with the loss, on the last stage, and a stage needs a layer: a stage
  // the rule leaves without a block before the last takes one from the nearest earlier stage that has two.
  for (std::int32_t k = 1; k + 1 < stages; ++k) {
    if (blocks[static_cast<std::size_t>(k)] > 0) continue;
    for (std::int32_t from = k - 1; from >= 0; --from)
      if (blocks[static_cast<std::size_t>(from)] > 1) {
        --blocks[static_cast<std::size_t>(from)];
        ++blocks[static_cast<std::size_t>(k)];
        break;
      }
  }
  return blocks;
}

}  // namespace pipesim::sim
