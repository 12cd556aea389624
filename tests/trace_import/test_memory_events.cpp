// Memory events (torch.profiler's profile_memory=True): the tiny step's allocations and frees, written as
// Kineto writes them, counted by hand into what each layer keeps for the backward, the backward's working
// memory, the gradients it leaves, the step's peak; an execution trace's figures taking their place; and one
// clear line for each malformed memory event.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/workload/profiled_workload.hpp"
#include "pipesim/trace_import/step_profile.hpp"
#include "pipesim/trace_import/workload_file.hpp"
#include "tiny_trace.hpp"

namespace pipesim::trace_import {
namespace {

using nlohmann::json;

/// A "[memory]" instant as PyTorch's profiler writes it (profiler_kineto.cpp, AddGenericMetadata for an
/// Allocation): the device's type (1 CUDA, 0 the host) and index, the block's address, the bytes allocated
/// (negative: freed) and the device's totals after it.
json memory_event(double ts, int tid, std::int64_t addr, std::int64_t bytes, std::int64_t total,
                  int device_type = 1) {
  return {{"ph", "i"},
          {"cat", "cpu_instant_event"},
          {"s", "t"},
          {"name", "[memory]"},
          {"pid", 1},
          {"tid", tid},
          {"ts", ts},
          {"args",
           {{"Total Reserved", std::int64_t{1} << 30},
            {"Total Allocated", total},
            {"Bytes", bytes},
            {"Device Id", 0},
            {"Device Type", device_type},
            {"Addr", addr}}}};
}

/// The tiny step (tiny_trace.hpp: embedding 1–5 us, blocks 10–35 and 40–65, head 80–85 on thread 1; the
/// backward on thread 2: head 200–210, block 1 220–230, block 0 240–250, embedding 270–280; the optimizer
/// 300–320) with its GPU's allocations, 200,000 B held before it.
json tiny_trace_with_memory() {
  struct Change {
    double ts;
    int tid;
    std::int64_t addr, bytes;
  };
  const std::vector<Change> changes = {{2.5, 1, 0x10, 256},   // the embedding's output
                                       {12, 1, 0x11, 1024},   // block 0's output
                                       {13, 1, 0x13, 4096},   // block 0's scratch, freed at once
                                       {14, 1, 0x13, -4096},  //
                                       {42, 1, 0x12, 1024},   // block 1's output
                                       {43, 1, 0x13, 512},  // a result of block 1's at the scratch's address
                                       {82, 1, 0x14, 32000},    // the bf16 logits, freed before the backward
                                       {84, 1, 0x15, 32000},    // their fp32 log-softmax
                                       {86, 1, 0x16, 4},        // the loss, held past the step
                                       {90, 1, 0x14, -32000},   //
                                       {201, 2, 0x20, 32000},   // the logits' gradient
                                       {202, 2, 0x21, 64000},   // the tied matrix's gradient
                                       {203, 2, 0x22, 1024},    // block 1's output's gradient
                                       {204, 2, 0x20, -32000},  //
                                       {205, 2, 0x12, -1024},   //
                                       {206, 2, 0x15, -32000},  //
                                       {221, 2, 0x23, 4096},    // block 1's weight gradient
                                       {222, 2, 0x24, 1024},    // block 0's output's gradient
                                       {225, 2, 0x11, -1024},   //
                                       {225, 2, 0x13, -512},    //
                                       {231, 2, 0x22, -1024},   // between two evaluations
                                       {241, 2, 0x25, 4096},    // block 0's weight gradient
                                       {242, 2, 0x26, 256},     // the embedding's output's gradient
                                       {245, 2, 0x10, -256},    //
                                       {251, 2, 0x24, -1024},   //
                                       {275, 2, 0x26, -256},    //
                                       {305, 1, 0x30, 8192},    // the optimizer's scratch
                                       {310, 1, 0x30, -8192},   //
                                       {330, 1, 0x21, -64000},  // zero_grad(set_to_none=True)
                                       {330, 1, 0x23, -4096},   //
                                       {330, 1, 0x25, -4096}};  //
  json trace = testing::tiny_trace();
  std::vector<json> events;
  std::int64_t total = 200000;
  for (const Change& c : changes) {
    total += c.bytes;
    events.push_back(memory_event(c.ts, c.tid, c.addr, c.bytes, total));
  }
  // Kineto writes them after the other events, not in time order.
  for (auto it = events.rbegin(); it != events.rend(); ++it) trace["traceEvents"].push_back(*it);
  // The host's memory is not the GPU's.
  trace["traceEvents"].push_back(memory_event(50, 1, 0x99, 1000000, 1000000, 0));
  return trace;
}

TEST(MemoryEvents, ActivationMemoryOfTheTinyStepByHand) {
  const StepProfile step = profile_step(testing::parse(tiny_trace_with_memory().dump()));
  ASSERT_TRUE(step.has_saved_bytes);
  EXPECT_EQ(step.memory_source, "memory events");
  EXPECT_EQ(step.memory_events, 31);
  EXPECT_EQ(step.allocated_at_start_bytes, 200000);
  // The most at once: at 203 us, 200,000 + 256 + 1,024 + 1,024 + 512 + 32,000 (log-softmax) + 4 + 32,000 +
  // 64,000 + 1,024.
  EXPECT_EQ(step.peak_allocated_bytes, 331844);
  EXPECT_EQ(step.peak_reserved_bytes, std::int64_t{1} << 30);
  // Kept: what each layer's forward made and still held at the backward's start (200 us), given to that
  // layer: the embedding's output; block 0's; block 1's and its 512 B result (not the scratch, freed); the
  // log-softmax and the loss (not the logits, freed at 90 us).
  EXPECT_EQ(step.layers[0].saved_bytes, 256);
  EXPECT_EQ(step.layers[1].saved_bytes, 1024);
  EXPECT_EQ(step.layers[2].saved_bytes, 1536);
  EXPECT_EQ(step.layers[3].saved_bytes, 32004);
  // Working: made and freed by the backward, the most held at each layer's own events: the head 32,000 +
  // 1,024; block 1 that 1,024 and its own; block 0 1,024 + 256; the embedding the 256 it frees.
  EXPECT_EQ(step.layers[3].backward_working_bytes, 33024);
  EXPECT_EQ(step.layers[2].backward_working_bytes, 2048);
  EXPECT_EQ(step.layers[1].backward_working_bytes, 1280);
  EXPECT_EQ(step.layers[0].backward_working_bytes, 256);
  // Made by the backward and held past its end (280 us): the weights' gradients, 64,000 + 4,096 + 4,096.
  EXPECT_EQ(step.step_grad_bytes, 72192);
  // What a layer passes on takes an execution trace: the events do not say who reads a block.
  for (const LayerProfile& l : step.layers) EXPECT_EQ(l.output_bytes, 0);

  // The workload: kept and working bytes per layer, gradients at 4 B a parameter (72,192 B over 18,176).
  WorkloadOptions o;
  o.name = "tiny";
  o.tied_embeddings = true;
  const sim::Workload w =
      sim::parse_workload(workload_json(step, o).dump(), "tiny.json", sim::Recompute::kNone);
  EXPECT_EQ(w.layers[0].stored_activation_bytes, 256);
  EXPECT_EQ(w.layers[2].stored_activation_bytes, 1536);
  EXPECT_EQ(w.layers[3].recompute_extra_bytes, 33024);
  EXPECT_EQ(w.layers[1].step_grad_bytes, 4 * 1088);
  const json report = step_report(step);
  EXPECT_EQ(report["memory_source"], "memory events");
  EXPECT_EQ(report["peak_allocated_bytes"], 331844);
  EXPECT_EQ(report["layers"][3]["saved_bytes"], 32004);
}

TEST(MemoryEvents, AStepWithoutABackwardKeepsNothingForOne) {
  json trace = tiny_trace_with_memory();
  json kept = json::array();
  for (const json& e : trace["traceEvents"])
    if (e["name"].get<std::string>().find("evaluate_function") == std::string::npos) kept.push_back(e);
  trace["traceEvents"] = kept;
  const StepProfile step = profile_step(testing::parse(trace.dump()));
  EXPECT_FALSE(step.has_saved_bytes);
  EXPECT_EQ(step.peak_allocated_bytes, 331844);
  EXPECT_EQ(step.layers[3].saved_bytes, 0);
}

TEST(MemoryEvents, ATraceWithoutThemHasNoMemoryFigures) {
  const StepProfile step = profile_step(testing::parse(testing::tiny_trace().dump()));
  EXPECT_FALSE(step.has_saved_bytes);
  EXPECT_EQ(step.memory_events, 0);
  EXPECT_EQ(step.peak_allocated_bytes, 0);
}

TEST(MemoryEvents, ExtremeFiguresDoNotOverflow) {
  // The first event a free of int64's most negative size, an allocation of its largest: held at their ends.
  json trace = tiny_trace_with_memory();
  trace["traceEvents"].push_back(memory_event(0.5, 1, 0x70, INT64_MIN, 0));
  trace["traceEvents"].push_back(memory_event(2.6, 1, 0x71, INT64_MAX, INT64_MAX));
  const StepProfile step = profile_step(testing::parse(trace.dump()));
  EXPECT_EQ(step.allocated_at_start_bytes, 0);
  EXPECT_EQ(step.peak_allocated_bytes, INT64_MAX);
  EXPECT_EQ(step.layers[0].saved_bytes, INT64_MAX);  // 256 + INT64_MAX, held at the end
}

std::string error_of(const std::string& text) {
  try {
    profile_step(testing::parse(text));
  } catch (const sim::InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(MemoryEvents, MalformedMemoryEventsGetOneLineEach) {
  const json good = tiny_trace_with_memory();
  const std::size_t first = testing::tiny_trace()["traceEvents"].size();  // the first memory event
  auto with = [&](auto edit) {
    json t = good;
    edit(t["traceEvents"][first]);
    return t.dump();
  };
  const std::string at = "/traceEvents/" + std::to_string(first);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with([](json& e) { e.erase("ts"); }), at + "/ts: missing"},
      {with([](json& e) { e["args"].erase("Bytes"); }), at + "/args/Bytes: missing or not a whole number"},
      {with([](json& e) { e["args"]["Bytes"] = 1.5; }), at + "/args/Bytes: missing or not a whole number"},
      {with([](json& e) { e["args"]["Bytes"] = "many"; }), at + "/args/Bytes: missing or not a whole number"},
      {with([](json& e) { e["args"]["Addr"] = 1.5; }), at + "/args/Addr: not a whole number"},
      {with([](json& e) { e["args"]["Total Allocated"] = -5; }),
       at + "/args/Total Allocated: not a whole number"},
      {with([](json& e) { e["args"]["Total Allocated"] = 1e30; }), at + "/args/Total Allocated: not a whole"},
      {with([](json& e) { e["args"]["Total Reserved"] = -1; }),
       at + "/args/Total Reserved: not a whole number"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string err = error_of(text);
    EXPECT_NE(err.find(expected), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
  // Older profilers wrote only the device and the bytes: such events are not read.
  json older = good;
  for (json& e : older["traceEvents"])
    if (e["name"] == "[memory]") {
      e["args"].erase("Addr");
      e["args"].erase("Total Allocated");
    }
  const StepProfile without = profile_step(testing::parse(older.dump()));
  EXPECT_EQ(without.memory_events, 0);
  EXPECT_FALSE(without.has_saved_bytes);
  // The memory of a device other than the first one named, or the host's, is not read.
  for (const auto& [type, id] : {std::pair{1, 3}, std::pair{0, 0}}) {
    json t = good;
    json other = memory_event(20, 1, 0x40, 0, 0, type);
    other["args"]["Device Id"] = id;
    other["args"].erase("Bytes");
    t["traceEvents"].push_back(other);
    EXPECT_EQ(error_of(t.dump()), "no error");
  }
}

}  // namespace
}  // namespace pipesim::trace_import
