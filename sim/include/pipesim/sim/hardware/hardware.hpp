// Hardware profile: what one node of a cluster can do (GPU, PCIe tree, NVLink, host, network).
// Loaded from versioned, strict JSON (`"format": "pipesim-hw"`); every figure carries its source.
// The simulator derives link capacities, compute rates and optimizer rates from it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/hardware/attention_kernels.hpp"

namespace pipesim::sim {

/// One point of a piecewise curve; curves are interpolated log-linearly in x and clamped at the ends.
struct CurvePoint {
  double x = 0;
  double y = 0;
};

/// Interpolates y at x on a curve sorted by x (log-x interpolation, clamped).
double interpolate_log_x(const std::vector<CurvePoint>& curve, double x);

struct GpuSpec {
  std::string model;
  std::map<std::string, double> peak_tflops;  ///< dense TFLOP/s per dtype ("bf16", "fp16", "fp32", "fp8")
  std::int64_t hbm_bytes = 0;
  double hbm_GBps = 0;
  /// Share of hbm_GBps that streaming kernels (norms, activations, softmax, optimizer) achieve; 1 when the
  /// profile does not say.
  double hbm_efficiency = 1.0;
  /// Share of hbm_GBps that unfused attention's kernels over the s^2 scores (the score GEMMs writing and
  /// reading them, softmax, mask, dropout) achieve; 0: hbm_efficiency.
  double unfused_attention_efficiency = 0;
  /// How much longer compute kernels take while a collective runs on the same GPU (its kernels hold SMs
  /// and memory bandwidth): 0.19 = 19 % longer. 0: overlap is free.
  double collective_compute_slowdown = 0;
  Duration launch_overhead = 0;  ///< per kernel launch (`launch_overhead_us` in the file)
  /// GEMM efficiency (fraction of peak) against the work of one GEMM in GFLOP.
  std::vector<CurvePoint> gemm_efficiency;  ///< x = gemm_gflop, y = efficiency
  /// A dtype's own GEMM efficiency against its own peak, where it was measured apart: FP8 GEMMs do twice
  /// the work of bf16's per clock and run into the board's power limit sooner, so they reach a smaller share
  /// of their peak. A dtype not here uses gemm_efficiency.
  std::map<std::string, std::vector<CurvePoint>> gemm_efficiency_by_dtype;
  double board_W = 0;  ///< rated board power (TDP), for energy estimates and power limits; 0: unknown
  /// k in P ∝ f^k: how the compute clock this GPU sustains follows the board power it may draw
  /// (power_limit.hpp); 0: unknown, and no power limit can be priced.
  double power_clock_exponent = 0;
  /// The board power the GPUs are held to, below board_W; 0: none. Compute-bound kernels (GEMMs, fused
  /// attention) run at compute_clock_share() of their rated rate; memory-bound ones keep theirs.
  double power_limit_W = 0;
  /// The compute clock under power_limit_W as a share of the rated one (1 without a limit).
  double compute_clock_share() const;
  /// What a training process holds on the GPU beyond its tensors (the CUDA context, cuBLAS's handle and
  /// workspace, NCCL's first communicator), measured; the tensors fit in hbm_bytes less this. 0: not
  /// measured.
  std::int64_t runtime_reserved_bytes = 0;
  /// Coefficient of variation of one GPU's speed across GPUs of this model (manufacturing and power
  /// management): a job waits for its slowest GPU (stragglers.hpp). 0: every GPU runs at the profile's rates.
  double speed_cv = 0;
  /// Published rates of fused attention kernels by name (see attention_kernels.hpp); each carries its source.
  std::map<std::string, AttentionKernelRates> attention_kernels;
  /// GEMMs with a dimension that is not a multiple of 8 elements (16 bytes of bf16: an odd vocabulary such as
  /// GPT-2's 50,257) run on cuBLAS's alignment-1 kernels (`cutlass_75_..._align1`, mma.sync without TMA),
  /// measured here rather than on the GEMM curve; 0: not measured, the GEMM curve.
  KernelRate unaligned_gemm{};
  std::map<std::string, std::string> sources;
};

/// The GPUs' link to the host: PCIe through switches, or a coherent chip-to-chip link (NVLink-C2C on Grace
/// superchips), described with the same figures (a "switch" is then a CPU with the GPUs attached to it).
struct PcieSpec {
  std::string link = "pcie";     ///< pcie | nvlink-c2c
  int gen = 4;                   ///< PCIe generation (0 for nvlink-c2c)
  double lane_GBps = 0;          ///< per direction, GPU <-> its switch (x16)
  double uplink_GBps = 0;        ///< per direction, switch <-> root complex, shared by the GPUs under it
  double root_complex_GBps = 0;  ///< per direction, all host<->GPU traffic of the node; 0: not a bottleneck
  Duration latency = 0;          ///< `latency_us` in the file
  std::vector<std::vector<int>> switches;  ///< GPU indices under each switch uplink
  /// False where the driver disables peer-to-peer copies (GeForce): GPU-to-GPU traffic that NVLink does not
  /// carry is staged through host memory, crossing the root complex both ways.
  bool peer_to_peer = true;
  /// Without peer-to-peer: NCCL's measured all-reduce bus bandwidth through host memory at large messages
  /// (nccl-tests), which caps each GPU's staged traffic; 0: host memory alone bounds it (staged_GBps).
  double staged_busbw_GBps = 0;
  /// Achieved pinned copy bandwidth against transfer size (x = bytes, y = GB/s), when calibrated.
  std::vector<CurvePoint> h2d_GBps_by_size;
  std::vector<CurvePoint> d2h_GBps_by_size;
  std::map<std::string, std::string> sources;
};

struct NvlinkSpec {
  double GBps_per_direction = 0;    ///< 0: no NVLink, GPU-to-GPU traffic goes over PCIe
  Duration latency = 0;             ///< `latency_us` in the file
  double allreduce_busbw_GBps = 0;  ///< achieved NCCL bus bandwidth inside the node
  /// Achieved all-reduce bus bandwidth against the message size (x = bytes, y = GB/s), as nccl-tests report
  /// it; when present it replaces the flat figure (small messages are latency-bound).
  std::vector<CurvePoint> allreduce_busbw_by_size;
  /// GPUs joined by NVLink (e.g. bridged pairs); empty: all GPUs of the node when the rate is > 0.
  std::vector<std::vector<int>> groups;
  /// Consecutive nodes whose GPUs share one NVLink switch fabric (GB200 NVL72: 18 trays of 4 GPUs): traffic
  /// between their GPUs takes NVLink, not the network, and tensor parallelism may span them. 1: the node.
  int domain_nodes = 1;
  /// What NCCL builds on these GPUs, which sets the device memory each communicator holds
  /// (nccl_memory.hpp): its collective channels (`nccl_channels`), its send/receive channels to one peer
  /// (`nccl_p2p_channels_per_peer`) and whether NVSwitch multicast (NVLS) runs. 0: not stated, no
  /// communicator memory counted.
  int nccl_channels = 0;
  int nccl_p2p_channels_per_peer = 0;
  bool nvls = false;
  std::map<std::string, std::string> sources;
};

struct NodeSpec {
  int gpus = 0;
  PcieSpec pcie;
  NvlinkSpec nvlink;
};

/// The node's NVMe drives (RAID-0 as one volume): the tier ZeRO-Infinity offloads to. Absent: bytes == 0.
struct NvmeSpec {
  std::int64_t bytes = 0;
  double read_GBps = 0, write_GBps = 0;  ///< sequential, the whole volume
  Duration latency = 0;                  ///< `latency_us` in the file
  std::map<std::string, std::string> sources;
};

struct HostSpec {
  std::string cpu_model;
  int cores = 0;
  std::int64_t dram_bytes = 0;
  double dram_GBps = 0;
  std::vector<CurvePoint> adam_params_per_s_by_threads;  ///< x = threads, y = params/s
  NvmeSpec nvme;
  std::map<std::string, std::string> sources;
};

/// The cluster's network: one NIC per GPU (its rail), the rails of `leaf_nodes` nodes under one leaf switch
/// each (a rail-optimised scalable unit) and the leaves joined by a spine tier. Traffic between nodes under
/// different leaves crosses two more switches and the leaves' uplinks, which carry 1/oversubscription of what
/// the leaf's NICs can send.
struct NetworkSpec {
  double nic_GBps = 0;          ///< per GPU, per direction
  Duration latency = 0;         ///< `latency_us` in the file: one hop through a leaf switch
  std::int32_t leaf_nodes = 0;  ///< nodes under one leaf; 0: every node under one switch
  double oversubscription = 1;  ///< a leaf's NIC-side capacity over its spine-side capacity (>= 1)
  Duration switch_latency = 0;  ///< `switch_latency_us`: each further switch a packet crosses
  /// Measured bus bandwidth of collectives over every GPU of N nodes at one message size (x = nodes, y =
  /// GB/s), by kind (all-reduce, all-gather, reduce-scatter as CollectiveKind); empty where not measured.
  /// Collectives across nodes then reach the NIC rate that reproduces it (nccl_tuning.hpp: network_nic_GBps).
  std::array<std::vector<CurvePoint>, 3> busbw_by_nodes;
  std::int64_t busbw_message_bytes = 0;  ///< the message size of busbw_by_nodes
  /// A collective's latency a network step by NCCL protocol (LL, LL128, Simple), where the network's NCCL
  /// plugin models its own (AWS EFA); all 0: NCCL's InfiniBand figures.
  std::array<double, 3> step_latency_us{};
  const std::array<double, 3>* step_latency() const {
    return step_latency_us[2] > 0 ? &step_latency_us : nullptr;
  }
  /// `plugin_latency_us`: the latency the network's NCCL plugin reports to NCCL for a network transfer
  /// (ncclNetProperties_t latency), which NCCL's own tuning adds to each network step, twice with Simple; 0
  /// for NCCL's InfiniBand transport, which reports none.
  double reported_latency_us = 0;
  /// Whether nodes `a` and `b` sit under different leaves.
  bool crosses_spine(std::int32_t a, std::int32_t b) const {
    return leaf_nodes > 0 && a / leaf_nodes != b / leaf_nodes;
  }
  std::map<std::string, std::string> sources;
};

struct HardwareProfile {
  std::string name;
  std::string description;
  double gpu_hour_usd = 0;
  GpuSpec gpu;
  NodeSpec node;
  HostSpec host;
  NetworkSpec network;
  std::string calibrated_json;  ///< provenance written by `pipesim calibrate` (a JSON object), kept verbatim
  std::string origin;           ///< file it was read from (for messages); not serialized

