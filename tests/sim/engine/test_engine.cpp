#include <gtest/gtest.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

using testing::PlanMaker;

TEST(Engine, MemoryBoundBytesAddStreamingTimeToTheGemmTime) {
  PlanMaker pm(1);
  pm.plan.hw.gpu.hbm_GBps = 2000;
  pm.plan.hw.gpu.hbm_efficiency = 0.8;  // 1600 bytes per ns
  pm.plan.hw.gpu.launch_overhead = 0;
  ComputeWork w{1e12, 100, 0, 0};
  const Duration gemm_only = pm.plan.hw.compute_ns(w.flops, w.gemm_gflop, 0, "bf16");
  w.mem_bytes = 1'600'000'000;  // exactly 1 ms
  pm.add(0, w, -1);
  pm.add(0, MemoryWork{16'000'000}, -1);  // the optimizer's streaming work at the same rate: 10 us
  Timeline tl = Engine{}.run(pm.plan);
  EXPECT_EQ(tl.end[0] - tl.start[0], gemm_only + 1'000'000);
  EXPECT_EQ(tl.end[1] - tl.start[1], 10'000);
}

TEST(Engine, TimeAndMemoryBeyondInt64AreInputErrorsNotWraps) {
  // Each value is in the loader's range (2^50); their sums are not: 8,193 allocations of 2^50 bytes pass
  // 2^63, and 8,193 ops of 2^50 ns pass the int64 time range.
  constexpr std::int64_t kBig = std::int64_t{1} << 50;
  PlanMaker memory(1);
  for (int i = 0; i < 8193; ++i) {
    memory.plan.ops.push_back(Op{});
    memory.plan.ops.back().fixed_duration = 1;
    memory.plan.extras_of(i) = OpExtras{kBig, 0};
  }
  EXPECT_THROW(
      {
        try {
          Engine{}.run(memory.plan);
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("passes 2^63 bytes"), std::string::npos) << e.what();
          throw;
        }
      },
      InputError);
  PlanMaker time(1);
  for (int i = 0; i < 8193; ++i) time.add(0, ComputeWork{}, kBig);
  EXPECT_THROW(Engine{}.run(time.plan), InputError);
  PlanMaker fits(1);
  for (int i = 0; i < 8191; ++i) fits.add(0, ComputeWork{}, kBig);
  EXPECT_EQ(Engine{}.run(fits.plan).end.back(), 8191 * kBig);
}

/// Two GPUs' members of one collective (1 MiB each way), each saying how many members the group has.
PlanMaker two_member_collective(std::int32_t group, std::int32_t size_a, std::int32_t size_b) {
  PlanMaker pm(2);
  TransferWork a{0, 1, 1 << 20};
  a.group = group;
  a.group_size = size_a;
  TransferWork b = a;
  b.src = 1, b.dst = 0;
  b.group_size = size_b;
  pm.add(0, a, -1);
  pm.add(2, b, -1);
  return pm;
}

TEST(Engine, SparseCollectiveGroupIdsNeedNoTableOfThatSize) {
  // Group ids up to 2^31 - 1 are valid; the engine numbers the ones in use, not every id below them.
  PlanMaker pm = two_member_collective(2147483647, 2, 2);
  Timeline tl = Engine{}.run(pm.plan);
  EXPECT_EQ(tl.start[0], tl.start[1]);
  EXPECT_GT(tl.end[0], 0);
}

TEST(Engine, MembersOfOneCollectiveMustAgreeOnItsSize) {
  PlanMaker pm = two_member_collective(7, 2, 1);
  const std::string err = testing::error_of([&] { Engine{}.run(pm.plan); });
  EXPECT_NE(err.find("/ops/1/transfer/group_size"), std::string::npos) << err;
  EXPECT_NE(err.find("collective group 7 says 2"), std::string::npos) << err;
}

TEST(Engine, ACollectiveHasNoMoreMemberOpsThanItsSize) {
  // A third op in a group of two would start the first two again (a plan must number each collective anew).
  PlanMaker pm = two_member_collective(7, 2, 2);
  TransferWork c{1, 0, 1 << 20};
  c.group = 7;
  c.group_size = 2;
  pm.add(3, c, -1);
  const std::string err = testing::error_of([&] { Engine{}.run(pm.plan); });
  EXPECT_NE(err.find("/ops/2/transfer/group"), std::string::npos) << err;
  EXPECT_NE(err.find("collective group 7 has 3 member ops; valid: at most its group_size, 2"),
            std::string::npos)
      << err;
}

