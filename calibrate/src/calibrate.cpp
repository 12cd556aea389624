#include "pipesim/calibrate/calibrate.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesim/calibrate/collective_bandwidth.hpp"
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

/// Collects every repetition's rate counter per benchmark, feeds the thread sweeps' early stop, and prints
/// one progress line per benchmark with the time left.
class CaptureReporter : public benchmark::BenchmarkReporter {
 public:
  CaptureReporter(std::ostream& progress, int total, ThreadSweep& sweep)
      : progress_(progress), total_(total), sweep_(sweep), start_(std::chrono::steady_clock::now()) {}
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    if (runs.empty() || runs.front().run_type != Run::RT_Iteration) return;  // aggregates come on their own
    const std::string& name = runs.front().run_name.function_name;
    const bool adam = name.rfind("cpu_adam", 0) == 0;
    if (runs.front().error_occurred) {
      const std::string kernel = kernel_of(name);
      progress_ << fmt::format("calibrate: [{}/{}] {}: skipped, {} converged at {} threads{}\n", ++done_,
                               total_, name, kernel, sweep_.converged_at(kernel), time_left())
                << std::flush;
      return;
    }
    for (const Run& r : runs) {
      auto it = r.counters.find(adam ? "items_per_second" : "bytes_per_second");
      samples_[name].push_back(it == r.counters.end() ? 0.0 : static_cast<double>(it->second));
    }
    const SampleStats s = summarize(samples_[name]);
    const auto threads = static_cast<int>(runs.front().counters.at("threads"));
    sweep_.record(kernel_of(name), threads, s.median);
    ++done_;
    progress_ << fmt::format("calibrate: [{}/{}] {}: {:.3f} {} (cv {:.1f}%, {} samples){}\n", done_, total_,
                             name, s.median / 1e9, adam ? "G params/s" : "GB/s", 100 * s.cv, s.samples,
                             time_left())
              << std::flush;
  }
  /// The median rate of a benchmark; no samples when it was skipped.
  SampleStats stats(const std::string& name) const {
    auto it = samples_.find(name);
    return it == samples_.end() ? SampleStats{} : summarize(it->second);
  }

 private:
  /// ", about N s left" from the mean time per benchmark so far (skipped ones take none).
  std::string time_left() const {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const auto measured = static_cast<double>(samples_.size());
    if (measured == 0 || done_ >= total_) return "";
    return fmt::format(", about {:.0f} s left", elapsed / measured * (total_ - done_));
  }

  std::ostream& progress_;
  int total_;
  int done_ = 0;
  ThreadSweep& sweep_;
  std::chrono::steady_clock::time_point start_;
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
  for (const char* k : {"model", "hbm_bytes"}) g.sources[k] = source;
  g.sources["launch_overhead_us"] =
      source + fmt::format(
                   " (empty kernels queued behind a busy GPU: its own cost per kernel; {:.1f} us when "
                   "each waits for the CPU to launch it)",
                   c.host_launch_us);
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
  // The curve describes the GEMMs training runs: microbatches of kTrainingTokens tokens or more. Below the
  // smallest of those, the small-token points; a skinny decode GEMM (64 tokens through the output head) is
  // as large in work as a training one but far slower, and would drag the curve down where training is.
  auto work = [](const GemmPoint& p) {
    return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) / 1e9;
  };
  constexpr std::int64_t kTrainingTokens = 512;
  double smallest_training = 1e300;
  for (const auto& p : c.gemm)
    if (p.dtype == dtype && p.m >= kTrainingTokens) smallest_training = std::min(smallest_training, work(p));
  std::vector<std::pair<double, double>> eff;
  for (const auto& p : c.gemm) {
    if (p.dtype != dtype) continue;
    cv[fmt::format("gemm/{}/{}/m{}", p.dtype, p.shape, p.m)] = p.cv;
    if (p.m >= kTrainingTokens || work(p) < smallest_training) eff.push_back({work(p), p.tflops / peak});
  }
  if (!eff.empty()) {
    g.gemm_efficiency = monotone_curve(eff, 1.0);
    g.sources["gemm_efficiency"] =
        source + fmt::format(
                     " (cuBLAS GemmEx {}, fp32 accumulate, random operands beyond L2, transformer "
                     "shapes of h 2048 and 4096 at {}+ tokens and smaller GEMMs below their work; "
                     "isotonic in work)",
                     dtype, kTrainingTokens);
  }
}

