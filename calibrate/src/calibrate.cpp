#include "pipesim/calibrate/calibrate.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesim/calibrate/cpu_benchmarks.hpp"
#include "pipesim/calibrate/cuda_calibration.hpp"
#include "pipesim/calibrate/curve_fit.hpp"
#include "pipesim/calibrate/host_info.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/output_file.hpp"

namespace pipesim::calibrate {

namespace {

using json = nlohmann::ordered_json;

/// Collects every repetition's rate counter per benchmark and prints one progress line per benchmark.
class CaptureReporter : public benchmark::BenchmarkReporter {
 public:
  CaptureReporter(std::ostream& progress, int total) : progress_(progress), total_(total) {}
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    bool measured = false;
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      const std::string& name = r.run_name.function_name;
      auto rate = [&](const char* key) {
        auto it = r.counters.find(key);
        return it == r.counters.end() ? 0.0 : static_cast<double>(it->second);
      };
      bool adam = name.rfind("cpu_adam", 0) == 0;
      samples_[name].push_back(adam ? rate("items_per_second") : rate("bytes_per_second"));
      measured = true;
    }
    if (!measured) return;  // the aggregates of a benchmark arrive in a call of their own
    const std::string& name = runs.front().run_name.function_name;
    SampleStats s = summarize(samples_[name]);
    bool adam = name.rfind("cpu_adam", 0) == 0;
    progress_ << fmt::format("calibrate: [{}/{}] {}: {:.3f} {} (cv {:.1f}%, {} samples)\n", ++done_, total_,
                             name, s.median / 1e9, adam ? "G params/s" : "GB/s", 100 * s.cv, s.samples)
              << std::flush;
  }
  SampleStats stats(const std::string& name) const {
    auto it = samples_.find(name);
    return it == samples_.end() ? SampleStats{} : summarize(it->second);
  }

 private:
  std::ostream& progress_;
  int total_;
  int done_ = 0;
  std::map<std::string, std::vector<double>> samples_;
};

std::vector<sim::CurvePoint> monotone_curve(std::vector<std::pair<double, double>> pts, double cap) {
  std::sort(pts.begin(), pts.end());
  std::vector<double> xs, ys;
  for (auto [x, y] : pts) {
    if (!xs.empty() && x == xs.back()) {
      ys.back() = std::max(ys.back(), y);  // the best measured kernel for one work size
      continue;
    }
    xs.push_back(x);
    ys.push_back(y);
  }
  ys = isotonic_non_decreasing(ys);
  std::vector<sim::CurvePoint> out;
  for (std::size_t i = 0; i < xs.size(); ++i) out.push_back({xs[i], std::min(ys[i], cap)});
  return out;
}

/// The GPU's identity and GEMM efficiency; a measured GEMM above the base peak raises the peak.
void merge_gpu(const CudaCalibration& c, sim::HardwareProfile& hw, const std::string& source, json& cv,
               std::vector<std::string>& notes) {
  auto& g = hw.gpu;
  g.model = c.gpu_model;
  g.hbm_bytes = c.memory_bytes;
  g.launch_overhead = sim::duration_from_us(c.launch_overhead_us);
  for (const char* k : {"model", "hbm_bytes", "launch_overhead_us"}) g.sources[k] = source;
  const std::string dtype = g.peak_tflops.count("bf16") ? "bf16" : "fp16";
  double best = 0;
  for (const auto& p : c.gemm)
    if (p.dtype == dtype) best = std::max(best, p.tflops);
  double peak = g.peak_tflops[dtype];
  if (best > peak) {
    notes.push_back(fmt::format("measured {:.1f} TFLOP/s {} exceeds the base peak {:.1f}; peak raised to it",
                                best, dtype, peak));
    g.peak_tflops[dtype] = peak = best;
    g.sources["peak_tflops"] = source + " (raised to the best measured GEMM)";
  }
  std::vector<std::pair<double, double>> eff;
  for (const auto& p : c.gemm) {
    if (p.dtype != dtype) continue;
    eff.push_back({2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) / 1e9,
                   p.tflops / peak});
    cv[fmt::format("gemm/{}/{}/m{}", p.dtype, p.shape, p.m)] = p.cv;
  }
  if (!eff.empty()) {
    g.gemm_efficiency = monotone_curve(eff, 1.0);
    g.sources["gemm_efficiency"] =
        source + " (cuBLAS GemmEx " + dtype + ", fp32 accumulate, transformer shapes; isotonic in work)";
  }
}

