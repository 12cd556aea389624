// NCCL collectives over every GPU of the machine, nccl-tests style (one process driving all devices in a
// group call, bf16 buffers from 1 MiB to 1 GiB, CUDA-event timing of a loop on device 0 after a warm-up).
// NCCL is loaded at run time: the few C entry points used are declared here as nccl.h defines them, so
// nothing needs NCCL to build, and a machine without it calibrates everything else.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_benchmarks.hpp"
#include "cuda_timing.cuh"
#include "pipesim/calibrate/cuda_check.hpp"
#include "pipesim/calibrate/curve_fit.hpp"
#include "pipesim/calibrate/timed_buffers.cuh"

namespace pipesim::calibrate {

namespace {

// nccl.h: ncclComm_t is an opaque pointer; ncclResult_t, ncclDataType_t and ncclRedOp_t are C enums.
using NcclComm = struct NcclCommOpaque*;
constexpr int kNcclSuccess = 0, kNcclBfloat16 = 9, kNcclSum = 0;

/// The NCCL entry points the benchmark calls, found in libnccl.so.2.
struct Nccl {
  void* library = nullptr;
  int (*get_version)(int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*comm_init_all)(NcclComm*, int, const int*) = nullptr;
  int (*comm_destroy)(NcclComm) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;
  int (*all_reduce)(const void*, void*, std::size_t, int, int, NcclComm, cudaStream_t) = nullptr;
  int (*all_gather)(const void*, void*, std::size_t, int, NcclComm, cudaStream_t) = nullptr;
  int (*reduce_scatter)(const void*, void*, std::size_t, int, int, NcclComm, cudaStream_t) = nullptr;

  template <class F>
  bool find(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(library, name));
    return f != nullptr;
  }
  /// Loads the library; "" when it is usable, else why not.
  std::string load() {
    library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return std::string("NCCL not found (") + dlerror() + ")";
    const bool all = find(get_version, "ncclGetVersion") && find(error_string, "ncclGetErrorString") &&
                     find(comm_init_all, "ncclCommInitAll") && find(comm_destroy, "ncclCommDestroy") &&
                     find(group_start, "ncclGroupStart") && find(group_end, "ncclGroupEnd") &&
                     find(all_reduce, "ncclAllReduce") && find(all_gather, "ncclAllGather") &&
                     find(reduce_scatter, "ncclReduceScatter");
    return all ? "" : "libnccl.so.2 lacks an entry point the benchmark calls";
  }
  void check(int result, const char* what) const {
    if (result != kNcclSuccess)
      throw cuda_check::CudaError(std::string(what) + ": " + (error_string ? error_string(result) : "error"));
  }
};

/// One collective at one size on every device, its algorithm bandwidth per sample.
struct Ranks {
  const Nccl& nccl;
  std::vector<NcclComm> comms;
  std::vector<cudaStream_t> streams;
  std::vector<void*> send, recv;

  /// Enqueues `op` of a `bytes` buffer on every rank in one group call.
  void enqueue(const std::string& op, std::size_t bytes) const {
    const int n = static_cast<int>(comms.size());
    const std::size_t elements = bytes / 2, shard = elements / static_cast<std::size_t>(n);
    nccl.check(nccl.group_start(), "ncclGroupStart");
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<std::size_t>(r);
      int result = kNcclSuccess;
      if (op == "all_reduce")
        result = nccl.all_reduce(send[i], recv[i], elements, kNcclBfloat16, kNcclSum, comms[i], streams[i]);
      else if (op == "all_gather")  // each rank's shard in, the whole buffer out
        result = nccl.all_gather(send[i], recv[i], shard, kNcclBfloat16, comms[i], streams[i]);
      else  // reduce_scatter: the whole buffer in, each rank's shard out
        result = nccl.reduce_scatter(send[i], recv[i], shard, kNcclBfloat16, kNcclSum, comms[i], streams[i]);
      nccl.check(result, op.c_str());
    }
    nccl.check(nccl.group_end(), "ncclGroupEnd");
  }
};

