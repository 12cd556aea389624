// The CUDA replay backend (a module loaded only for `replay --backend cuda`; never run on a device during
// development: no GPU was available). One non-blocking CUDA stream per plan stream on its GPU; ops issued in
// a topological order, each dependency an event wait; compute ops as cuBLAS bf16 GEMMs of the op's GEMM size
// (square, as many as its FLOPs take) plus device copies for its memory-bound bytes; transfers as device,
// peer or pinned-host copies; fixed durations as a kernel spinning on the global timer; CPU optimizer steps
// as host functions running the calibration's Adam. Memory effects come from each GPU's stream-ordered pool
// (cudaMallocAsync / cudaFreeAsync at the plan's allocations and frees), its high-water mark read back per
// run. Op times come from CUPTI activity records (each op's kernels and copies tagged with its id through an
// external correlation id, put on the origin's clock by a marker kernel) where CUPTI is available, and from
// timing events against an origin event recorded on every GPU after all were synchronized otherwise.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#if defined(PIPESIM_WITH_CUPTI)
#include <cupti.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cuda_replay_abi.hpp"
#include "cuda_work.hpp"
#include "pipesim/calibrate/cuda_check.hpp"
#include "pipesim/calibrate/spin_kernel.cuh"
#include "pipesim/calibrate/timed_buffers.cuh"

namespace pipesim::replay::cuda_abi {

namespace {

using cuda_check::check;
using cuda_check::CudaError;

using calibrate::device_random;
using calibrate::host_fill_random;
using calibrate::pinned_random;
using calibrate::spin_kernel;

constexpr auto kCopyBytes = static_cast<std::size_t>(kCopyChunkBytes);

/// Per GPU: cuBLAS, GEMM operands for the largest square GEMM, copy buffers.
struct Gpu {
  int device = 0;
  cublasHandle_t blas = nullptr;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
  char *from = nullptr, *to = nullptr;
  char* pinned = nullptr;  // host staging buffer of this GPU's copies
};

struct AdamCall {
  void (*fn)(std::int64_t, int);
  std::int64_t params;
  int threads;
};

void CUDART_CB run_adam(void* p) {
  const auto* call = static_cast<const AdamCall*>(p);
  call->fn(call->params, call->threads);
}

struct HostCopy {
  std::int64_t bytes;
  std::vector<char>* from;
  std::vector<char>* to;
};

void CUDART_CB run_host_copy(void* p) {
  const auto* c = static_cast<const HostCopy*>(p);
  for (std::int64_t left = c->bytes; left > 0;) {
    const auto n =
        static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(c->from->size())));
    std::copy_n(c->from->data(), n, c->to->data());
    left -= static_cast<std::int64_t>(n);
  }
}

/// An allocation of the plan on a GPU's pool: its pointer and the bytes of it not yet freed.
struct Block {
  void* ptr;
  std::int64_t left;
};

