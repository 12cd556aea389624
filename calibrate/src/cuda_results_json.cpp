#include <nlohmann/json.hpp>

#include "pipesim/calibrate/cuda_calibration.hpp"
#include "pipesim/sim/core/json_text.hpp"

namespace pipesim::calibrate {

namespace {
nlohmann::ordered_json copies(const std::vector<CopyPoint>& v) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& p : v)
    a.push_back({{"bytes", p.bytes}, {"GBps", p.GBps}, {"cv", p.cv}, {"samples", p.samples}});
  return a;
}
}  // namespace

std::string cuda_calibration_to_json(const CudaCalibration& c) {
  nlohmann::ordered_json j;
  j["ran"] = c.ran;
  if (!c.ran) j["why_not"] = c.why_not;
  j["device_count"] = c.device_count;
  j["gpu_model"] = c.gpu_model;
  j["memory_bytes"] = c.memory_bytes;
  j["driver_version"] = c.driver_version;
  j["runtime_version"] = c.runtime_version;
  j["method"] =
      "warm-up, CUDA-event timing of a loop, median of samples (nvbandwidth style); random operands from a "
      "fixed seed in every timed buffer";
  j["samples"] = c.samples;
  j["h2d_pinned"] = copies(c.h2d_pinned);
  j["d2h_pinned"] = copies(c.d2h_pinned);
  j["h2d_pageable"] = copies(c.h2d_pageable);
  j["d2h_pageable"] = copies(c.d2h_pageable);
  j["bidirectional_h2d"] = copies(c.bidir_h2d);
  j["bidirectional_d2h"] = copies(c.bidir_d2h);
  j["all_gpus_h2d_GBps"] = c.all_gpus_h2d_GBps;
  j["p2p_GBps"] = c.p2p_GBps;
  auto g = nlohmann::ordered_json::array();
  for (const auto& p : c.gemm)
    g.push_back({{"shape", p.shape},
                 {"m", p.m},
                 {"n", p.n},
                 {"k", p.k},
                 {"dtype", p.dtype},
                 {"tflops", p.tflops},
                 {"cv", p.cv},
                 {"samples", p.samples}});
  j["gemm"] = std::move(g);
  j["l2_bytes"] = c.l2_bytes;
  auto st = nlohmann::ordered_json::array();
  for (const auto& p : c.streaming)
    st.push_back(
        {{"kernel", p.kernel}, {"bytes", p.bytes}, {"GBps", p.GBps}, {"cv", p.cv}, {"samples", p.samples}});
  j["streaming"] = std::move(st);
  j["launch_overhead_us"] = c.launch_overhead_us;
  j["host_launch_us"] = c.host_launch_us;
  j["event_resolution_us"] = c.event_resolution_us;
  j["pinned_alloc_ms_per_GiB"] = c.pinned_alloc_ms_per_GiB;
  j["collectives_note"] = c.collectives_note;
  auto co = nlohmann::ordered_json::array();
  for (const auto& p : c.collectives)
    co.push_back({{"op", p.op},
                  {"bytes", p.bytes},
                  {"ranks", p.ranks},
                  {"algbw_GBps", p.algbw_GBps},
                  {"busbw_GBps", p.busbw_GBps},
                  {"cv", p.cv},
                  {"samples", p.samples}});
  j["collectives"] = std::move(co);
  return pipesim::sim::json_text(j, 2);
}

}  // namespace pipesim::calibrate