  /// NVLink group of a GPU, or -1 when its peer traffic goes over PCIe.
  int nvlink_group(int gpu_index) const;
  /// True when GPUs on these two nodes reach each other over NVLink (one node, or one NVLink domain).
  bool nvlink_domain_shared(int node_a, int node_b) const;
  /// GPUs one tensor-parallel group may span: a node, or the NVLink domain of several nodes.
  int tp_domain_gpus() const;
  /// Why `tp` cannot run on this hardware (a TP group stays inside a node, or inside an NVLink domain in
  /// whole nodes), or "" when it can.
  std::string tp_placement_error(int tp) const;
  /// GPUs of each NVLink domain that TP groups of `tp` occupy: whole groups only (tp 16 on a 72-GPU domain
  /// uses 64 and leaves 8 idle); the whole domain when tp divides it.
  int tp_domain_used_gpus(int tp) const;
  /// Cluster slot (node x GPUs per node + index) of job rank `rank` when ranks fill each NVLink domain's
  /// used GPUs in order (ranks are numbered TP-fastest, so TP groups never straddle domains).
  std::int64_t gpu_slot(std::int64_t rank, int tp) const;

  /// Without peer-to-peer, the rate of one GPU's traffic to another GPU of its node, which NCCL stages in a
  /// bounce buffer in host memory on the receiver's side (src/transport/shm.cc, SHM_LOCALITY receive side):
  /// every byte is written to host memory and read back, so `senders` GPUs staging at once share its
  /// bandwidth at two crossings a byte; the measured bus bandwidth through host memory, where the profile has
  /// one, caps it further. GB/s.
  double staged_GBps(int senders) const;