#if defined(PIPESIM_WITH_CUPTI) && defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
#define PIPESIM_CUPTI_RECORDS 1
/// CUPTI activity records of one run: each op's first start and last end on the GPU timestamp clock, by the
/// external correlation id its issue pushed (op id + 1; 0 is the origin markers).
class ActivityLog {
 public:
  static ActivityLog& get() {
    static ActivityLog log;
    return log;
  }
  /// Enables the records; "" or why CUPTI cannot trace here (then the caller keeps the events).
  std::string enable() {
    if (cuptiActivityRegisterCallbacks(&requested, &completed) != CUPTI_SUCCESS)
      return "cuptiActivityRegisterCallbacks failed";
    for (CUpti_ActivityKind k :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
          CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}) {
      const CUptiResult e = cuptiActivityEnable(k);
      if (e != CUPTI_SUCCESS) {
        const char* text = nullptr;
        cuptiGetResultString(e, &text);
        return std::string("cuptiActivityEnable: ") + (text ? text : "unknown error");
      }
    }
    return "";
  }
  void clear() {
    std::lock_guard lock(mutex_);
    external_.clear();
    spans_.clear();
  }
  void flush() { cuptiActivityFlushAll(1); }
  struct Span {
    std::uint32_t device;
    std::uint64_t start, end;
  };
  /// Per external id and device: the first start and last end of the records tagged with it.
  std::map<std::pair<std::uint64_t, std::uint32_t>, Span> spans() const {
    std::lock_guard lock(mutex_);
    std::map<std::pair<std::uint64_t, std::uint32_t>, Span> out;
    for (const auto& [correlation, ext] : external_) {
      const auto it = spans_.find(correlation);
      if (it == spans_.end()) continue;
      auto [o, fresh] = out.try_emplace({ext, it->second.device}, it->second);
      if (!fresh) {
        o->second.start = std::min(o->second.start, it->second.start);
        o->second.end = std::max(o->second.end, it->second.end);
      }
    }
    return out;
  }

 private:
  static void CUPTIAPI requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    constexpr std::size_t kBytes = std::size_t{8} << 20;
    *buffer = static_cast<std::uint8_t*>(aligned_alloc(8, kBytes));
    *size = *buffer ? kBytes : 0;
    *max_records = 0;
  }
  static void CUPTIAPI completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                                 std::size_t valid) {
    get().read(buffer, valid);
    free(buffer);
  }
  void read(std::uint8_t* buffer, std::size_t valid) {
    std::lock_guard lock(mutex_);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL:
          add_span<CUpti_ActivityKernel10>(record);
          break;
        case CUPTI_ACTIVITY_KIND_MEMCPY:
          add_span<CUpti_ActivityMemcpy6>(record);
          break;
        case CUPTI_ACTIVITY_KIND_MEMSET:
          add_span<CUpti_ActivityMemset4>(record);
          break;
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
          if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
            external_[e->correlationId] = e->externalId;
          break;
        }
        default:
          break;  // MEMCPY2 (peer copies) and others: their ops keep the event times
      }
    }
  }
  /// A kernel, copy or memset record: the same four fields in each record type.
  template <typename Record>
  void add_span(const CUpti_Activity* record) {
    const auto* r = reinterpret_cast<const Record*>(record);
    add(r->correlationId, r->deviceId, r->start, r->end);
  }
  void add(std::uint32_t correlation, std::uint32_t device, std::uint64_t start, std::uint64_t end) {
    auto [it, fresh] = spans_.try_emplace(correlation, Span{device, start, end});
    if (!fresh) {
      it->second.start = std::min(it->second.start, start);
      it->second.end = std::max(it->second.end, end);
    }
  }
  mutable std::mutex mutex_;
  std::map<std::uint32_t, std::uint64_t> external_;  // CUPTI correlation id -> external id
  std::map<std::uint32_t, Span> spans_;              // CUPTI correlation id -> its records' span
};
#endif

class Replayer {
 public:
  explicit Replayer(const Request& r) : r_(r) {
    int count = 0;
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (count < r.gpus)
      throw CudaError("the plan has " + std::to_string(r.gpus) + " GPUs, this machine shows " +
                      std::to_string(count));
    gpus_.resize(static_cast<std::size_t>(std::max(1, r.gpus)));
    for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
      Gpu& d = gpus_[static_cast<std::size_t>(g)];
      d.device = g;
      check(cudaSetDevice(g), "cudaSetDevice");
      check(cublasCreate(&d.blas), "cublasCreate");
      // Random operands and copy data (constant or zero operands make GEMMs run faster than real ones).
      const std::size_t gemm_bytes = sizeof(__nv_bfloat16) * kMaxOperandElements;
      const auto seed = 1000 * static_cast<std::uint64_t>(g);
      d.a = static_cast<__nv_bfloat16*>(device_random(gemm_bytes, seed + 1));
      d.b = static_cast<__nv_bfloat16*>(device_random(gemm_bytes, seed + 2));
      d.c = static_cast<__nv_bfloat16*>(device_random(gemm_bytes, seed + 3));
      d.from = static_cast<char*>(device_random(kCopyBytes, seed + 4));
      d.to = static_cast<char*>(device_random(kCopyBytes, seed + 5));
      d.pinned = static_cast<char*>(pinned_random(kCopyBytes, seed + 6));
      for (int p = 0; p < static_cast<int>(gpus_.size()); ++p) {
        if (p == g) continue;
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, g, p) == cudaSuccess && can)
          cudaDeviceEnablePeerAccess(p, 0);
        else
          no_peer_.push_back(std::to_string(g) + "->" + std::to_string(p));
      }
      cudaGetLastError();  // peer access already enabled is not an error here
    }
    streams_.resize(r.streams.size());
    for (std::size_t s = 0; s < r.streams.size(); ++s) {
      check(cudaSetDevice(device_of_stream(static_cast<int>(s))), "cudaSetDevice");
      check(cudaStreamCreateWithFlags(&streams_[s], cudaStreamNonBlocking), "cudaStreamCreate");
    }
    start_.resize(r.ops.size());
    end_.resize(r.ops.size());
    for (std::size_t i = 0; i < r.ops.size(); ++i) {
      check(cudaSetDevice(device_of_stream(r.ops[i].stream)), "cudaSetDevice");
      check(cudaEventCreate(&start_[i]), "cudaEventCreate");
      check(cudaEventCreate(&end_[i]), "cudaEventCreate");
    }
    origin_.resize(gpus_.size());
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      check(cudaSetDevice(static_cast<int>(g)), "cudaSetDevice");
      check(cudaEventCreate(&origin_[g]), "cudaEventCreate");
    }
    pools_.resize(gpus_.size());
    live_.resize(gpus_.size());
    resident_.assign(gpus_.size(), nullptr);
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      check(cudaDeviceGetDefaultMemPool(&pools_[g], static_cast<int>(g)), "cudaDeviceGetDefaultMemPool");
      // Keep freed memory in the pool between runs (no release to the driver at synchronization points).
      std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
      check(cudaMemPoolSetAttribute(pools_[g], cudaMemPoolAttrReleaseThreshold, &keep),
            "cudaMemPoolSetAttribute");
    }
