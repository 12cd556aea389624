// Execution traces: a hand-written one of the tiny step's loop, its activation memory counted by hand (what
// the forward keeps for the backward, the backward's own working memory, the gradients left for the
// optimizer), the workload it writes, and one clear line for each kind of malformed input.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/workload/profiled_workload.hpp"
#include "pipesim/trace_import/execution_trace.hpp"
#include "pipesim/trace_import/saved_activations.hpp"
#include "pipesim/trace_import/step_profile.hpp"
#include "pipesim/trace_import/workload_file.hpp"
#include "tiny_trace.hpp"

namespace pipesim::trace_import {
namespace {

using nlohmann::json;

/// Another step of the tiny trace's loop, as ExecutionTraceObserver writes it: its autograd sequence numbers
/// 100 past the Kineto trace's (10 embedding, 20 and 21 the blocks, 30 the head). Storages: 1 the tied
/// embedding matrix, 2 the token ids, 3 and 4 the blocks' weights (parameters); the rest made by the step.
json tiny_execution_trace() {
  json nodes = json::array();
  int id = 0;
  auto t = [](int storage, int elements, int size) {
    return json::array({900 + storage, storage, 0, elements, size, "cuda:0"});
  };
  auto op = [&](const std::string& name, int parent, int seq, int tid, json in, json out) {
    nodes.push_back({{"id", ++id},
                     {"name", name},
                     {"ctrl_deps", parent},
                     {"inputs", {{"values", in}, {"shapes", json::array()}, {"types", json::array()}}},
                     {"outputs", {{"values", out}, {"shapes", json::array()}, {"types", json::array()}}},
                     {"attrs", json::array({{{"name", "rf_id"}, {"type", "uint64"}, {"value", 7}},
                                            {{"name", "seq_id"}, {"type", "int64"}, {"value", seq}},
                                            {{"name", "tid"}, {"type", "uint64"}, {"value", tid}}})}});
    return id;
  };
  const int main = op("[pytorch|profiler|execution_trace|thread]", 0, -1, 1, json::array(), json::array());
  // Forward: the embedding's 256 B output (storage 10), each block's 1,024 B (11, 12) with the weight read
  // through a view and the product recorded again inside the linear, a 4,096 B scratch (13) freed and its
  // address taken by a 512 B result the backward reads, the logits (14) and their fp32 log-softmax (15).
  op("aten::embedding", main, 110, 1, {t(1, 16000, 4), t(2, 8, 8)}, {t(10, 128, 2)});
  const int lin0 = op("aten::linear", main, 120, 1, {t(10, 128, 2), t(3, 1088, 4)}, {t(11, 512, 2)});
  op("aten::t", lin0, -1, 1, {t(3, 1024, 4)}, {t(3, 1024, 4)});
  op("aten::addmm", lin0, -1, 1, {t(10, 128, 2), t(3, 1024, 4)}, {t(11, 512, 2)});
  op("aten::linear", main, 121, 1, {t(11, 512, 2), t(4, 1088, 4)}, {t(12, 512, 2)});
  op("aten::empty", main, -1, 1, json::array({json::array({8, 256}), 6}), {t(13, 1024, 4)});
  op("aten::mul", main, 121, 1, {t(12, 256, 2), 2.5}, {t(13, 256, 2)});
  op("aten::linear", main, 130, 1, {t(12, 512, 2), t(1, 16000, 4), "<None>"}, {t(14, 8000, 2)});
  op("aten::log_softmax", main, 130, 1, {t(14, 8000, 2), 1, "<None>"}, {t(15, 8000, 4)});
  op("aten::ones_like", main, -1, 1, {t(15, 1, 4)}, {t(16, 1, 4)});
  // Backward on thread 2: the loss's gradient (31, 32,000 B) lives until the output layer's products; each
  // product's input gradient (32, 34, 36) until the layer below has used it; the weight gradients (33, 35,
  // 37) stay for the optimizer, the embedding's added into the tied matrix's.
  const int bw = op("[pytorch|profiler|execution_trace|thread]", 0, -1, 2, json::array(), json::array());
  auto node = [&](const std::string& what, int seq) {
    const int e = op("autograd::engine::evaluate_function: " + what, bw, -1, 2, json::array(), json::array());
    return op(what, e, seq, 2, json::array(), json::array());
  };
  int n = node("LogSoftmaxBackward0", 130);
  op("aten::_log_softmax_backward_data", n, -1, 2, {t(16, 1, 4), t(15, 8000, 4)}, {t(31, 8000, 4)});
  n = node("MmBackward0", 130);
  op("aten::mm", n, -1, 2, {t(31, 8000, 4), t(1, 16000, 4)}, {t(32, 512, 2)});
  op("aten::mm", n, -1, 2, {t(31, 8000, 4), t(12, 512, 2)}, {t(33, 16000, 4)});
  n = node("AddmmBackward0", 121);
  op("aten::mm", n, -1, 2, {t(32, 512, 2), t(11, 512, 2), t(13, 256, 2)}, {t(34, 512, 2), t(35, 1024, 4)});
  n = node("AddmmBackward0", 120);
  op("aten::mm", n, -1, 2, {t(34, 512, 2), t(10, 128, 2)}, {t(36, 128, 2), t(37, 1024, 4)});
  n = node("EmbeddingBackward0", 110);
  op("aten::embedding_dense_backward", n, -1, 2, {t(36, 128, 2), t(2, 8, 8), t(33, 16000, 4)},
     {t(33, 16000, 4)});
  const int step = op("Optimizer.step#AdamW.step", main, -1, 1, json::array(), json::array());
  op("aten::_fused_adamw_", step, -1, 1, {t(1, 16000, 4), t(33, 16000, 4), t(35, 1024, 4), t(37, 1024, 4)},
     json::array());
  return {{"schema", "1.1.1-chakra.0.0.4"}, {"pid", 1}, {"nodes", nodes}};
}

ExecutionTrace parse_et(const std::string& text) {
  std::istringstream in(text);
  return parse_execution_trace(in, "et.json");
}

TEST(ExecutionTrace, ReadsOpsAndTheirTensors) {
  const ExecutionTrace et = parse_et(tiny_execution_trace().dump());
  ASSERT_EQ(et.ops.size(), 30u);
  const ExecutionOp& embedding = et.ops[1];
  EXPECT_EQ(embedding.sequence, 110);
  EXPECT_EQ(embedding.tid, 1);
  ASSERT_EQ(embedding.inputs, 2u);
  ASSERT_EQ(embedding.outputs, 1u);
  EXPECT_EQ(et.tensors[embedding.first_input].storage, 1);
  EXPECT_EQ(et.tensors[embedding.first_input].extent_bytes, 64000);
  EXPECT_EQ(et.tensors[embedding.first_output].extent_bytes, 256);
  // A shape list ([8, 256]) and scalars are no tensors.
  EXPECT_EQ(et.ops[6].inputs, 0u);
  EXPECT_TRUE(
      std::any_of(et.ops.begin(), et.ops.end(), [](const ExecutionOp& o) { return o.backward_node; }));
  EXPECT_TRUE(et.ops.back().optimizer == false && et.ops[et.ops.size() - 2].optimizer);
}

TEST(ExecutionTrace, ActivationMemoryOfTheTinyStepByHand) {
  StepProfile step = profile_step(testing::parse(testing::tiny_trace().dump()));
  add_saved_activations(parse_et(tiny_execution_trace().dump()), step);
  ASSERT_TRUE(step.has_saved_bytes);
  // Kept, given to the layer whose backward reads it first: the embedding's output to block 0 (256 B); block
  // 0's output and the 512 B result at the scratch's address to block 1 (1,024 + 512; not the scratch's
  // 4,096); block 1's output, the fp32 log-softmax and the 4 B gradient seed to the head (1,024 + 32,000 +
  // 4).
  EXPECT_EQ(step.layers[0].saved_bytes, 0);
  EXPECT_EQ(step.layers[1].saved_bytes, 256);
  EXPECT_EQ(step.layers[2].saved_bytes, 1536);
  EXPECT_EQ(step.layers[3].saved_bytes, 33028);
  // Working memory: the head holds the loss's 32,000 B gradient and, from its first product on, the 1,024 B
  // input gradient; block 1 that one and its own (2,048), block 0 1,024 + 256, the embedding 256.
  EXPECT_EQ(step.layers[3].backward_working_bytes, 33024);
  EXPECT_EQ(step.layers[2].backward_working_bytes, 2048);
  EXPECT_EQ(step.layers[1].backward_working_bytes, 1280);
  EXPECT_EQ(step.layers[0].backward_working_bytes, 256);
  // Left for the optimizer: the weight gradients 64,000 + 4,096 + 4,096.
  EXPECT_EQ(step.step_grad_bytes, 72192);
  // Passed on in the forward: the embedding's output to block 0, each block's to the next layer; the head's
  // logits and log-softmax stay with it (the scratch, made between block 1's ops, is block 1's own).
  EXPECT_EQ(step.layers[0].output_bytes, 256);
  EXPECT_EQ(step.layers[1].output_bytes, 1024);
  EXPECT_EQ(step.layers[2].output_bytes, 1024);
  EXPECT_EQ(step.layers[3].output_bytes, 0);

  // The workload: kept and working bytes per layer; gradients at 4 B a parameter (72,192 B over 18,176
  // parameters, rounded), beside the 16 B each parameter holds in all.
  WorkloadOptions o;
  o.name = "tiny";
  o.tied_embeddings = true;
  const sim::Workload w =
      sim::parse_workload(workload_json(step, o).dump(), "tiny.json", sim::Recompute::kNone);
  EXPECT_EQ(w.layers[1].stored_activation_bytes, 256);
  EXPECT_EQ(w.layers[3].stored_activation_bytes, 33028);
  EXPECT_EQ(w.layers[3].recompute_extra_bytes, 33024);
  EXPECT_EQ(w.layers[0].step_grad_bytes, 4 * 16000);
  EXPECT_EQ(w.layers[1].step_grad_bytes, 4 * 1088);
  EXPECT_EQ(w.layers[1].param_bytes, 16 * 1088);
  EXPECT_EQ(w.layers[1].output_bytes, 1024);
  // Two blocks written as five: their mean kept bytes, the larger working set.
  o.blocks = 5;
  const sim::Workload deeper =
      sim::parse_workload(workload_json(step, o).dump(), "deeper.json", sim::Recompute::kNone);
  EXPECT_EQ(deeper.layers[3].stored_activation_bytes, (256 + 1536) / 2);
  EXPECT_EQ(deeper.layers[3].recompute_extra_bytes, 2048);
}

std::string error_of(const std::string& text, bool attribute = false) {
  try {
    const ExecutionTrace et = parse_et(text);
    if (attribute) {
      StepProfile step = profile_step(testing::parse(testing::tiny_trace().dump()));
      add_saved_activations(et, step);
    }
  } catch (const sim::InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ExecutionTrace, SequenceNumbersAtTheEndsOfTheirRangeAreNoLayers) {
  // The forward numbered from 0 (10 below the Kineto trace's), a backward node and a forward op numbered
  // at int64's ends: no layer, no overflow; the node's kept bytes go to the head.
  json t = tiny_execution_trace();
  for (auto& n : t["nodes"])
    for (auto& a : n["attrs"])
      if (a["name"] == "seq_id" && a["value"].get<std::int64_t>() >= 100)
        a["value"] = a["value"].get<std::int64_t>() - 110;
  for (auto& n : t["nodes"]) {
    if (n["name"] == "AddmmBackward0") n["attrs"][1]["value"] = INT64_MAX;
    if (n["name"] == "aten::empty") n["attrs"][1]["value"] = INT64_MIN + 1;
  }
  StepProfile step = profile_step(testing::parse(testing::tiny_trace().dump()));
  add_saved_activations(parse_et(t.dump()), step);
  EXPECT_EQ(step.layers[1].saved_bytes + step.layers[2].saved_bytes, 0);
  EXPECT_EQ(step.layers[3].saved_bytes, 33028 + 256 + 1536);
}

TEST(ExecutionTrace, MalformedTracesGetOneLineEach) {
  const json good = tiny_execution_trace();
  auto with = [&](auto edit) {
    json t = good;
    edit(t);
    return t.dump();
  };
  const std::vector<std::tuple<std::string, std::string, bool>> cases = {
      {"", "malformed JSON", false},
      {"{\"nodes\": [", "malformed JSON", false},
      {"[1]", "/nodes: missing", false},
      {"{\"nodes\": 3}", "/nodes: missing", false},
      {"{\"nodes\": []}", "/nodes: no ops", false},
      {"{\"nodes\": [], \"nodes\": []}", "a second nodes array", false},
      {"{\"nodes\": [7]}", "/nodes/0: expected a node object", false},
      {"{\"nodes\": [{\"name\": \"x\"}]}", "/nodes/0/id: missing", false},
      {"{\"nodes\": [{\"id\": \"x\"}]}", "/nodes/0/id: expected an integer", false},
      {"{\"nodes\": [{\"id\": -4}]}", "/nodes/0/id: -4; valid", false},
      {"{\"nodes\": [{\"id\": 1.5}]}", "/nodes/0/id: expected an integer", false},
      {"{\"nodes\": [{\"id\": 1}, {\"id\": 1}]}", "two nodes of id 1", false},
      {with([](json& t) { t["nodes"][1]["inputs"]["values"][0][3] = -8; }),
       "/nodes/1/inputs/values: a tensor of offset 0 and -8 elements", false},
      {with([](json& t) { t["nodes"][1]["outputs"]["values"][0][4] = 3000; }),
       "/nodes/1/outputs/values: a tensor's element size 3000", false},
      {with([](json& t) { t["nodes"][1]["outputs"]["values"][0][1] = -2; }), "a tensor's storage id -2",
       false},
      {with([](json& t) { t["nodes"][1]["outputs"]["values"][0][3] = 1LL << 52; }), "a tensor beyond 1 PB",
       false},
      {with([](json& t) {
         t["nodes"][1]["inputs"]["values"] = json::array();
         t["nodes"][1]["ctrl_deps"] = true;
       }),
       "/nodes/1/ctrl_deps: expected an integer", false},
      {with([](json& t) {
         for (auto& n : t["nodes"])
           if (n["name"].get<std::string>().rfind("autograd::engine", 0) == 0) n["name"] = "other";
       }),
       "no autograd::engine::evaluate_function node", true},
      {with([](json& t) {
         for (auto& n : t["nodes"])
           for (auto& a : n["attrs"])
             if (a["name"] == "seq_id" && n["name"].get<std::string>().rfind("aten::", 0) == 0)
               a["value"] = -1;
       }),
       "no autograd op (seq_id) in the forward", true},
      {with([](json& t) { t["nodes"][3]["attrs"][1]["value"] = 122; }),
       "its forward runs 5 autograd ops, the Kineto trace's 4", true},
  };
  for (const auto& [text, expected, attribute] : cases) {
    const std::string err = error_of(text, attribute);
    EXPECT_NE(err.find(expected), std::string::npos) << text.substr(0, 80) << " -> " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_EQ(err.rfind("et.json", 0), 0u) << err;
  }
}

}  // namespace
}  // namespace pipesim::trace_import