/// Host-device copy speeds by size; with the base's GPU count, also the shared switch and root-complex
/// limits (a different count leaves the base's switch layout meaningless).
void merge_pcie(const CudaCalibration& c, sim::HardwareProfile& hw, const std::string& source, json& cv,
                std::vector<std::string>& notes) {
  auto& pcie = hw.node.pcie;
  auto curve = [&](const std::vector<CopyPoint>& pts, const char* key) {
    std::vector<std::pair<double, double>> v;
    for (const auto& p : pts) {
      v.push_back({static_cast<double>(p.bytes), p.GBps});
      cv[fmt::format("{}/{}", key, p.bytes)] = p.cv;
    }
    return monotone_curve(v, 1e5);
  };
  if (!c.h2d_pinned.empty()) {
    pcie.h2d_GBps_by_size = curve(c.h2d_pinned, "h2d_pinned");
    pcie.d2h_GBps_by_size = curve(c.d2h_pinned, "d2h_pinned");
    pcie.lane_GBps = std::max(pcie.h2d_GBps_by_size.back().y, pcie.d2h_GBps_by_size.back().y);
    for (const char* k : {"h2d_GBps_by_size", "d2h_GBps_by_size", "lane_GBps"}) pcie.sources[k] = source;
  }
  if (c.device_count != hw.node.gpus) {
    notes.push_back(fmt::format("{} GPUs here, {} in the base: one PCIe switch per GPU assumed",
                                c.device_count, hw.node.gpus));
    hw.node.gpus = c.device_count;
    pcie.switches.clear();
    for (int i = 0; i < c.device_count; ++i) pcie.switches.push_back({i});
    pcie.sources["switches"] = source + " (GPU count; sharing not inferred)";
    hw.node.nvlink.groups.clear();
  } else if (!c.all_gpus_h2d_GBps.empty()) {
    // A switch uplink carries at most what its GPUs reached together when all copied at once.
    double uplink = pcie.lane_GBps;
    for (const auto& sw : pcie.switches) {
      if (sw.size() < 2) continue;
      double sum = 0;
      for (int gi : sw) sum += c.all_gpus_h2d_GBps[static_cast<std::size_t>(gi)];
      uplink = std::min(uplink, sum);
    }
    pcie.uplink_GBps = uplink;
    pcie.sources["uplink_GBps"] = source + " (all GPUs copying at once, summed per switch)";
    // When all GPUs together reach clearly less than their uplinks allow, the root complex is the limit.
    double total = 0, uplinks = 0;
    for (double r : c.all_gpus_h2d_GBps) total += r;
    for (const auto& sw : pcie.switches)
      uplinks += std::min(pcie.uplink_GBps, pcie.lane_GBps * static_cast<double>(sw.size()));
    if (total < 0.9 * uplinks) {
      pcie.root_complex_GBps = total;
      pcie.sources["root_complex_GBps"] = source + " (all GPUs copying at once, summed)";
    }
  }
}

/// NVLink: GPU pairs whose P2P copies run well above PCIe speed (so after merge_pcie set the lane speed).
void merge_nvlink(const CudaCalibration& c, sim::HardwareProfile& hw, const std::string& source) {
  const auto& pcie = hw.node.pcie;
  const auto n = c.p2p_GBps.size();
  std::vector<int> group(n, -1);
  std::vector<double> fast;
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b)
      if (a != b && c.p2p_GBps[a][b] > 1.5 * pcie.lane_GBps) {
        fast.push_back(c.p2p_GBps[a][b]);
        int ga = group[a] >= 0 ? group[a] : static_cast<int>(a);
        int gb = group[b] >= 0 ? group[b] : static_cast<int>(b);
        int root = std::min(ga, gb);
        for (auto& x : group)
          if (x == ga || x == gb) x = root;
        group[a] = group[b] = root;
      }
  auto& nv = hw.node.nvlink;
  if (n > 1) {
    if (fast.empty()) {
      nv.GBps_per_direction = 0;
      nv.groups.clear();
    } else {
      std::sort(fast.begin(), fast.end());
      nv.GBps_per_direction = fast[fast.size() / 2];
      std::map<int, std::vector<int>> members;
      for (std::size_t i = 0; i < n; ++i)
        if (group[i] >= 0) members[group[i]].push_back(static_cast<int>(i));
      nv.groups.clear();
      if (members.size() != 1 || members.begin()->second.size() != n)
        for (auto& [root, m] : members) nv.groups.push_back(m);
      if (!nv.groups.empty()) nv.sources["groups"] = source + " (P2P matrix)";
    }
    nv.sources["GBps_per_direction"] = source + " (median P2P copy between NVLink-connected GPUs)";
  }
}