#if defined(PIPESIM_CUPTI_RECORDS)
    const std::string why = ActivityLog::get().enable();
    cupti_ = why.empty();
    timing_ = cupti_ ? "CUPTI activity records" : "CUDA events (CUPTI: " + why + ")";
#else
    timing_ = "CUDA events (built without CUPTI)";
#endif
    host_from_.resize(kCopyBytes);
    host_to_.resize(kCopyBytes);
    host_fill_random(host_from_.data(), kCopyBytes, 7);
    host_fill_random(host_to_.data(), kCopyBytes, 8);
    adam_calls_.resize(r.ops.size());
    host_copies_.resize(r.ops.size());
  }

  ~Replayer() {
    for (auto e : start_) cudaEventDestroy(e);
    for (auto e : end_) cudaEventDestroy(e);
    for (auto e : origin_) cudaEventDestroy(e);
    for (auto s : streams_) cudaStreamDestroy(s);
    for (auto& d : gpus_) {
      cudaSetDevice(d.device);
      if (d.blas) cublasDestroy(d.blas);
      cudaFree(d.a);
      cudaFree(d.b);
      cudaFree(d.c);
      cudaFree(d.from);
      cudaFree(d.to);
      cudaFreeHost(d.pinned);
    }
  }

  const std::string& timing() const {
    return timing_;
  }
  /// GPU pairs without peer access, whose copies the driver stages through host memory; "" when none.
  std::string peer_note() const {
    if (no_peer_.empty()) return "";
    std::string pairs;
    for (const auto& p : no_peer_) pairs += (pairs.empty() ? "" : ", ") + p;
    return "no peer access (" + pairs + "): those GPU-to-GPU copies are staged through host memory";
  }

  /// One run of the whole plan; start/end in ns from the origin, each GPU pool's high-water mark.
  void run(std::vector<std::int64_t>& start, std::vector<std::int64_t>& end,
           std::vector<std::int64_t>& peak) {
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      check(cudaSetDevice(static_cast<int>(g)), "cudaSetDevice");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      std::uint64_t zero = 0;
      check(cudaMemPoolSetAttribute(pools_[g], cudaMemPoolAttrUsedMemHigh, &zero), "cudaMemPoolSetAttribute");
    }
#if defined(PIPESIM_CUPTI_RECORDS)
    if (cupti_) {
      ActivityLog::get().flush();
      ActivityLog::get().clear();
    }
#endif
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      check(cudaSetDevice(static_cast<int>(g)), "cudaSetDevice");
      check(cudaEventRecord(origin_[g], nullptr), "cudaEventRecord");
#if defined(PIPESIM_CUPTI_RECORDS)
      // The origin on the CUPTI clock: a zero-length marker kernel right after the origin event.
      if (cupti_) {
        cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, kOriginTag);
        spin_kernel<<<1, 1>>>(0);
        std::uint64_t ignored = 0;
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &ignored);
      }