constexpr std::size_t kLargest = std::size_t{1} << 30;

void time_collectives(CudaCalibration& c, const CudaOptions& o, Ranks& ranks,
                      const std::function<void(const std::string&)>& progress) {
  const int n = static_cast<int>(ranks.comms.size());
  const std::size_t step = o.quick ? 16 : 4;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
    progress(std::string("collectives: ") + op + " over " + std::to_string(n) + " GPUs");
    for (std::size_t bytes = std::size_t{1} << 20; bytes <= kLargest; bytes *= step) {
      cuda_check::check(cudaSetDevice(0), "cudaSetDevice");
      const int iters = bytes >= (std::size_t{64} << 20) ? 2 : 10;
      // Device 0's stream times the loop; the group call makes every rank's work wait for the others.
      auto secs = time_loop(ranks.streams[0], iters, o.samples, [&] {
        ranks.enqueue(op, bytes);
        for (int r = 1; r < n; ++r) {
          cuda_check::check(cudaSetDevice(r), "cudaSetDevice");
          cuda_check::check(cudaStreamSynchronize(ranks.streams[static_cast<std::size_t>(r)]), "sync");
        }
        cuda_check::check(cudaSetDevice(0), "cudaSetDevice");
      });
      const SampleStats st = summarize(secs);
      CollectivePoint p;
      p.op = op;
      p.bytes = static_cast<std::int64_t>(bytes);
      p.ranks = n;
      p.algbw_GBps = static_cast<double>(bytes) / st.median / 1e9;
      p.busbw_GBps = p.algbw_GBps * collective_bus_factor(op, n);
      p.cv = st.cv;
      p.samples = st.samples;
      c.collectives.push_back(p);
    }
  }
}

}  // namespace

void measure_collectives(CudaCalibration& c, const CudaOptions& o,
                         const std::function<void(const std::string&)>& progress) {
  Nccl nccl;
  if (const std::string why = nccl.load(); !why.empty()) {
    c.collectives_note = why + ": collectives not measured";
    return;
  }
  int version = 0;
  nccl.check(nccl.get_version(&version), "ncclGetVersion");
  const int n = c.device_count;
  Ranks ranks{nccl, std::vector<NcclComm>(static_cast<std::size_t>(n)), {}, {}, {}};
  std::vector<int> devices(static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) devices[static_cast<std::size_t>(d)] = d;
  nccl.check(nccl.comm_init_all(ranks.comms.data(), n, devices.data()), "ncclCommInitAll");
  for (int d = 0; d < n; ++d) {
    cuda_check::check(cudaSetDevice(d), "cudaSetDevice");
    cudaStream_t s{};
    cuda_check::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    ranks.streams.push_back(s);
    ranks.send.push_back(device_random(kLargest, 90 + static_cast<std::uint64_t>(d)));
    ranks.recv.push_back(device_random(kLargest, 190 + static_cast<std::uint64_t>(d)));
  }
  c.collectives_note = "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
                       "." + std::to_string(version % 100) + " (libnccl.so.2), " + std::to_string(n) +
                       (n == 1 ? " GPU: one rank copies locally, no bus bandwidth" : " GPUs");
  try {
    time_collectives(c, o, ranks, progress);
  } catch (const cuda_check::CudaError& e) {
    c.collectives_note += std::string("; stopped: ") + e.what();
  }
  for (int d = 0; d < n; ++d) {
    const auto i = static_cast<std::size_t>(d);
    cudaSetDevice(d);
    nccl.comm_destroy(ranks.comms[i]);
    cudaStreamDestroy(ranks.streams[i]);
    cudaFree(ranks.send[i]);
    cudaFree(ranks.recv[i]);
  }
  cudaSetDevice(0);
}

}  // namespace pipesim::calibrate
