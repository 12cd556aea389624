#include <gtest/gtest.h>

#include "test_helpers.hpp"

#include <filesystem>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/model.hpp"

namespace pipesim::sim {
namespace {

const std::string kHf = std::string(PIPESIM_TEST_DATA_DIR) + "/hf/";

TEST(Model, EveryPresetLoads) {
  auto names = shipped_models();
  for (const char* want : {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "qwen3-1.7b",
                           "qwen3-8b", "qwen3-32b", "qwen3-235b-a22b", "gpt3-175b", "gpt-40b"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const auto& n : names) EXPECT_NO_THROW(load_model(n)) << n;
}

TEST(Model, EncodersAttendInBothDirections) {
  // A BERT config.json reads as a bidirectional GELU encoder and agrees with the bert-large preset.
  const ModelSpec hf = load_model(kHf + "bert-large-style.json");
  const ModelSpec preset = load_model("bert-large");
  EXPECT_FALSE(hf.causal);
  EXPECT_FALSE(preset.causal);
  EXPECT_EQ(hf.mlp, MlpKind::kGelu);
  EXPECT_EQ(hf.hidden, preset.hidden);
  EXPECT_EQ(hf.layers, preset.layers);
  EXPECT_EQ(hf.heads, preset.heads);
  EXPECT_EQ(hf.ffn_hidden, preset.ffn_hidden);
  EXPECT_EQ(hf.vocab, preset.vocab);
  EXPECT_TRUE(load_model("llama3-8b").causal);
  // A query attends to all s keys: 4·s·h attention FLOPs per token, twice a causal decoder's 2·s·h.
  const auto blk = model_layer_costs(preset, CostOptions{1, 512, 1, Recompute::kNone})[1];
  const double gemm = 2.0 * 512 * (4.0 * 1024 * 1024 + 2.0 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(blk.fwd_flops, gemm + 512.0 * 4 * 512 * 1024);
}

TEST(Model, PresetsAgreeWithGenuineHfConfigs) {
  for (auto [preset, file] :
       {std::pair<const char*, const char*>{"llama2-7b", "meta-llama__Llama-2-7b-hf.json"},
        {"llama2-70b", "meta-llama__Llama-2-70b-hf.json"},
        {"llama3-8b", "meta-llama__Llama-3.1-8B.json"},
        {"qwen3-1.7b", "Qwen__Qwen3-1.7B.json"},
        {"qwen3-32b", "Qwen__Qwen3-32B.json"},
        {"qwen3-235b-a22b", "Qwen__Qwen3-235B-A22B.json"}}) {
    ModelSpec a = load_model(preset), b = load_model(kHf + file);
    EXPECT_EQ(a.hidden, b.hidden) << preset;
    EXPECT_EQ(a.layers, b.layers) << preset;
    EXPECT_EQ(a.heads, b.heads) << preset;
    EXPECT_EQ(a.kv_heads, b.kv_heads) << preset;
    EXPECT_EQ(a.head_dim, b.head_dim) << preset;
    EXPECT_EQ(a.ffn_hidden, b.ffn_hidden) << preset;
    EXPECT_EQ(a.vocab, b.vocab) << preset;
    EXPECT_EQ(a.tie_embeddings, b.tie_embeddings) << preset;
    EXPECT_EQ(a.num_experts, b.num_experts) << preset;
    EXPECT_EQ(a.experts_per_token, b.experts_per_token) << preset;
    EXPECT_EQ(a.moe_ffn_hidden, b.moe_ffn_hidden) << preset;
    EXPECT_EQ(a.norm, b.norm) << preset;
    EXPECT_EQ(a.qk_norm, b.qk_norm) << preset;
    EXPECT_EQ(a.rope, b.rope) << preset;
  }
}

TEST(Model, ReadsEveryHfStyle) {
  ModelSpec gpt2 = load_model(kHf + "gpt2.json");
  EXPECT_EQ(gpt2.hidden, 768);
  EXPECT_EQ(gpt2.layers, 12);
  EXPECT_EQ(gpt2.ffn_hidden, 4 * 768);  // GPT-2 leaves n_inner null: 4h
  EXPECT_EQ(gpt2.mlp, MlpKind::kGelu);
  EXPECT_TRUE(gpt2.tie_embeddings);
  EXPECT_EQ(gpt2.norm, NormKind::kLayerNorm);  // what a framework's own kernels depend on
  EXPECT_FALSE(gpt2.rope);
  EXPECT_FALSE(gpt2.qk_norm);
  EXPECT_TRUE(load_model(kHf + "Qwen__Qwen3-8B.json").qk_norm);
  EXPECT_FALSE(load_model(kHf + "meta-llama__Llama-3.1-8B.json").qk_norm);
  ModelSpec neox = load_model(kHf + "EleutherAI__gpt-neox-20b.json");
  EXPECT_EQ(neox.mlp, MlpKind::kGelu);
  EXPECT_EQ(neox.ffn_hidden, 24576);
  ModelSpec mix = load_model(kHf + "mistralai__Mixtral-8x7B-v0.1.json");
  EXPECT_EQ(mix.num_experts, 8);
  EXPECT_EQ(mix.experts_per_token, 2);
  EXPECT_EQ(mix.moe_ffn_hidden, 14336);
  ModelSpec oss = load_model(kHf + "openai__gpt-oss-20b.json");
  EXPECT_EQ(oss.num_experts, 32);
  EXPECT_EQ(oss.experts_per_token, 4);
  ASSERT_EQ(oss.layer_is_sliding.size(), 24u);
  EXPECT_TRUE(oss.layer_is_sliding[0]);
  EXPECT_FALSE(oss.layer_is_sliding[1]);
  for (const auto& e : std::filesystem::directory_iterator(kHf))
    if (e.path().extension() == ".json") {
      EXPECT_NO_THROW(load_model(e.path().string())) << e.path();
    }
}

TEST(Model, LinearBiasesFollowTheArchitecture) {
  auto biases = [](const ModelSpec& m) {
    return std::string(m.qkv_bias ? "q" : "-") + (m.out_bias ? "o" : "-") + (m.mlp_bias ? "m" : "-");
  };
  // GPT-2, GPT-NeoX and BERT-style encoders carry a bias on every linear layer, as the GPT presets do.
  EXPECT_EQ(biases(load_model(kHf + "gpt2.json")), "qom");
  EXPECT_EQ(biases(load_model(kHf + "EleutherAI__gpt-neox-20b.json")), "qom");
  EXPECT_EQ(biases(load_model(kHf + "bert-large-style.json")), "qom");
  EXPECT_EQ(biases(load_model("gpt3-175b")), "qom");
  EXPECT_EQ(biases(load_model("bert-large")), "qom");
  // Llama and Qwen3 say attention_bias false (Llama 2 says nothing: none); gpt-oss says true and its experts
  // carry biases too, as its preset says.
  EXPECT_EQ(biases(load_model(kHf + "meta-llama__Llama-3.1-8B.json")), "---");
  EXPECT_EQ(biases(load_model(kHf + "meta-llama__Llama-2-7b-hf.json")), "---");
  EXPECT_EQ(biases(load_model(kHf + "Qwen__Qwen3-8B.json")), "---");
  EXPECT_EQ(biases(load_model(kHf + "openai__gpt-oss-20b.json")), "qom");
  EXPECT_EQ(biases(load_model("gpt-oss-20b")), "qom");
  EXPECT_EQ(biases(load_model("llama3-8b")), "---");
  // Qwen2 has q/k/v biases without a config key saying so; GPT-J has MLP biases only.
  EXPECT_EQ(biases(parse_model(R"({"model_type":"qwen2","hidden_size":64,"num_hidden_layers":2,)"
                               R"("num_attention_heads":4,"intermediate_size":128,"vocab_size":100})",
                               "q.json")),
            "q--");
  EXPECT_EQ(biases(parse_model(R"({"model_type":"gptj","n_embd":64,"n_layer":2,"n_head":4,"vocab_size":100})",
                               "j.json")),
            "--m");
}

TEST(Model, BadInputNamesFileAndPath) {
  auto msg = [](const std::string& text) { return testing::error_of([&] { parse_model(text, "m.json"); }); };
  const std::string base =
      R"("format":"pipesim-model","version":1,"name":"x","source":"s","hidden_size":64,"num_layers":2,)"
      R"("num_heads":4,"ffn_hidden_size":128,"vocab_size":100)";
  EXPECT_EQ(msg("{" + base + "}"), "no error");
  EXPECT_EQ(
      msg("{" + base + R"(,"hiden":3})"),
      "m.json: /hiden: unknown key; valid keys here: attention, experts_per_token, ffn_hidden_size, format, "
      "head_dim, hidden_size, layer_types, linear_biases, mlp, moe_ffn_hidden_size, name, norm, num_experts, "
      "num_heads, num_kv_heads, num_layers, positions, qk_norm, sliding_window, source, tie_embeddings, "
      "version, vocab_size");
  EXPECT_EQ(msg("{" + base + R"(,"norm":"batchnorm"})"),
            "m.json: /norm: unknown norm 'batchnorm'; valid: rmsnorm, layernorm");
  EXPECT_EQ(msg("{" + base + R"(,"positions":"alibi"})"),
            "m.json: /positions: unknown positions 'alibi'; valid: rope, learned");
  EXPECT_NE(msg(R"({"format":"pipesim-model","version":1})").find("m.json: /name: missing required key"),
            std::string::npos);
  EXPECT_NE(msg("{" + base + R"(,"num_kv_heads":3})").find("/num_key_value_heads"), std::string::npos);
  EXPECT_NE(msg(R"({"hidden_size": -4, "num_hidden_layers": 2})")
                .find("m.json: /hidden_size: value -4 out of range"),
            std::string::npos);
  EXPECT_NE(msg("{not json").find("m.json: malformed JSON"), std::string::npos);
  EXPECT_EQ(msg("{" + base + R"(,"linear_biases":["qkv","mlp","qkv"]})"),
            "m.json: /linear_biases/2: named twice");
  EXPECT_EQ(msg("{" + base + R"(,"linear_biases":["bias"]})"),
            "m.json: /linear_biases/0: expected \"qkv\", \"out\" or \"mlp\"");
  EXPECT_NE(msg("{" + base + R"(,"linear_biases":"all"})").find("m.json: /linear_biases: expected an array"),
            std::string::npos);
  // Layer indices are 16-bit in a plan's ops: models stop at 30,000 blocks, whichever file style names them.
  std::string deep = base;
  deep.replace(deep.find(R"("num_layers":2)"), 14, R"("num_layers":30001)");
  EXPECT_EQ(msg("{" + deep + "}"), "m.json: /num_layers: value 30001 out of range; valid: 1 .. 30000");
  EXPECT_EQ(msg(R"({"hidden_size": 64, "num_hidden_layers": 30001, "num_attention_heads": 4})"),
            "m.json: /num_hidden_layers: value 30001 out of range; valid: 1 .. 30000");
  EXPECT_THROW(load_model("no-such-model"), InputError);
  EXPECT_THROW(load_model("/no/such/file.json"), InputError);
}

}  // namespace
}  // namespace pipesim::sim
