#include "pipesim/sim/workload/model.hpp"
#include "pipesim/sim/core/option.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/data_dir.hpp"
#include "core/json_reader.hpp"

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

namespace {

constexpr std::int64_t kMaxDim = 1 << 24;
constexpr double kMaxModelParams = 1e15;  // a thousand times today's largest models

void validate(const ModelSpec& m, const std::string& file) {
  if (m.hidden % m.heads != 0 && m.head_dim == 0)
    throw InputError(file, "/hidden_size", "hidden size must be divisible by the number of heads");
  if (m.heads % m.kv_heads != 0)
    throw InputError(file, "/num_key_value_heads", "heads must be a multiple of key/value heads");
  if (m.is_moe() && (m.experts_per_token < 1 || m.experts_per_token > m.num_experts))
    throw InputError(file, "/num_experts_per_tok", fmt::format("must be in 1 .. {}", m.num_experts));
  // Each dimension is in range on its own; their products size parameter counts and byte counts in int64,
  // so the shape as a whole is bounded too (computed in doubles, which cannot overflow here).
  const double h = static_cast<double>(m.hidden),
               q = static_cast<double>(m.heads) * static_cast<double>(m.head_dim);
  const double kv = static_cast<double>(m.kv_heads) * static_cast<double>(m.head_dim);
  const double f = static_cast<double>(m.is_moe() ? m.moe_ffn_hidden : m.ffn_hidden) *
                   static_cast<double>(std::max<std::int64_t>(1, m.num_experts));
  const double block = 2 * h * q + 2 * h * kv + 3 * h * f + h * static_cast<double>(m.num_experts);
  const double params = block * static_cast<double>(m.layers) + 2 * h * static_cast<double>(m.vocab);
  if (q > static_cast<double>(kMaxDim))
    throw InputError(file, "/num_heads",
                     fmt::format("heads x head_dim = {} is out of range; valid: 1 .. {}", q, kMaxDim));
  if (params > kMaxModelParams)
    throw InputError(file, "/num_layers",
                     fmt::format("the model would have about {:.3g} parameters; valid: up to {:.0e}", params,
                                 kMaxModelParams));
}

ModelSpec parse_preset(JsonObject& r) {
  ModelSpec m;
  if (r.integer("version", 0, 1000) != 1) r.fail("version", "unsupported version; valid: 1");
  m.name = r.string("name");
  r.string("source");
  m.hidden = r.integer("hidden_size", 1, kMaxDim);
  m.layers = r.integer("num_layers", 1, kMaxModelLayers);
  m.heads = r.integer("num_heads", 1, kMaxDim);
  m.kv_heads = r.integer_or("num_kv_heads", m.heads, 1, kMaxDim);
  m.head_dim = r.integer_or("head_dim", 0, 1, kMaxDim);
  m.ffn_hidden = r.integer("ffn_hidden_size", 1, kMaxDim);
  m.vocab = r.integer("vocab_size", 1, kMaxDim * 8);
  m.tie_embeddings = r.boolean_or("tie_embeddings", false);
  std::string mlp = r.string_or("mlp", "swiglu");
  if (mlp == "swiglu")
    m.mlp = MlpKind::kSwiGlu;
  else if (mlp == "gelu")
    m.mlp = MlpKind::kGelu;
  else
    r.fail("mlp", fmt::format("unknown MLP '{}'; valid: swiglu, gelu", mlp));
  const std::string norm = r.string_or("norm", m.mlp == MlpKind::kGelu ? "layernorm" : "rmsnorm");
  if (norm != "rmsnorm" && norm != "layernorm")
    r.fail("norm", fmt::format("unknown norm '{}'; valid: rmsnorm, layernorm", norm));
  m.norm = norm == "layernorm" ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  m.qk_norm = r.boolean_or("qk_norm", false);
  const std::string positions = r.string_or("positions", m.mlp == MlpKind::kGelu ? "learned" : "rope");
  if (positions != "rope" && positions != "learned")
    r.fail("positions", fmt::format("unknown positions '{}'; valid: rope, learned", positions));
  m.rope = positions == "rope";
  m.num_experts = r.integer_or("num_experts", 0, 0, 1 << 16);
  m.experts_per_token = r.integer_or("experts_per_token", 0, 0, 1 << 16);
  m.moe_ffn_hidden = r.integer_or("moe_ffn_hidden_size", m.num_experts > 0 ? m.ffn_hidden : 0, 0, kMaxDim);
  m.sliding_window = r.integer_or("sliding_window", 0, 0, kMaxDim);
  const std::string attention = r.string_or("attention", "causal");
  if (attention != "causal" && attention != "bidirectional")
    r.fail("attention",
           fmt::format("unknown attention '{}'; valid: causal, bidirectional (encoders)", attention));
  m.causal = attention == "causal";
  if (const json* biases = r.raw_optional("linear_biases")) {
    // The linear layers with a bias, by name: any of "qkv", "out", "mlp".
    if (!biases->is_array()) r.fail("linear_biases", "expected an array of \"qkv\", \"out\", \"mlp\"");
    for (std::size_t i = 0; i < biases->size(); ++i) {
      const std::string b = (*biases)[i].is_string() ? (*biases)[i].get<std::string>() : std::string();
      bool* flag = b == "qkv" ? &m.qkv_bias : b == "out" ? &m.out_bias : b == "mlp" ? &m.mlp_bias : nullptr;
      if (flag == nullptr || *flag)
        throw InputError(r.file(), fmt::format("/linear_biases/{}", i),
                         flag == nullptr ? "expected \"qkv\", \"out\" or \"mlp\"" : "named twice");
      *flag = true;
    }
  }
  if (const json* types = r.raw_optional("layer_types")) {
    // As in HuggingFace configs: one "sliding_attention" or "full_attention" per layer.
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != m.layers)
      r.fail("layer_types", fmt::format("expected an array of {} entries (one per layer)", m.layers));
    for (std::size_t i = 0; i < types->size(); ++i) {
      const std::string t = (*types)[i].is_string() ? (*types)[i].get<std::string>() : std::string();
      if (t != "sliding_attention" && t != "full_attention")
        throw InputError(r.file(), fmt::format("/layer_types/{}", i),
                         "expected \"sliding_attention\" or \"full_attention\"");
      m.layer_is_sliding.push_back(t == "sliding_attention");
    }
  } else if (m.sliding_window > 0) {
    m.layer_is_sliding.assign(static_cast<std::size_t>(m.layers), true);
  }
  if (m.sliding_window == 0) m.layer_is_sliding.clear();
  r.finish();
  return m;
}

