// Transformer model description: the architecture numbers the cost model needs.
// Read from pipesim presets (models/NAME.json, strict) or from HuggingFace config.json files directly
// (Llama, Qwen2/3, Mistral/Mixtral, GPT-2, GPT-NeoX, gpt-oss, Qwen3-MoE; BERT, RoBERTa and XLM-R encoders).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipesim::sim {

/// Transformer blocks (or a profiled workload's layers) a model may have: a plan keeps layer indices in 16
/// bits (OpTags), and the layers around the blocks (embedding, output layer) take indices of their own.
inline constexpr std::int64_t kMaxModelLayers = 30000;

enum class MlpKind { kSwiGlu, kGelu };
enum class NormKind { kRmsNorm, kLayerNorm };

struct ModelSpec {
  std::string name;
  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;  ///< hidden / heads unless the config says otherwise
  std::int64_t ffn_hidden = 0;
  std::int64_t vocab = 0;
  bool tie_embeddings = false;
  MlpKind mlp = MlpKind::kSwiGlu;
  std::int64_t num_experts = 0;  ///< 0 for dense models
  std::int64_t experts_per_token = 0;
  std::int64_t moe_ffn_hidden = 0;
  std::int64_t sliding_window = 0;     ///< 0: none
  std::vector<bool> layer_is_sliding;  ///< per block, empty when no layer uses the window
  /// Causal (decoder) attention: a query attends to the keys before it; false for encoders (BERT, RoBERTa,
  /// XLM-R), whose queries attend to the whole sequence.
  bool causal = true;
  /// Linear layers that carry a bias: the fused q/k/v projection, the attention output projection, the
  /// MLP's projections (GPT-2/3, BERT: all three; Llama: none; Qwen2: q/k/v only). They cost time only
  /// where the framework runs bias kernels of their own (CostOptions::bias_kernels).
  bool qkv_bias = false, out_bias = false, mlp_bias = false;
  /// RMSNorm (Llama, Qwen, Mistral) or LayerNorm (the GPT family, encoders); and whether queries and keys are
  /// normalized per head before attention (Qwen3, OLMo 2). They change what a framework's unfused kernels
  /// move (kernel_composition.hpp); the built-in fused composition prices both norms alike.
  NormKind norm = NormKind::kRmsNorm;
  bool qk_norm = false;
  /// Rotary position embeddings applied to queries and keys in every block (Llama, Qwen, Mistral, GPT-NeoX);
  /// false: positions learned and added once to the embedding (GPT-2, BERT).
  bool rope = true;

  bool is_moe() const { return num_experts > 0; }
};

/// Loads a preset by name (models/NAME.json) or a file: a pipesim preset or a HuggingFace config.json.
ModelSpec load_model(const std::string& name_or_path);
ModelSpec parse_model(const std::string& json_text, const std::string& file);
std::vector<std::string> shipped_models();

}  // namespace pipesim::sim