TEST(Engine, StreamsAreSerialAndDepsCrossStreams) {
  PlanMaker pm(2);
  OpId a = pm.add(0, ComputeWork{}, 10);
  OpId b = pm.add(0, ComputeWork{}, 20);
  OpId c = pm.add(2, ComputeWork{}, 5, {a});
  OpId d = pm.add(2, ComputeWork{}, 1, {b});
  Timeline t = Engine{}.run(pm.plan);
  EXPECT_EQ(t.start[static_cast<std::size_t>(b)], 10);
  EXPECT_EQ(t.end[static_cast<std::size_t>(b)], 30);
  EXPECT_EQ(t.start[static_cast<std::size_t>(c)], 10);
  EXPECT_EQ(t.start[static_cast<std::size_t>(d)], 30);
  EXPECT_EQ(t.end[static_cast<std::size_t>(d)], 31);
}

TEST(Engine, ComputeTimeFromFlopsEfficiencyAndLaunches) {
  PlanMaker pm(1);
  // 100 GFLOP GEMMs run at 60% of 989 TFLOP/s in the h100 profile; 10 launches of 3 us each.
  OpId a = pm.add(0, ComputeWork{989e12 * 0.6 * 1e-3, 100.0, 10}, -1);
  Timeline t = Engine{}.run(pm.plan);
  EXPECT_NEAR(static_cast<double>(t.end[static_cast<std::size_t>(a)]), 1'000'000 + 30'000, 1.0);
}

TEST(Engine, TransfersShareLinksAndPayLatency) {
  PlanMaker pm(3);
  // NVLink4 450 B/ns per direction, 3 us latency: 450 kB alone takes 1000 ns + 3000 ns.
  OpId one = pm.add(1, TransferWork{0, 1, 450'000, 1, -1, 1}, -1);
  Timeline t1 = Engine{}.run(pm.plan);
  EXPECT_EQ(t1.end[static_cast<std::size_t>(one)], 4000);
  // Two sends from GPU 0 at once (different streams) share its NVLink tx port: 2000 ns each.
  pm.plan.streams.push_back({0, StreamKind::kP2PSend, "p2p_send2"});
  OpId two =
      pm.add(static_cast<StreamId>(pm.plan.streams.size() - 1), TransferWork{0, 2, 450'000, 1, -1, 1}, -1);
  Timeline t2 = Engine{}.run(pm.plan);
  EXPECT_EQ(t2.end[static_cast<std::size_t>(one)], 5000);
  EXPECT_EQ(t2.end[static_cast<std::size_t>(two)], 5000);
  ASSERT_FALSE(t2.links.empty());
  EXPECT_EQ(t2.links.front().name(), "node0.gpu0.nvlink.tx");
  EXPECT_DOUBLE_EQ(t2.links.front().carried_bytes, 900'000);
}

TEST(Engine, TransfersAlikeButForLatencyStepsOrPriorityKeepTheirOwn) {
  // One stream's sends of 450 kB from GPU 0 to GPU 1 (1000 ns on the wire, 3 us latency a step), worked out
  // once per kind of transfer as the plan is read: each keeps its own latency steps and priority.
  PlanMaker pm(2);
  const OpId a = pm.add(1, TransferWork{0, 1, 450'000, 1, -1, 1}, -1);
  const OpId b = pm.add(1, TransferWork{0, 1, 450'000, 3, -1, 1}, -1);
  const OpId c = pm.add(1, TransferWork{0, 1, 450'000, 3, -1, 1}, -1);
  const OpId d = pm.add(1, TransferWork{0, 1, 450'000, 1, -1, 1}, -1);
  // A background send beside a foreground one on another stream: it gets what the first leaves (nothing)
  // until that one ends, then the port.
  const StreamId other = pm.add_stream(0, StreamKind::kP2PSend, "p2p_send2");
  TransferWork background{0, 1, 450'000, 1, -1, 1};
  background.priority = 1;
  const OpId e = pm.add(other, background, -1);
  const Timeline t = Engine{}.run(pm.plan);
  EXPECT_EQ(t.end[static_cast<std::size_t>(a)], 4000);
  EXPECT_EQ(t.end[static_cast<std::size_t>(b)], 4000 + 1000 + 9000);
  EXPECT_EQ(t.end[static_cast<std::size_t>(c)], 14000 + 1000 + 9000);
  EXPECT_EQ(t.end[static_cast<std::size_t>(d)], 24000 + 4000);
  EXPECT_EQ(t.end[static_cast<std::size_t>(e)], 1000 + 1000 + 3000);
}

TEST(Engine, AnInstantWhoseLastEventWasSupersededStillRatesItsNewFlows) {
  // GPU 3 computes X while a collective on its other stream slows it (the profile's
  // collective_compute_slowdown): X's first end event is superseded. At exactly that instant GPU 2's timed op
  // Y ends and its transfer Z starts; the superseded event pops after Y's (its stream comes later). Z must be
  // rated at that instant, as when nothing slows X (before, the instant's flush waited for the next event).
  auto make = [](double slowdown, Duration y_ns) {
    PlanMaker pm(4);
    pm.plan.hw.gpu.collective_compute_slowdown = slowdown;
    pm.add(5, ComputeWork{}, y_ns);                              // Y, on GPU 2's second stream
    pm.add(5, TransferWork{2, 0, 450'000, 1, -1, 1}, -1);        // Z, right after it
    pm.add(6, ComputeWork{989e12 * 0.6 * 1e-3, 100.0, 10}, -1);  // X, on GPU 3: about 1 ms
    pm.add(7, ComputeWork{}, 1000);                              // W, then the collective C beside X
    pm.add(7, TransferWork{3, 1, 4'500'000, 1, -1, 1}, -1, {}, OpKind::kAllReduce);
    return pm;
  };
  const Duration x_ns = Engine{}.run(make(0, 1).plan).end[2];
  PlanMaker slowed = make(0.5, x_ns), control = make(0, x_ns);
  const Timeline a = Engine{}.run(slowed.plan), b = Engine{}.run(control.plan);
  ASSERT_GT(a.end[2], x_ns);  // X was slowed: its first end event was superseded
  EXPECT_EQ(a.start[1], x_ns);
  EXPECT_EQ(a.end[1], b.end[1]);
  EXPECT_EQ(b.end[1], x_ns + 1000 + 3000);  // 450 kB at 450 B/ns, then the 3 us latency
}

TEST(Engine, CollectiveMembersStartTogether) {
  PlanMaker pm(2);
  OpId late = pm.add(2, ComputeWork{}, 700);
  OpId m0 = pm.add(0, TransferWork{0, 1, 450'000, 1, 0, 2}, -1);
  OpId m1 = pm.add(2, TransferWork{1, 0, 450'000, 1, 0, 2}, -1);
  Timeline t = Engine{}.run(pm.plan);
  EXPECT_EQ(t.end[static_cast<std::size_t>(late)], 700);
  EXPECT_EQ(t.start[static_cast<std::size_t>(m0)], 700);
  EXPECT_EQ(t.start[static_cast<std::size_t>(m1)], 700);
  EXPECT_EQ(t.end[static_cast<std::size_t>(m0)], 700 + 4000);
}

TEST(Engine, MemoryPeakAndOomKeepRunning) {
  PlanMaker pm(1);
  pm.plan.hw.gpu.runtime_reserved_bytes = 0;  // every byte of hbm_bytes for tensors
  pm.plan.devices[0].resident_bytes = 1000;
  OpId a = pm.add(0, ComputeWork{}, 10);
  pm.plan.extras_of(a).alloc_bytes = 500;
  OpId b = pm.add(0, ComputeWork{}, 10);
  pm.plan.extras_of(b).alloc_bytes = pm.plan.hw.gpu.hbm_bytes;  // far too much
  pm.plan.extras_of(b).free_bytes = pm.plan.hw.gpu.hbm_bytes + 500;
  pm.add(0, ComputeWork{}, 10);
  Timeline t = Engine{}.run(pm.plan);
  EXPECT_EQ(t.peak_bytes[0], 1500 + pm.plan.hw.gpu.hbm_bytes);
  EXPECT_TRUE(t.oom.oom);
  EXPECT_EQ(t.oom.device, 0);
  EXPECT_EQ(t.oom.time, 10);
  EXPECT_EQ(t.oom.bytes_over, 1500);
  EXPECT_EQ(t.end.back(), 30);  // the run completes so the user sees where and by how much
}

TEST(Engine, TensorsFitBesideWhatTheRuntimeHolds) {
  // A profile that measured what the CUDA context, cuBLAS and NCCL hold leaves the tensors the rest: a peak
  // of exactly the rest fits, a byte more is out of memory by that byte.
  PlanMaker pm(1);
  pm.plan.hw.gpu.runtime_reserved_bytes = 1'303'183'360;
  const std::int64_t rest = pm.plan.hw.gpu.hbm_bytes - 1'303'183'360;
  EXPECT_EQ(pm.plan.hw.gpu_tensor_capacity(), rest);
  OpId a = pm.add(0, ComputeWork{}, 10);
  pm.plan.extras_of(a).alloc_bytes = rest;
  pm.plan.extras_of(a).free_bytes = rest;
  EXPECT_FALSE(Engine{}.run(pm.plan).oom.oom);
  pm.plan.extras_of(a).alloc_bytes = rest + 1;
  pm.plan.extras_of(a).free_bytes = rest + 1;
  const Timeline t = Engine{}.run(pm.plan);
  EXPECT_TRUE(t.oom.oom);
  EXPECT_EQ(t.oom.bytes_over, 1);
}

TEST(Engine, CpuOptimizerHoldsCoresFromThePool) {
  PlanMaker pm(1);
  const int cores = pm.plan.hw.host.cores;
  const double rate = pm.plan.hw.adam_params_per_s(cores);
  // Two optimizer steps that each need every core run one after the other although they sit on two streams.
  OpId a = pm.add(2, CpuWork{static_cast<std::int64_t>(rate / 1000), cores}, -1);  // 1 ms of work
  OpId b = pm.add(3, CpuWork{static_cast<std::int64_t>(rate / 1000), cores}, -1);
  Timeline t = Engine{}.run(pm.plan);
  Duration d = duration_for_work(static_cast<double>(static_cast<std::int64_t>(rate / 1000)), rate);
  EXPECT_EQ(t.end[static_cast<std::size_t>(a)], d);
  EXPECT_EQ(t.start[static_cast<std::size_t>(b)], d);
  EXPECT_EQ(t.end[static_cast<std::size_t>(b)], 2 * d);
}

TEST(Engine, AnOpsDependentsAreTriedInPlanOrder) {
  // Three optimizer steps that each need every core wait for one op (the first of them sits before it in the
  // plan); they take the cores in plan order, which their distinct lengths make visible.
  PlanMaker pm(1);
  const int cores = pm.plan.hw.host.cores;
  const double rate = pm.plan.hw.adam_params_per_s(cores);
  const StreamId cpu3 = pm.add_stream(1, StreamKind::kCpu, "cpu3");
  const auto params = [&](int k) { return static_cast<std::int64_t>(rate / 1000) * k; };  // k ms of work
  const auto ms = [&](int k) { return CpuWork{params(k), cores}; };
  OpId first = pm.add(2, ms(1), -1, {1});
  OpId gate = pm.add(0, ComputeWork{}, 10);
  OpId second = pm.add(3, ms(2), -1, {gate});
  OpId third = pm.add(cpu3, ms(3), -1, {gate});
  Timeline t = Engine{}.run(pm.plan);
  const auto len = [&](int k) { return duration_for_work(static_cast<double>(params(k)), rate); };
  EXPECT_EQ(t.start[static_cast<std::size_t>(first)], 10);
  EXPECT_EQ(t.start[static_cast<std::size_t>(second)], 10 + len(1));
  EXPECT_EQ(t.start[static_cast<std::size_t>(third)], 10 + len(1) + len(2));
  EXPECT_EQ(t.end[static_cast<std::size_t>(third)], 10 + len(1) + len(2) + len(3));
}

TEST(Engine, DetectsDeadlockAndNamesStuckOps) {
  PlanMaker pm(2);
  // Stream A: X then Y. Stream B: Z then W. X waits for W and Z waits for Y: nothing can ever start.
  OpId x = pm.add(0, ComputeWork{}, 1);
  OpId y = pm.add(0, ComputeWork{}, 1);
  OpId z = pm.add(2, ComputeWork{}, 1, {y});
  OpId w = pm.add(2, ComputeWork{}, 1);
  pm.plan.ops[static_cast<std::size_t>(x)].deps.push_back(w);
  (void)z;
  try {
    Engine{}.run(pm.plan);
    FAIL() << "deadlock not detected";
  } catch (const DeadlockError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("4 of 4 ops never ran"), std::string::npos) << msg;
    EXPECT_NE(msg.find("op 0 forward on gpu0/compute waits for op 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("op 2 forward on gpu1/compute waits for op 1"), std::string::npos) << msg;
  }
}

TEST(Engine, ADeadlockReportListsOnlyTheDependenciesThatNeverEnded) {
  PlanMaker pm(2);
  // Stream A: P then X, X after P and W. Stream B: Z then W, Z after X. P runs; X, Z and W never do.
  OpId p = pm.add(0, ComputeWork{}, 1);
  OpId x = pm.add(0, ComputeWork{}, 1, {p});
  pm.add(2, ComputeWork{}, 1, {x});
  OpId w = pm.add(2, ComputeWork{}, 1);
  pm.plan.ops[static_cast<std::size_t>(x)].deps.push_back(w);
  try {
    Engine{}.run(pm.plan);
    FAIL() << "deadlock not detected";
  } catch (const DeadlockError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("3 of 4 ops never ran"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[op 1 forward on gpu0/compute waits for op 3 forward on gpu1/compute;]"),
              std::string::npos)
        << msg;  // not for op 0, which ended
  }
}

TEST(Engine, CollectiveWithMissingMemberIsADeadlock) {
  PlanMaker pm(2);
  pm.add(0, TransferWork{0, 1, 10, 1, 0, 2}, -1);
  EXPECT_THROW(Engine{}.run(pm.plan), DeadlockError);
}

TEST(Engine, ChecksEachOpAsValidatePlanDoes) {
  // The engine checks a plan inside its one pass over the ops; each bad field gets the same one-line error
  // (file, JSON path, what is valid) as validate_plan, which `explain`, `replay` and the plan loader run.
  struct Case {
    const char* path;
    const char* message;
    void (*spoil)(Plan&);
  };
  const Case cases[] = {
      {"/ops/1/stream", "no stream 99; valid: 0 .. 5", [](Plan& p) { p.ops[1].stream = 99; }},
      {"/ops/1/deps/1", "dependency 1 is not another op",
       [](Plan& p) {
         p.ops[1].deps = DepList{0, 1};
       }},
      {"/ops/1/deps/0", "dependency -3 is not another op", [](Plan& p) { p.ops[1].deps = DepList{-3}; }},
      {"/ops/1", "alloc_bytes and free_bytes must be >= 0", [](Plan& p) { p.extras_of(1).free_bytes = -1; }},
      {"/ops/1", "extras entry 5, but the plan has none; valid: -1", [](Plan& p) { p.ops[1].extras = 5; }},
      {"/ops/1/tags/iteration", "iteration 1; valid: 0 .. 0", [](Plan& p) { p.ops[1].tags.iteration = 1; }},
      {"/ops/1/transfer", "src/dst must be devices 0 .. 2",
       [](Plan& p) { std::get<TransferWork>(p.ops[1].payload).dst = 3; }},
      {"/ops/1/transfer/bytes", "must be >= 0",
       [](Plan& p) { std::get<TransferWork>(p.ops[1].payload).bytes = -5; }},
      {"/ops/1/transfer/group_size", "0 members; valid: 1 .. 3",
       [](Plan& p) { std::get<TransferWork>(p.ops[1].payload).group_size = 0; }},
      {"/ops/1/cpu", "CPU work must sit on a host stream",
       [](Plan& p) {
         p.ops[1].payload = CpuWork{1000, 1};
       }},
      {"/ops/1/cpu/threads", "valid: 1 ..",
       [](Plan& p) {
         p.ops[1].stream = 4;  // the host's stream
         p.ops[1].payload = CpuWork{1000, 0};
       }},
      {"/meta/iterations", "2 iterations, but the ops run 1; valid: 1",
       [](Plan& p) { p.meta.iterations = 2; }},
  };
  for (const Case& c : cases) {
    PlanMaker pm(2);
    pm.add(0, ComputeWork{}, 1000);
    pm.add(1, TransferWork{0, 1, 4096}, -1, {0}, OpKind::kP2P);
    ASSERT_NO_THROW(Engine{}.run(pm.plan));
    c.spoil(pm.plan);
    pm.plan.origin = "bad.json";
    std::string from_validate, from_engine;
    try {
      validate_plan(pm.plan, pm.plan.origin);
    } catch (const InputError& e) {
      from_validate = e.what();
      EXPECT_EQ(e.file(), "bad.json");
      EXPECT_EQ(e.json_path(), c.path);
      EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
    }
    try {
      Engine{}.run(pm.plan);
    } catch (const InputError& e) {
      from_engine = e.what();
    }
    EXPECT_FALSE(from_validate.empty()) << c.path;
    EXPECT_EQ(from_engine, from_validate) << c.path;
  }
}

TEST(Engine, RejectsDanglingReferences) {
  PlanMaker pm(1);
  pm.add(0, ComputeWork{}, 1, {7});
  EXPECT_THROW(Engine{}.run(pm.plan), InputError);
  PlanMaker pm2(1);
  pm2.add(9, ComputeWork{}, 1);
  EXPECT_THROW(Engine{}.run(pm2.plan), InputError);
}

}  // namespace
}  // namespace pipesim::sim