#endif
      const std::int64_t resident = g < r_.resident_bytes.size() ? r_.resident_bytes[g] : 0;
      if (resident > 0) allocate(static_cast<int>(g), &resident_[g], resident, nullptr, -1);
    }
    for (std::int32_t id : r_.issue_order) issue(id);
    wait_all();
    start.assign(r_.ops.size(), 0);
    end.assign(r_.ops.size(), 0);
    for (std::size_t i = 0; i < r_.ops.size(); ++i) {
      const auto g = static_cast<std::size_t>(device_of_stream(r_.ops[i].stream));
      float a = 0, b = 0;
      check(cudaEventElapsedTime(&a, origin_[g], start_[i]), "cudaEventElapsedTime");
      check(cudaEventElapsedTime(&b, origin_[g], end_[i]), "cudaEventElapsedTime");
      start[i] = static_cast<std::int64_t>(std::llround(static_cast<double>(a) * 1e6));
      end[i] = std::max(start[i], static_cast<std::int64_t>(std::llround(static_cast<double>(b) * 1e6)));
    }
#if defined(PIPESIM_CUPTI_RECORDS)
    if (cupti_) cupti_times(start, end);
#endif
    peak.assign(gpus_.size(), 0);
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      std::uint64_t high = 0;
      check(cudaMemPoolGetAttribute(pools_[g], cudaMemPoolAttrUsedMemHigh, &high), "cudaMemPoolGetAttribute");
      peak[g] = static_cast<std::int64_t>(high);
      // What the plan left allocated (and the resident state) goes back before the next run.
      check(cudaSetDevice(static_cast<int>(g)), "cudaSetDevice");
      for (const Block& b : live_[g]) check(cudaFreeAsync(b.ptr, nullptr), "cudaFreeAsync");
      live_[g].clear();
      if (resident_[g]) check(cudaFreeAsync(resident_[g], nullptr), "cudaFreeAsync");
      resident_[g] = nullptr;
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }

 private:
  static constexpr std::uint64_t kOriginTag = 0;

#if defined(PIPESIM_CUPTI_RECORDS)
  /// Replaces the event times of ops that launched GPU work by their CUPTI records', on the event origin's
  /// clock (each GPU's origin marker kernel starts at the origin).
  void cupti_times(std::vector<std::int64_t>& start, std::vector<std::int64_t>& end) const {
    ActivityLog& log = ActivityLog::get();
    log.flush();
    const auto spans = log.spans();
    std::map<std::uint32_t, std::uint64_t> origin;  // CUPTI device id -> its marker's start
    for (const auto& [key, span] : spans)
      if (key.first == kOriginTag) origin[key.second] = span.start;
    for (const auto& [key, span] : spans) {
      if (key.first == kOriginTag) continue;
      const auto o = origin.find(key.second);
      if (o == origin.end() || span.start < o->second) continue;  // no marker on that GPU: keep the events
      const auto i = static_cast<std::size_t>(key.first - 1);
      if (i >= start.size()) continue;
      start[i] = static_cast<std::int64_t>(span.start - o->second);
      end[i] = std::max(start[i], static_cast<std::int64_t>(span.end - o->second));
    }
  }