void merge_cuda(const CudaCalibration& c, sim::HardwareProfile& hw, const std::string& source, json& cv,
                std::vector<std::string>& notes) {
  merge_gpu(c, hw, source, cv, notes);
  merge_pcie(c, hw, source, cv, notes);
  merge_nvlink(c, hw, source);
}

/// Adam over thread counts, STREAM copy and triad; quick runs use smaller arrays and fewer repetitions.
CpuBenchOptions cpu_bench_options(const HostInfo& host, bool quick) {
  CpuBenchOptions cpu;
  cpu.threads = default_thread_counts(host.cores, quick);
  if (quick) {
    cpu.adam_params = 8u << 20;
    cpu.stream_elements = 8u << 20;
    cpu.repetitions = 3;
    cpu.min_time_s = 0.05;
  }
  return cpu;
}

/// Google Benchmark writes its raw results to `raw_tmp` itself.
void initialize_benchmark(const std::string& raw_tmp) {
  std::string out_flag = "--benchmark_out=" + raw_tmp;
  std::string fmt_flag = "--benchmark_out_format=json";
  std::vector<char*> args = {const_cast<char*>("pipesim-calibrate"), out_flag.data(), fmt_flag.data()};
  int argc = static_cast<int>(args.size());
  benchmark::Initialize(&argc, args.data());
}

/// Runs the registered benchmarks, then moves the complete raw results from `raw_tmp` to `raw_path`.
void run_benchmarks(CaptureReporter& capture, const std::string& raw_tmp, const std::string& raw_path) {
  benchmark::RunSpecifiedBenchmarks(&capture);
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::rename(raw_tmp, raw_path, ec);
  if (ec) throw sim::InputError(raw_path, "", "cannot write this file: " + ec.message());
}

/// The host's figures: DRAM bandwidth from the best STREAM-style kernel, Adam's rate per thread count.
void merge_cpu(const CpuBenchOptions& cpu, const CaptureReporter& capture, const HostInfo& host,
               const std::string& source, sim::HardwareProfile& hw, json& cv) {
  std::vector<std::pair<double, double>> adam;
  double best_stream = 0;
  std::string best_stream_name;
  for (int t : cpu.threads) {
    std::string name = fmt::format("cpu_adam/bf16/{}/threads:{}", to_string(cpu.isa), t);
    SampleStats s = capture.stats(name);
    adam.push_back({static_cast<double>(t), s.median});
    cv[name] = s.cv;
    for (const char* k : {"stream_copy", "stream_triad", "stream_update"}) {
      const std::string bench = fmt::format("{}/threads:{}", k, t);
      SampleStats b = capture.stats(bench);
      cv[bench] = b.cv;
      if (b.median > best_stream) best_stream = b.median, best_stream_name = bench;
    }
  }
  auto& h = hw.host;
  h.cpu_model = host.cpu_model;
  h.cores = host.cores;
  h.dram_bytes = host.dram_bytes;
  h.dram_GBps = best_stream / 1e9;
  h.adam_params_per_s_by_threads.clear();
  for (auto [t, r] : adam) h.adam_params_per_s_by_threads.push_back({t, r});
  for (const char* k : {"cpu_model", "cores", "dram_bytes"}) h.sources[k] = source;
  h.sources["dram_GBps"] =
      source + fmt::format(" (best STREAM-style kernel: {}, median of repetitions)", best_stream_name);
  h.sources["adam_params_per_s_by_threads"] =
      source + fmt::format(" (CPU AdamW, {} , bf16 gradients, {} M params, median of repetitions)",
                           to_string(cpu.isa), cpu.adam_params >> 20);
}

/// The CUDA benchmarks' results; when they did not run, why is added to `skipped`.
CudaCalibration measure_cuda(const CalibrateOptions& o, std::ostream& progress,
                             std::vector<std::string>& skipped) {
  CudaCalibration cuda;
  if (o.cpu_only) {
    skipped.push_back("CUDA benchmarks: skipped by --cpu-only");
  } else {
    cuda = run_cuda_calibration(CudaOptions{o.quick, o.quick ? 3 : 7}, [&](const std::string& line) {
      progress << "calibrate: cuda: " << line << "\n" << std::flush;
    });
    if (!cuda.ran) skipped.push_back("CUDA benchmarks: " + cuda.why_not);
  }
  return cuda;
}

