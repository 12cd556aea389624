#include "pipesim/sim/workload/kernel_composition.hpp"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

namespace {

constexpr std::array<std::pair<const char*, KernelTensor>, 7> kTensors{{
    {"residual", KernelTensor::kResidual},
    {"query", KernelTensor::kQuery},
    {"key_value", KernelTensor::kKeyValue},
    {"inner", KernelTensor::kInner},
    {"block_params", KernelTensor::kBlockParams},
    {"logits", KernelTensor::kLogits},
    {"vocab_params", KernelTensor::kVocabParams},
}};

constexpr std::array<std::pair<const char*, ModelFeature>, 12> kFeatures{{
    {"always", ModelFeature::kAlways},
    {"rmsnorm", ModelFeature::kRmsNorm},
    {"layernorm", ModelFeature::kLayerNorm},
    {"qk_norm", ModelFeature::kQkNorm},
    {"no_qk_norm", ModelFeature::kNoQkNorm},
    {"rope", ModelFeature::kRope},
    {"swiglu", ModelFeature::kSwiGlu},
    {"gelu", ModelFeature::kGelu},
    {"tied_embeddings", ModelFeature::kTiedEmbeddings},
    {"untied_embeddings", ModelFeature::kUntiedEmbeddings},
    {"grouped_query", ModelFeature::kGroupedQuery},
    {"no_grouped_query", ModelFeature::kNoGroupedQuery},
}};

template <class Table>
auto parse_word(const Table& table, const std::string& word, const char* what) {
  std::vector<std::string> valid;
  for (const auto& [name, value] : table) {
    if (word == name) return value;
    valid.emplace_back(name);
  }
  throw InputError("", "", fmt::format("unknown {} '{}'; valid: {}", what, word, fmt::join(valid, ", ")));
}

double elements(const TensorSizes& s, KernelTensor t) {
  switch (t) {
    case KernelTensor::kResidual:
      return s.residual;
    case KernelTensor::kQuery:
      return s.query;
    case KernelTensor::kKeyValue:
      return s.key_value;
    case KernelTensor::kInner:
      return s.inner;
    case KernelTensor::kBlockParams:
      return s.block_params;
    case KernelTensor::kLogits:
      return s.logits;
    case KernelTensor::kVocabParams:
      return s.vocab_params;
  }
  return 0;
}

}  // namespace

bool model_has(const ModelSpec& m, ModelFeature f) {
  switch (f) {
    case ModelFeature::kAlways:
      return true;
    case ModelFeature::kRmsNorm:
      return m.norm == NormKind::kRmsNorm;
    case ModelFeature::kLayerNorm:
      return m.norm == NormKind::kLayerNorm;
    case ModelFeature::kQkNorm:
      return m.qk_norm;
    case ModelFeature::kNoQkNorm:
      return !m.qk_norm;
    case ModelFeature::kRope:
      return m.rope;
    case ModelFeature::kSwiGlu:
      return m.mlp == MlpKind::kSwiGlu;
    case ModelFeature::kGelu:
      return m.mlp == MlpKind::kGelu;
    case ModelFeature::kTiedEmbeddings:
      return m.tie_embeddings;
    case ModelFeature::kUntiedEmbeddings:
      return !m.tie_embeddings;
    case ModelFeature::kGroupedQuery:
      return m.kv_heads > 0 && m.kv_heads < m.heads;
    case ModelFeature::kNoGroupedQuery:
      return !(m.kv_heads > 0 && m.kv_heads < m.heads);
  }
  return false;
}

double composition_bytes(const std::vector<KernelTraffic>& entries, const ModelSpec& model,
                         const TensorSizes& sizes) {
  double bytes = 0;
  for (const KernelTraffic& e : entries)
    if (model_has(model, e.when)) bytes += e.bytes_per_element * elements(sizes, e.tensor);
  return bytes;
}

std::int32_t composition_kernels(const std::vector<KernelTraffic>& entries, const ModelSpec& model) {
  std::int32_t kernels = 0;
  for (const KernelTraffic& e : entries)
    if (model_has(model, e.when)) kernels += e.kernels;
  return kernels;
}

template <class Table, class Value>
const char* word_of(const Table& table, Value v) {
  for (const auto& [name, value] : table)
    if (value == v) return name;
  return "?";
}

const char* to_string(KernelTensor tensor) {
  return word_of(kTensors, tensor);
}

const char* to_string(ModelFeature feature) {
  return word_of(kFeatures, feature);
}

KernelTensor parse_kernel_tensor(const std::string& word) {
  return parse_word(kTensors, word, "tensor");
}

ModelFeature parse_model_feature(const std::string& word) {
  return parse_word(kFeatures, word, "model feature");
}

}  // namespace pipesim::sim