#endif

  /// A stream-ordered allocation from GPU `g`'s pool; an out-of-memory names the op.
  void allocate(int g, void** ptr, std::int64_t bytes, cudaStream_t st, std::int32_t op) {
    check(cudaSetDevice(g), "cudaSetDevice");
    // timed-buffers: the plan's memory effects (what a GPU must hold), never read or written by timed work.
    const cudaError_t e = cudaMallocAsync(ptr, static_cast<std::size_t>(bytes), st);
    if (e != cudaSuccess)
      throw CudaError((op >= 0 ? "op " + std::to_string(op) : std::string("resident state")) + " allocates " +
                      std::to_string(bytes) + " bytes on GPU " + std::to_string(g) + ": " +
                      cudaGetErrorString(e));
  }

  /// The op's allocation before its work.
  void allocate_for(std::int32_t id, int dev, cudaStream_t st) {
    const Op& op = r_.ops[static_cast<std::size_t>(id)];
    if (op.alloc_bytes <= 0 || r_.streams[static_cast<std::size_t>(op.stream)].gpu < 0) return;
    void* p = nullptr;
    allocate(dev, &p, op.alloc_bytes, st, id);
    live_[static_cast<std::size_t>(dev)].push_back({p, op.alloc_bytes});
  }

  /// The op's frees after its work: the GPU's oldest live allocations first (the plan frees what the
  /// earliest microbatch still holds), a block going back once all of it is freed.
  void free_after(std::int32_t id, int dev, cudaStream_t st) {
    const Op& op = r_.ops[static_cast<std::size_t>(id)];
    if (op.free_bytes <= 0 || r_.streams[static_cast<std::size_t>(op.stream)].gpu < 0) return;
    auto& live = live_[static_cast<std::size_t>(dev)];
    for (std::int64_t need = op.free_bytes; need > 0 && !live.empty();) {
      Block& b = live.front();
      const std::int64_t take = std::min(need, b.left);
      b.left -= take;
      need -= take;
      if (b.left == 0) {
        check(cudaFreeAsync(b.ptr, st), "cudaFreeAsync");
        live.pop_front();
      }
    }
  }

  int device_of_stream(int s) const {
    const int g = r_.streams[static_cast<std::size_t>(s)].gpu;
    return g >= 0 ? g : 0;  // host streams order their host functions on GPU 0's runtime
  }

  void issue(std::int32_t id) {
    const Op& op = r_.ops[static_cast<std::size_t>(id)];
    const auto s = static_cast<std::size_t>(op.stream);
    cudaStream_t st = streams_[s];
    const int dev = device_of_stream(op.stream);
    check(cudaSetDevice(dev), "cudaSetDevice");
    for (std::int32_t w : op.waits)
      if (r_.ops[static_cast<std::size_t>(w)].stream != op.stream)
        check(cudaStreamWaitEvent(st, end_[static_cast<std::size_t>(w)], 0), "cudaStreamWaitEvent");
    check(cudaEventRecord(start_[static_cast<std::size_t>(id)], st), "cudaEventRecord");
    allocate_for(id, dev, st);
#if defined(PIPESIM_CUPTI_RECORDS)
    if (cupti_)
      cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                             static_cast<std::uint64_t>(id) + 1);
#endif
    Gpu& gpu = gpus_[static_cast<std::size_t>(dev)];
    switch (op.work) {
      case Work::kFixed:
        spin_kernel<<<1, 1, 0, st>>>(static_cast<long long>(op.fixed_ns));
        check(cudaGetLastError(), "spin kernel");
        break;
      case Work::kCompute: {
        check(cublasSetStream(gpu.blas, st), "cublasSetStream");
        const float one = 1, zero = 0;
        auto gemm = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
          check(cublasGemmEx(gpu.blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n),
                             static_cast<int>(k), &one, gpu.a, CUDA_R_16BF, static_cast<int>(m), gpu.b,
                             CUDA_R_16BF, static_cast<int>(k), &zero, gpu.c, CUDA_R_16BF, static_cast<int>(m),
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx");
        };
        for (const GemmCall& call : gemm_calls(op))
          for (std::int64_t r = 0; r < call.count; ++r) gemm(call.m, call.n, call.k);
        copy_device(gpu, st, op.copy_bytes);
        break;
      }
      case Work::kCopy:
        copy(op, st);
        break;
      case Work::kCpuAdam:
        adam_calls_[static_cast<std::size_t>(id)] = {r_.cpu_adam, op.params, op.threads};
        if (r_.cpu_adam)
          check(cudaLaunchHostFunc(st, run_adam, &adam_calls_[static_cast<std::size_t>(id)]),
                "cudaLaunchHostFunc");
        break;
      case Work::kNone:
        break;
    }
#if defined(PIPESIM_CUPTI_RECORDS)
    if (cupti_) {
      std::uint64_t ignored = 0;
      cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &ignored);
    }
