// A framework's own pipeline split: how its code places the transformer blocks on the pipeline stages when
// the user gives no partition. Megatron-LM and Megatron-Core split the blocks evenly; nanotron balances a
// cost per block by cumulative thresholds and may leave its output layer on a stage of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/workload/model.hpp"

namespace pipesim::sim {

enum class PipelineSplit : std::uint8_t {
  kEven,        ///< blocks evenly over the stages (the first ones get the remainder)
  kBlockCosts,  ///< nanotron's build_model: cumulative block costs cut at equal shares of the total
};

/// "even" | "block-costs"; throws InputError listing the valid words.
PipelineSplit parse_pipeline_split(const std::string& word);
const char* to_string(PipelineSplit split);

/// Transformer blocks per stage as nanotron's build_model places them over `stages` stages: each block,
/// in model order, joins the current stage, and the stage closes once the blocks so far cost more than
/// (stage + 1) / stages of the model. A block costs 4 h^2 + 3 ffn h (attention projections and MLP), the
/// output layer vocab x h, the rest nothing (LlamaModel.get_block_compute_costs). When the output layer
/// closes a stage before the last, nanotron runs only the fp32 cast and the loss on the stages after it;
/// pipesim keeps the output layer with the loss on the last stage, and a stage the rule leaves without a
/// block before the last takes one block from the nearest earlier stage that has two.
std::vector<std::int32_t> block_cost_partition(const ModelSpec& model, std::int32_t stages);

}  // namespace pipesim::sim
