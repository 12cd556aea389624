// What a framework's kernels move besides the GEMMs and the attention core, as a framework file states it:
// each entry an element-wise kernel (or a group of them) over one of a layer's tensors, the bytes it moves
// per element of that tensor (reads plus writes, at the dtypes the framework runs it in) and its launches;
// and the tensors a layer keeps for its backward. A framework that states a layer's forward, backward or
// saved tensors replaces the built-in Megatron-Core composition of that pass (cost_model.cpp), which assumes
// fused bf16 kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipesim/sim/workload/model.hpp"

namespace pipesim::sim {

/// The tensor an entry works over, per TP rank: the residual stream (tokens x hidden), the queries (tokens x
/// heads x head_dim), the keys or the values (tokens x kv_heads x head_dim), the MLP's inner activation
/// (tokens x ffn), the block's parameters, the logits (tokens x vocab), the embedding or output matrix (vocab
/// x hidden).
/// Element-wise kernels reaching under a twentieth of the streaming rate would be a typo.
inline constexpr double kMinElementwiseEfficiency = 0.05;

enum class KernelTensor { kResidual, kQuery, kKeyValue, kInner, kBlockParams, kLogits, kVocabParams };

/// Which models an entry applies to.
enum class ModelFeature {
  kAlways,
  kRmsNorm,
  kLayerNorm,
  kQkNorm,
  kNoQkNorm,
  kRope,
  kSwiGlu,
  kGelu,
  kTiedEmbeddings,
  kUntiedEmbeddings,
  kGroupedQuery,   ///< fewer key/value heads than query heads (grouped-query attention)
  kNoGroupedQuery  ///< a key/value head for every query head
};

struct KernelTraffic {
  std::string what;
  KernelTensor tensor = KernelTensor::kResidual;
  double bytes_per_element = 0;  ///< HBM bytes per element moved (or, in `saved`, kept)
  std::int32_t kernels = 0;      ///< launches
  ModelFeature when = ModelFeature::kAlways;
  std::string source;
};

/// A layer's launches a pass as a trace counted them (calibrate --from-trace --framework-out): they replace
/// the count of its forward entries and the backward's (twice the forward's otherwise). Launches that depend
/// on the layout the trace did not have (TP collectives, shard-first GEMMs, FP8 casts) still add to them.
struct LayerLaunches {
  std::int32_t forward = 0, backward = 0;
  std::string source;
};

/// A layer's passes; an empty list keeps the built-in composition of that pass.
struct LayerKernels {
  std::vector<KernelTraffic> forward, backward, saved;
  std::optional<LayerLaunches> launches;
};

struct KernelComposition {
  LayerKernels embedding, block, head;
  /// Bytes per element of the residual stream between layers: what a stage sends, what a checkpoint keeps.
  std::int64_t residual_bytes = 2;
  /// HBM bytes a GPU optimizer step moves per parameter (0: the dtype's, optimizer_step_bytes_per_param).
  std::int64_t optimizer_step_bytes_per_param = 0;
  /// HBM bytes the framework moves on the compute stream per parameter of a layer after each ZeRO-3 / FSDP
  /// all-gather of its weights, in one launch: FSDP2 gathers a layer into one buffer and copies it into
  /// each parameter (4: read and write 2). 0 where the parameters are views of the gathered buffer (FSDP1's
  /// flat parameter) or the copy runs on the all-gather's own stream (DeepSpeed's ZeRO-3, whose
  /// AllGatherCoalescedHandle.wait concatenates each parameter there), which pipesim does not price.
  std::int64_t gather_copy_bytes_per_param = 0;
  /// Bytes per trained parameter the framework keeps beside its weights, gradients and optimizer state on
  /// every rank whatever the ZeRO stage (nanotron's fp32 gradient accumulation buffer).
  std::int64_t grad_buffer_bytes_per_param = 0;
  /// Share of the GPU's streaming rate the framework's element-wise kernels reach (1: the profile's rate).
  double elementwise_efficiency = 1;
};

/// Elements of each tensor in one layer of one TP rank's microbatch.
struct TensorSizes {
  double residual = 0, query = 0, key_value = 0, inner = 0, block_params = 0, logits = 0, vocab_params = 0;
};

bool model_has(const ModelSpec& model, ModelFeature feature);
/// Bytes the entries that apply to `model` move (or keep).
double composition_bytes(const std::vector<KernelTraffic>& entries, const ModelSpec& model,
                         const TensorSizes& sizes);
/// Launches of the entries that apply to `model`.
std::int32_t composition_kernels(const std::vector<KernelTraffic>& entries, const ModelSpec& model);

/// Words of a framework file: "residual", "query", ...; "always", "rmsnorm", ... Throw InputError listing
/// the valid words.
KernelTensor parse_kernel_tensor(const std::string& word);
ModelFeature parse_model_feature(const std::string& word);
const char* to_string(KernelTensor tensor);
const char* to_string(ModelFeature feature);

}  // namespace pipesim::sim