/// Streaming efficiency: the median of the element-wise kernels' rates (bf16 copy, bf16 add, fp32 triad) on
/// the largest arrays, as a share of the datasheet bandwidth the profile keeps.
void merge_hbm(const CudaCalibration& c, sim::HardwareProfile& hw, const std::string& source, json& cv,
               std::vector<std::string>& notes) {
  std::int64_t largest = 0;
  for (const auto& p : c.streaming) largest = std::max(largest, p.bytes);
  std::vector<double> rates;
  for (const auto& p : c.streaming) {
    cv[fmt::format("streaming/{}/{}", p.kernel, p.bytes)] = p.cv;
    if (p.bytes == largest && (p.kernel == "copy_bf16" || p.kernel == "add_bf16" || p.kernel == "triad_fp32"))
      rates.push_back(p.GBps);
  }
  auto& g = hw.gpu;
  if (rates.empty() || g.hbm_GBps <= 0) return;
  const double measured = summarize(rates).median;
  if (measured > g.hbm_GBps) {
    notes.push_back(
        fmt::format("streaming kernels measured {:.0f} GB/s, above the profile's {:.0f} GB/s "
                    "memory bandwidth; bandwidth raised to it",
                    measured, g.hbm_GBps));
    g.hbm_GBps = measured;
    g.sources["hbm_GBps"] = source + " (raised to the measured streaming rate)";
  }
  g.hbm_efficiency = measured / g.hbm_GBps;
  g.sources["hbm_efficiency"] =
      source + fmt::format(
                   " (median of bf16 copy, bf16 add and fp32 triad kernels over {} MiB arrays: "
                   "{:.0f} GB/s of {:.0f})",
                   largest >> 20, measured, g.hbm_GBps);
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
  merge_hbm(c, hw, source, cv, notes);
  merge_pcie(c, hw, source, cv, notes);
  merge_nvlink(c, hw, source);
  if (merge_collectives(c, hw, source))
    notes.push_back("NVLink all-reduce bus bandwidth by message size measured: " + c.collectives_note);
  else if (!c.collectives_note.empty())
    notes.push_back("collectives: " + c.collectives_note);
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
    if (s.samples > 0) {  // counts past a converged sweep were skipped
      adam.push_back({static_cast<double>(t), s.median});
      cv[name] = s.cv;
    }
    for (const char* k : {"stream_copy", "stream_triad", "stream_update"}) {
      const std::string bench = fmt::format("{}/threads:{}", k, t);
      SampleStats b = capture.stats(bench);
      if (b.samples == 0) continue;
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

/// Upper-case words of a GPU name, split at anything but letters and digits.
std::vector<std::string> name_words(const std::string& name) {
  std::vector<std::string> words(1);
  for (char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch)) != 0)
      words.back() += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    else if (!words.back().empty())
      words.emplace_back();
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

std::string base_for_gpu(const std::string& device_name) {
  const std::vector<std::string> device = name_words(device_name);
  // A profile that holds one cluster's measured network (h100-p5-8x) describes that cluster: the GPU's own
  // profile is preferred as the base.
  std::string cluster;
  for (const std::string& profile : sim::shipped_hardware_profiles()) {
    const sim::HardwareProfile hw = sim::load_hardware_profile(profile);
    for (const std::string& w : name_words(hw.gpu.model)) {
      if (w.size() < 3 || w.find_first_of("0123456789") == std::string::npos) continue;
      if (std::find(device.begin(), device.end(), w) != device.end()) {
        const bool measured_network = !hw.network.busbw_by_nodes[0].empty();
        if (!measured_network) return profile;
        if (cluster.empty()) cluster = profile;
      }
      break;  // only the identifying word counts
    }
  }
  return cluster;
}

CalibrateReport run_calibration(const CalibrateOptions& o, std::ostream& progress) {
  namespace fs = std::filesystem;
  if (o.out.empty())
    throw sim::InputError(
        sim::Option{"out"}, "",
        "missing; give the profile file to write, e.g. " + sim::spelled(sim::Option{"out"}) + " mine.json");
  // A base given is read first (a bad one fails before anything is measured); otherwise it is the profile of
  // the GPU measured below.
  sim::HardwareProfile hw = sim::load_hardware_profile(o.base.empty() ? kFallbackBase : o.base);
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
  progress
      << fmt::format(
             "calibrate: {} ({} cores, {} GiB, last-level cache {} MiB), CPU Adam with {} over threads {} "
             "(each sweep stops once doubling threads gains under {:.0f}%); STREAM arrays of {} MiB, "
             "Adam over {} M parameters\n",
             host.cpu_model, host.cores, host.dram_bytes >> 30, host.last_level_cache_bytes >> 20,
             to_string(cpu.isa), fmt::join(cpu.threads, ","), 100 * cpu.converged_gain,
             (cpu.stream_elements * sizeof(double)) >> 20, cpu.adam_params >> 20)
      << std::flush;
  ThreadSweep sweep(cpu.converged_gain);
  register_cpu_benchmarks(cpu, &sweep);
  // Written under a temporary name, renamed once complete: an interrupted run leaves no partial raw file.
  const std::string cpu_raw_tmp = report.cpu_raw_path + ".tmp";
  const sim::RemovedOnInterrupt raw_guard(cpu_raw_tmp);
  initialize_benchmark(cpu_raw_tmp);
  CaptureReporter capture(progress, static_cast<int>(cpu.threads.size() * 4), sweep);
  run_benchmarks(capture, cpu_raw_tmp, report.cpu_raw_path);

  std::vector<std::string> notes;
  const CudaCalibration cuda = measure_cuda(o, progress, report.skipped);
  if (o.base.empty() && cuda.ran) {
    if (const std::string mine = base_for_gpu(cuda.gpu_model); !mine.empty())
      hw = sim::load_hardware_profile(mine);
    else
      notes.push_back(fmt::format("no shipped profile is of a {}: unmeasured figures from {}", cuda.gpu_model,
                                  kFallbackBase));
  }
  const std::string base_name = hw.name;
  json cv = json::object();
  merge_cpu(cpu, capture, host, source, hw, cv);
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