#endif
    free_after(id, dev, st);
    check(cudaEventRecord(end_[static_cast<std::size_t>(id)], st), "cudaEventRecord");
  }

  void copy_device(Gpu& gpu, cudaStream_t st, std::int64_t bytes) {
    for (std::int64_t left = bytes; left > 0;) {
      const auto n =
          static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(kCopyBytes)));
      check(cudaMemcpyAsync(gpu.to, gpu.from, n, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
      left -= static_cast<std::int64_t>(n);
    }
  }

  void copy(const Op& op, cudaStream_t st) {
    const bool src_gpu = op.src_gpu >= 0, dst_gpu = op.dst_gpu >= 0;
    for (std::int64_t left = op.copy_bytes; left > 0;) {
      const auto n =
          static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(kCopyBytes)));
      if (src_gpu && dst_gpu) {
        Gpu &a = gpus_[static_cast<std::size_t>(op.src_gpu)],
            &b = gpus_[static_cast<std::size_t>(op.dst_gpu)];
        if (op.src_gpu == op.dst_gpu)
          check(cudaMemcpyAsync(b.to, a.from, n, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
        else
          check(cudaMemcpyPeerAsync(b.to, b.device, a.from, a.device, n, st), "cudaMemcpyPeerAsync");
      } else if (dst_gpu) {
        Gpu& b = gpus_[static_cast<std::size_t>(op.dst_gpu)];
        check(cudaMemcpyAsync(b.to, b.pinned, n, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync H2D");
      } else if (src_gpu) {
        Gpu& a = gpus_[static_cast<std::size_t>(op.src_gpu)];
        check(cudaMemcpyAsync(a.pinned, a.from, n, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync D2H");
      }
      left -= static_cast<std::int64_t>(n);
    }
    if (!src_gpu && !dst_gpu && op.copy_bytes > 0) {  // host memory <-> NVMe or host: a host copy in order
      const auto i = static_cast<std::size_t>(&op - r_.ops.data());
      host_copies_[i] = {op.copy_bytes, &host_from_, &host_to_};
      check(cudaLaunchHostFunc(st, run_host_copy, &host_copies_[i]), "cudaLaunchHostFunc");
    }
  }

  /// Waits for every op's end event, failing after the timeout without progress.
  void wait_all() {
    std::size_t done = 0;
    auto last = std::chrono::steady_clock::now();
    while (done < end_.size()) {
      const cudaError_t e = cudaEventQuery(end_[done]);
      if (e == cudaSuccess) {
        ++done;
        last = std::chrono::steady_clock::now();
        continue;
      }
      if (e != cudaErrorNotReady) check(e, "cudaEventQuery");
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - last).count() > r_.timeout_s)
        throw CudaError("op " + std::to_string(done) + " did not finish within " +
                        std::to_string(r_.timeout_s) + " s");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  const Request& r_;
  std::vector<Gpu> gpus_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> start_, end_, origin_;
  std::vector<AdamCall> adam_calls_;
  std::vector<HostCopy> host_copies_;
  std::vector<char> host_from_, host_to_;
  std::vector<cudaMemPool_t> pools_;
  std::vector<std::deque<Block>> live_;  // per GPU: the plan's allocations not yet freed, oldest first
  std::vector<void*> resident_;          // per GPU: the resident state's allocation
  bool cupti_ = false;
  std::string timing_;
  std::vector<std::string> no_peer_;  // "src->dst" GPU pairs without peer access
};

/// CUDA's version numbers (1000 x major + 10 x minor) as "13.0".
std::string cuda_version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string describe_devices(int gpus) {
  std::string out;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  for (int g = 0; g < gpus; ++g) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, g) == cudaSuccess) out += (g ? ", " : "") + std::string(p.name);
  }
  return out + " (driver for CUDA " + cuda_version(driver) + ", runtime " + cuda_version(runtime) + ")";
}

}  // namespace

}  // namespace pipesim::replay::cuda_abi

extern "C" void pipesim_cuda_replay_entry(const pipesim::replay::cuda_abi::Request* request,
                                          pipesim::replay::cuda_abi::Outcome* out) {
  using namespace pipesim::replay::cuda_abi;
  try {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      out->why_not =
          e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
      return;
    }
    Replayer replayer(*request);
    out->device = describe_devices(std::max(1, request->gpus));
    std::vector<std::int64_t> start, end, peak;
    replayer.run(start, end, peak);  // warm-up: cuBLAS heuristics, first touches, the pools' first growth
    for (int k = 0; k < request->iterations; ++k) {
      replayer.run(start, end, peak);
      out->start.push_back(start);
      out->end.push_back(end);
      out->peak_bytes.push_back(peak);
    }
    out->timing = replayer.timing();
    if (const std::string note = replayer.peer_note(); !note.empty()) out->device += "; " + note;
    out->ran = true;
  } catch (const std::exception& ex) {
    out->why_not = ex.what();
    out->start.clear();
    out->end.clear();
    out->peak_bytes.clear();
  }
}