  double peak_flops(const std::string& dtype) const;  ///< FLOP/s
  /// The GEMM efficiency curve of `dtype`: its own where the profile has one, else gemm_efficiency.
  const std::vector<CurvePoint>& gemm_curve(const std::string& dtype) const;
  /// GPU memory for a job's tensors: hbm_bytes less what the runtime holds (runtime_reserved_bytes).
  std::int64_t gpu_tensor_capacity() const { return gpu.hbm_bytes - gpu.runtime_reserved_bytes; }
  /// GPU time of `flops` in GEMMs of `gemm_gflop` each, plus `kernels` launches (ns, rounded up).
  std::int64_t compute_ns(double flops, double gemm_gflop, std::int32_t kernels,
                          const std::string& dtype) const;
  double adam_params_per_s(int threads) const;
  /// GPU time of a compute op: its dense GEMMs at `gemm_gflop`'s efficiency, the MoE expert share at its
  /// grouped GEMM's efficiency or by the expert weight bytes it streams (whichever is longer), the kernel
  /// launches and the memory-bound bytes.
  std::int64_t op_ns(double flops, double gemm_gflop, std::int32_t kernels, const std::string& dtype,
                     std::int64_t mem_bytes, double expert_flops = 0, double expert_gemm_gflop = 0,
                     std::int64_t expert_weight_bytes = 0, double attention_flops = 0,
                     std::int64_t attention_bytes = 0, double wide_flops = 0, std::int64_t score_bytes = 0,
                     double rated_flops = 0, double rated_tflops = 0) const;
  /// The 16-bit dtype of the profile (bf16 where the GPU has it, else fp16): what an FP8 recipe keeps for
  /// attention and the output head.
  const std::string& sixteen_bit_dtype() const;
  /// GPU time of a memory-bound kernel moving `bytes` to and from HBM (ns, rounded up).
  std::int64_t memory_ns(std::int64_t bytes) const;
  /// The same for unfused attention's kernels over the scores (unfused_attention_efficiency).
  std::int64_t score_memory_ns(std::int64_t bytes) const;
};

/// Parses a profile from JSON text; `file` names the source in error messages.
HardwareProfile parse_hardware_profile(const std::string& json_text, const std::string& file);
/// Loads a shipped profile by name (hw_profiles/NAME.json) or a file path.
HardwareProfile load_hardware_profile(const std::string& name_or_path);
/// Serializes a profile back to JSON text (lossless for the fields above).
std::string hardware_profile_to_json(const HardwareProfile& hw);
/// Names of the shipped profiles, sorted.
std::vector<std::string> shipped_hardware_profiles();

}  // namespace pipesim::sim