/// Where the calibrated figures came from, kept in the profile.
json provenance(const CalibrateOptions& o, const HostInfo& host, const CudaCalibration& cuda,
                const std::string& base_name, const CpuBenchOptions& cpu, const json& cv,
                const std::vector<std::string>& notes, const CalibrateReport& report) {
  namespace fs = std::filesystem;
  return {{"date", host.date_utc},
          {"host", host.hostname},
          {"cpu_model", host.cpu_model},
          {"gpu_model", cuda.ran ? cuda.gpu_model : ""},
          {"driver", cuda.ran ? cuda.driver_version : ""},
          {"cuda_runtime", cuda.ran ? cuda.runtime_version : ""},
          {"base", base_name},
          {"quick", o.quick},
          {"method",
           "Google Benchmark (real time, median of repetitions) for CPU; CUDA events around a loop "
           "after warm-up, median of samples (nvbandwidth style) for GPU"},
          {"samples", {{"cpu", cpu.repetitions}, {"cuda", cuda.ran ? cuda.samples : 0}}},
          {"cv", cv},
          {"skipped", report.skipped},
          {"notes", notes},
          {"raw", report.cuda_raw_path.empty()
                      ? json::array({fs::path(report.cpu_raw_path).filename().string()})
                      : json::array({fs::path(report.cpu_raw_path).filename().string(),
                                     fs::path(report.cuda_raw_path).filename().string()})}};
}

}  // namespace

CalibrateReport run_calibration(const CalibrateOptions& o, std::ostream& progress) {
  namespace fs = std::filesystem;
  if (o.out.empty())
    throw sim::InputError(
        sim::Option{"out"}, "",
        "missing; give the profile file to write, e.g. " + sim::spelled(sim::Option{"out"}) + " mine.json");
  sim::HardwareProfile hw = sim::load_hardware_profile(o.base);
  const std::string base_name = hw.name;
  fs::path out(o.out);
  if (out.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(out.parent_path(), ec);
  }
  { sim::OutputFile probe(o.out); }  // fail before measuring when the profile could not be written
  const std::string stem = (out.parent_path() / out.stem()).string();
  CalibrateReport report;
  report.cpu_raw_path = stem + ".cpu-raw.json";
  HostInfo host = probe_host();
  const std::string source = fmt::format("calibrated: pipesim calibrate on {} ({}) {}", host.hostname,
                                         host.cpu_model, host.date_utc);

  const CpuBenchOptions cpu = cpu_bench_options(host, o.quick);
  progress << fmt::format("calibrate: {} ({} cores, {} GiB), CPU Adam with {} over threads {}\n",
                          host.cpu_model, host.cores, host.dram_bytes >> 30, to_string(cpu.isa),
                          fmt::join(cpu.threads, ","))
           << std::flush;
  register_cpu_benchmarks(cpu);
  // Written under a temporary name, renamed once complete: an interrupted run leaves no partial raw file.
  const std::string cpu_raw_tmp = report.cpu_raw_path + ".tmp";
  const sim::RemovedOnInterrupt raw_guard(cpu_raw_tmp);
  initialize_benchmark(cpu_raw_tmp);
  CaptureReporter capture(progress, static_cast<int>(cpu.threads.size() * 4));
  run_benchmarks(capture, cpu_raw_tmp, report.cpu_raw_path);

  json cv = json::object();
  merge_cpu(cpu, capture, host, source, hw, cv);

  std::vector<std::string> notes;
  const CudaCalibration cuda = measure_cuda(o, progress, report.skipped);
  if (cuda.ran) {
    report.cuda_raw_path = stem + ".cuda-raw.json";
    sim::write_output_file(report.cuda_raw_path, cuda_calibration_to_json(cuda) + "\n");
    merge_cuda(cuda, hw, source, cv, notes);
  }
  if (!cuda.ran)
    report.skipped.push_back(
        fmt::format("GPU, PCIe, NVLink and network figures kept from the base profile {}", base_name));
  report.skipped.push_back("network figures are never measured by calibrate (kept from the base profile)");

  hw.name = o.name.empty() ? out.stem().string() : o.name;
  hw.description = fmt::format("{} calibrated on {} ({}); unmeasured figures from {}",
                               cuda.ran ? cuda.gpu_model : "host", host.hostname, host.cpu_model, base_name);
  const json prov = provenance(o, host, cuda, base_name, cpu, cv, notes, report);
  hw.calibrated_json = pipesim::sim::json_text(prov);
  const std::string text = sim::hardware_profile_to_json(hw);
  // Refuse to write anything the simulator would not read back.
  sim::HardwareProfile check = sim::parse_hardware_profile(text, o.out);
  sim::write_output_file(o.out, text + "\n");
  report.profile = check;
  for (const auto& s : report.skipped) progress << "calibrate: " << s << "\n";
  progress << fmt::format("calibrate: wrote {} (raw: {}{})\n", o.out, report.cpu_raw_path,
                          report.cuda_raw_path.empty() ? "" : ", " + report.cuda_raw_path);
  return report;
}

}  // namespace pipesim::calibrate