std::int64_t hf_int(const json& j, const std::string& file, std::initializer_list<const char*> keys,
                    std::int64_t lo, std::int64_t hi, std::int64_t fallback = -1) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null())
      return detail::checked_integer(*it, file, std::string("/") + k, lo, hi);
  }
  if (fallback >= 0) return fallback;
  throw InputError(file, std::string("/") + *keys.begin(), "missing required key of a HuggingFace config");
}

// A string or boolean key of a HuggingFace config: its value, `fallback` when absent or null, an error naming
// the key when it has another type.
std::string hf_string(const json& j, const std::string& file, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) throw InputError(file, std::string("/") + key, "expected a string");
  return it->get<std::string>();
}

bool hf_bool(const json& j, const std::string& file, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw InputError(file, std::string("/") + key, "expected true or false");
  return it->get<bool>();
}

// HuggingFace configs carry dozens of keys pipesim has no use for (token ids, dropout, rope); they are
// accepted as HF writes them, while the architecture keys are required and range-checked.
ModelSpec parse_hf(const json& j, const std::string& file) {
  ModelSpec m;
  const std::string type = hf_string(j, file, "model_type", "");
  m.name = std::filesystem::path(file).stem().string();
  m.hidden = hf_int(j, file, {"hidden_size", "n_embd", "d_model"}, 1, kMaxDim);
  m.layers = hf_int(j, file, {"num_hidden_layers", "n_layer", "num_layers"}, 1, kMaxModelLayers);
  m.heads = hf_int(j, file, {"num_attention_heads", "n_head"}, 1, kMaxDim);
  m.kv_heads = hf_int(j, file, {"num_key_value_heads", "multi_query_group_num"}, 1, kMaxDim, m.heads);
  m.head_dim = hf_int(j, file, {"head_dim"}, 1, kMaxDim, 0);
  m.vocab = hf_int(j, file, {"vocab_size", "padded_vocab_size"}, 1, kMaxDim * 8);
  // Encoders attend in both directions; they, like the GPT family, use a GELU MLP.
  const bool encoder = type == "bert" || type == "roberta" || type == "xlm-roberta" || type == "camembert" ||
                       type == "electra";
  m.causal = !encoder;
  bool gpt_style = encoder || type == "gpt2" || type == "gpt_neox" || type == "gptj" || type == "gpt_bigcode";
  m.mlp = gpt_style ? MlpKind::kGelu : MlpKind::kSwiGlu;
  m.norm = gpt_style ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  m.qk_norm = type == "qwen3" || type == "qwen3_moe" || type == "olmo2";  // per-head q_norm and k_norm
  m.rope = !(encoder || type == "gpt2" || type == "gpt_bigcode");         // those learn absolute positions
  m.ffn_hidden = hf_int(j, file, {"intermediate_size", "n_inner", "ffn_hidden_size"}, 1, kMaxDim,
                        gpt_style ? 4 * m.hidden : -1);
  m.tie_embeddings = hf_bool(j, file, "tie_word_embeddings", type == "gpt2" || encoder);
  // Biases: GPT-2, GPT-NeoX, StarCoder, gpt-oss (attention and experts) and the encoders have them on every
  // linear layer, GPT-J on its MLP only, Qwen2 on q/k/v only; Llama-style configs say so with attention_bias
  // (q, k, v and output) and mlp_bias.
  const bool all_biases = (gpt_style && type != "gptj") || type == "gpt_oss";
  const bool qwen2 = type == "qwen2" || type == "qwen2_moe";
  const bool attention_bias = hf_bool(j, file, "attention_bias", all_biases);
  m.qkv_bias = attention_bias || qwen2;
  m.out_bias = attention_bias;
  m.mlp_bias = hf_bool(j, file, "mlp_bias", all_biases || type == "gptj");
  m.num_experts = hf_int(j, file, {"num_experts", "num_local_experts", "n_routed_experts"}, 0, 1 << 16, 0);
  if (m.num_experts > 0) {
    m.experts_per_token = hf_int(j, file, {"num_experts_per_tok", "experts_per_token"}, 1, m.num_experts);
    m.moe_ffn_hidden = hf_int(j, file, {"moe_intermediate_size"}, 1, kMaxDim, m.ffn_hidden);
  }
  if (auto it = j.find("sliding_window");
      it != j.end() && !it->is_null() && hf_bool(j, file, "use_sliding_window", true)) {
    m.sliding_window = detail::checked_integer(*it, file, "/sliding_window", 0, kMaxDim);
  }
  if (auto it = j.find("layer_types"); it != j.end() && it->is_array() && m.sliding_window > 0) {
    if (static_cast<std::int64_t>(it->size()) != m.layers)
      throw InputError(file, "/layer_types", fmt::format("expected {} entries (one per layer)", m.layers));
    for (const auto& t : *it)
      m.layer_is_sliding.push_back(t.is_string() && t.get<std::string>() == "sliding_attention");
  } else if (m.sliding_window > 0 && type != "gpt_oss") {
    m.layer_is_sliding.assign(static_cast<std::size_t>(m.layers), true);
  }
  if (m.layer_is_sliding.empty()) m.sliding_window = 0;
  return m;
}

}  // namespace

ModelSpec parse_model(const std::string& text, const std::string& file) {
  json root = detail::parse_json_text(text, file);
  if (!root.is_object()) throw InputError(file, "/", "expected a JSON object");
  ModelSpec m;
  if (root.contains("format")) {
    JsonObject r(root, file, "");
    if (r.string("format") != "pipesim-model")
      r.fail("format", "expected \"pipesim-model\" (or a HuggingFace config.json without a format key)");
    m = parse_preset(r);
  } else if (root.contains("workload") || root.contains("layers")) {
    throw InputError(file, "/layers",
                     ("this is a profiled workload; pass it with " + spelled(Option{"workload"}) + ", not " +
                      spelled(Option{"model"})));
  } else {
    m = parse_hf(root, file);
  }
  if (m.head_dim == 0) m.head_dim = m.hidden / m.heads;
  validate(m, file);
  return m;
}

ModelSpec load_model(const std::string& name_or_path) {
  const std::string path = resolve_shipped(name_or_path, "models", "model preset");
  return parse_model(detail::read_text_file(path), path);
}

std::vector<std::string> shipped_models() {
  return shipped_names("models");
}

}  // namespace pipesim::sim
