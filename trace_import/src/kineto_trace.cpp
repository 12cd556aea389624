#include "pipesim/trace_import/kineto_trace.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gzip_stream.hpp"
#include "malformed_json.hpp"
#include "pipesim/sim/core/error.hpp"

namespace pipesim::trace_import {

namespace {

using sim::InputError;

/// A whole-number argument of an event: whether it was there, and whether it was a whole number.
struct WholeArg {
  std::int64_t value = 0;
  bool present = false, whole = false;
  void set(double v, std::int64_t integer) {
    value = integer;
    present = true;
    whole = v == static_cast<double>(integer);
  }
};

/// The fields of one event an import reads; the rest of it is skipped as it streams past.
struct EventFields {
  std::string ph, cat, name;
  std::int64_t tid = 0;
  TraceTime ts = 0, dur = 0;
  bool has_ts = false, has_dur = false;
  std::int64_t correlation = -1, sequence = -1;
  std::vector<std::vector<std::int64_t>> input_dims;  ///< args."Input Dims", one list per input
  std::vector<std::string> concrete;                  ///< args."Concrete Inputs" (scalars as text)
  std::vector<std::string> input_types;               ///< args."Input type", one per input
  /// A memory event's args ("[memory]"): the device's type and index (-1 where absent), and the figures read
  /// as whole numbers of bytes.
  std::int64_t device_type = -1, device_id = -1;
  WholeArg addr, bytes, total_allocated, total_reserved;
};

/// Bytes an element of a recorded dtype takes ("Input type" as PyTorch's profiler writes it); 0 for one not
/// known here.
std::int64_t dtype_bytes(std::string_view type) {
  static const std::unordered_map<std::string_view, std::int64_t> sizes = {{"double", 8},
                                                                           {"long int", 8},
                                                                           {"float", 4},
                                                                           {"int", 4},
                                                                           {"c10::BFloat16", 2},
                                                                           {"c10::Half", 2},
                                                                           {"short int", 2},
                                                                           {"bool", 1},
                                                                           {"unsigned char", 1},
                                                                           {"signed char", 1},
                                                                           {"c10::Float8_e4m3fn", 1},
                                                                           {"c10::Float8_e5m2", 1}};
  const auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

/// A tensor's elements from its recorded dimensions; 0 for a shape of no real tensor (a dimension below 1, or
/// beyond 2^40 elements, a thousand times the largest weight trained).
std::int64_t elements(const std::vector<std::int64_t>& dims) {
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;
  std::int64_t n = dims.empty() ? 0 : 1;
  for (std::int64_t d : dims) n = d > 0 && n <= kMaxElements / d ? n * d : 0;
  return n;
}

/// Streams `traceEvents` one event at a time (nlohmann's SAX interface): depth 1 is the root object, 2 the
/// events array, 3 an event, 4 its `args`.
class TraceHandler : public nlohmann::json_sax<nlohmann::json> {
 public:
  TraceHandler(KinetoTrace& out, std::string file) : out_(out), file_(std::move(file)) {}
  bool saw_events() const { return saw_events_; }

  bool null() override { return value_kind("null"); }
  bool boolean(bool) override { return value_kind("a boolean"); }
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v), v); }
  bool number_unsigned(number_unsigned_t v) override {
    return number(static_cast<double>(v),
                  v > static_cast<number_unsigned_t>(INT64_MAX) ? -1 : static_cast<std::int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    // An id or a dimension written as a fraction or beyond int64 is no valid one (-1).
    const bool whole = std::isfinite(v) && std::fabs(v) < 9e18 && v == std::trunc(v);
    return number(v, whole ? static_cast<std::int64_t>(v) : -1);
  }
  bool string(string_t& v) override {
    if (in_devices_ && depth_ == 3 && key_ == "name" && out_.device.empty()) out_.device = v;
    if (in_event() && depth_ == 5 && key_ == "args" && arg_ == "Concrete Inputs" && ev_.concrete.size() < 16)
      ev_.concrete.push_back(v);
    if (in_event() && depth_ == 5 && key_ == "args" && arg_ == "Input type" && ev_.input_types.size() < 16)
      ev_.input_types.push_back(v);
    if (in_event() && depth_ == 3) {
      if (key_ == "ph")
        ev_.ph = v;
      else if (key_ == "cat")
        ev_.cat = v;
      else if (key_ == "name")
        ev_.name = v;
      else if (key_ == "tid")
        ev_.tid = static_cast<std::int64_t>(std::hash<std::string>{}(v) >> 1);
      else if (key_ == "ts" || key_ == "dur")
        fail(key_, "expected a number of microseconds, got a string");
    }
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 3 && in_events_) ev_ = EventFields{};
    if (depth_ == 3 && !in_events_ && events_key_at_root_) fail("", "expected an array of event objects");
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      events_key_at_root_ = k == "traceEvents";
      devices_key_at_root_ = k == "deviceProperties";
    } else if (in_devices_ && depth_ == 3) {
      key_ = k;
    } else if (in_event()) {
      if (depth_ == 3)
        key_ = k;
      else if (depth_ == 4 && key_ == "args")
        arg_ = k;
    }
    return true;
  }
  bool end_object() override {
    if (depth_ == 3 && in_events_) {
      finish_event();
      ++index_;  // errors name the event being read: its index in traceEvents
    }
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (in_event() && key_ == "args" && arg_ == "Input Dims" && depth_ == 6) ev_.input_dims.emplace_back();
    if (depth_ == 2) {
      in_devices_ = devices_key_at_root_;
      if (!events_key_at_root_) return true;
      if (saw_events_) fail("", "a second traceEvents array");
      in_events_ = saw_events_ = true;
      index_ = 0;
    }
    return true;
  }
  bool end_array() override {
    if (depth_ == 2) in_events_ = in_devices_ = false;
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    throw_malformed_json(file_, position, e);
  }

 private:
  bool in_event() const { return in_events_ && depth_ >= 3; }

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw InputError(file_, fmt::format("/traceEvents/{}{}{}", index_, key.empty() ? "" : "/", key), message);
  }

  bool value_kind(const char* what) {
    if (in_event() && depth_ == 3 && (key_ == "ts" || key_ == "dur"))
      fail(key_, fmt::format("expected a number of microseconds, got {}", what));
    if (depth_ == 2 && in_events_) fail("", fmt::format("expected an event object, got {}", what));
    return true;
  }

  bool number(double v, std::int64_t integer) {
    if (depth_ == 2 && in_events_) fail("", "expected an event object, got a number");
    if (!in_event()) return true;
    if (depth_ == 3) {
      if (key_ == "ts") {
        if (!(std::fabs(v) <= 1e16)) fail("ts", fmt::format("{}; valid: -1e16 .. 1e16 microseconds", v));
        ev_.ts = v;
        ev_.has_ts = true;
      } else if (key_ == "dur") {
        if (!(v >= 0) || v > 1e12) fail("dur", fmt::format("{}; valid: 0 .. 1e12 microseconds", v));
        ev_.dur = v;
        ev_.has_dur = true;
      } else if (key_ == "tid") {
        ev_.tid = integer;
      }
    } else if (depth_ == 4 && key_ == "args") {
      if (arg_ == "correlation") {
        ev_.correlation = integer;
      } else if (arg_ == "Sequence number") {
        ev_.sequence = integer;
      } else if (arg_ == "Device Type") {
        ev_.device_type = integer;
      } else if (arg_ == "Device Id") {
        ev_.device_id = integer;
      } else if (arg_ == "Addr") {
        ev_.addr.set(v, integer);
      } else if (arg_ == "Bytes") {
        ev_.bytes.set(v, integer);
      } else if (arg_ == "Total Allocated") {
        ev_.total_allocated.set(v, integer);
      } else if (arg_ == "Total Reserved") {
        ev_.total_reserved.set(v, integer);
      }
    } else if (depth_ == 6 && key_ == "args" && arg_ == "Input Dims" && !ev_.input_dims.empty()) {
      ev_.input_dims.back().push_back(integer);
    }
    return true;
  }

  void finish_event() {
    if (ev_.ph == "i" && ev_.name == "[memory]") return add_memory_event();
    if (ev_.ph != "X") return;  // flows, other instants and metadata carry nothing an import times
    const std::string_view cat = ev_.cat;
    const bool gpu = cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
    const bool launch = cat == "cuda_runtime" || cat == "cuda_driver";
    const bool spans = cat == "python_function" || cat == "user_annotation" || cat == "cpu_op";
    if (cat == "overhead" && ev_.has_ts && ev_.has_dur)
      out_.overhead.push_back({ev_.name, ev_.tid, ev_.ts, ev_.dur});
    if (!gpu && !launch && !spans) return;
    if (!ev_.has_ts) fail("ts", "missing; a complete event (ph X) needs its start");
    if (!ev_.has_dur) fail("dur", "missing; a complete event (ph X) needs its duration");
    if (!gpu) add_mark(cat == "python_function" ? CpuMark::Kind::kPythonFrame : CpuMark::Kind::kOp);
    if (cat == "cpu_op")
      if (const std::int64_t bytes = streaming_bytes(); bytes > 0)
        out_.streaming.push_back({ev_.tid, ev_.ts, ev_.dur, bytes});
    if (gpu) {
      if (ev_.correlation < 0) return;  // not launched from a traced call (a profiler's own activity)
      GpuActivity a;
      a.kind = cat == "kernel"       ? GpuActivity::Kind::kKernel
               : cat == "gpu_memcpy" ? GpuActivity::Kind::kMemcpy
                                     : GpuActivity::Kind::kMemset;
      a.correlation = ev_.correlation;
      a.ts = ev_.ts;
      a.dur = ev_.dur;
      auto [it, fresh] = name_index_.emplace(ev_.name, static_cast<std::int32_t>(out_.names.size()));
      if (fresh) out_.names.push_back(ev_.name);
      a.name = it->second;
      a.stream = ev_.tid;
      out_.gpu.push_back(a);
    } else if (launch) {
      if (ev_.correlation >= 0) out_.launches.push_back({ev_.correlation, ev_.tid, ev_.ts, ev_.dur, waits()});
    } else if (cat == "python_function") {
      if (ev_.name.rfind("nn.Module: ", 0) == 0)
        out_.modules.push_back({ev_.name.substr(11), ev_.tid, ev_.ts, ev_.dur});
    } else if (ev_.name.rfind("ProfilerStep#", 0) == 0) {  // a user_annotation (a cpu_op before PyTorch 2)
      out_.steps.push_back({ev_.name, ev_.tid, ev_.ts, ev_.dur});
    } else if (cat == "user_annotation") {
      if (ev_.name.rfind("Optimizer.", 0) == 0)
        out_.optimizer.push_back({ev_.name, ev_.tid, ev_.ts, ev_.dur});
    } else if (const auto use = weight_use(); use.params > 0 || use.flops > 0) {
      out_.weights.push_back(use);
      if (ev_.sequence >= 0) out_.autograd.push_back({ev_.sequence, ev_.tid, ev_.ts, ev_.dur, false});
    } else if (ev_.sequence >= 0) {  // a cpu_op autograd recorded
      const bool backward = ev_.name.rfind("autograd::engine::evaluate_function", 0) == 0;
      out_.autograd.push_back({ev_.sequence, ev_.tid, ev_.ts, ev_.dur, backward});
    }
  }

  /// A "[memory]" instant of the first CUDA device the trace names (the one a single-GPU step runs on);
  /// the host's (Device Type 0) and other devices' are skipped, and so are those of older profilers, which
  /// wrote only the device and the bytes (PyTorch's reportMemoryUsage of 2021): they cannot be followed.
  void add_memory_event() {
    constexpr std::int64_t kCuda = 1;  // c10::DeviceType::CUDA, as the profiler writes "Device Type"
    if (ev_.device_type != kCuda) return;
    if (memory_device_ < 0) memory_device_ = ev_.device_id;
    if (ev_.device_id != memory_device_) return;
    if (!ev_.has_ts) fail("ts", "missing; a memory event needs its time");
    if (!ev_.bytes.present || !ev_.bytes.whole)
      fail("args/Bytes", "missing or not a whole number; valid: the bytes allocated, negative for a free");
    if (!ev_.addr.present || !ev_.total_allocated.present) return;
    if (!ev_.addr.whole) fail("args/Addr", "not a whole number; valid: the block's address");
    const auto bytes_at_least_0 = [&](const WholeArg& a, const char* key) {
      if (a.present && (!a.whole || a.value < 0))
        fail(fmt::format("args/{}", key), "not a whole number of bytes at least 0");
    };
    bytes_at_least_0(ev_.total_allocated, "Total Allocated");
    bytes_at_least_0(ev_.total_reserved, "Total Reserved");
    if (ev_.bytes.value != 0)
      out_.memory.push_back({ev_.ts, ev_.tid, ev_.addr.value, ev_.bytes.value, ev_.total_allocated.value,
                             ev_.total_reserved.present ? ev_.total_reserved.value : -1});
  }

  void add_mark(CpuMark::Kind kind) {
    auto [it, fresh] = thread_index_.emplace(ev_.tid, static_cast<std::int32_t>(out_.threads.size()));
    if (fresh) out_.threads.push_back(ev_.tid);
    out_.marks.push_back({ev_.ts, it->second, kind});
  }

  /// A runtime or driver call that returns only when the GPU has finished earlier work.
  bool waits() const {
    const std::string_view name = ev_.name;
    return name.find("Synchronize") != std::string_view::npos || name == "cudaMemcpy" ||
           name == "cuMemcpyDtoH_v2" || name == "cuMemcpyDtoH";
  }

  /// The bytes an element-wise cpu_op moves (StreamingOp), from its recorded shapes and dtypes; 0 for any
  /// other op, or one with a tensor operand of a dtype not known here.
  std::int64_t streaming_bytes() const {
    const std::string_view name = ev_.name;
    const bool copy = name == "aten::copy_";
    const bool in_place =
        name == "aten::add_" || name == "aten::sub_" || name == "aten::mul_" || name == "aten::div_";
    const bool out_of_place =
        name == "aten::add" || name == "aten::sub" || name == "aten::mul" || name == "aten::div";
    if (!copy && !in_place && !out_of_place) return 0;
    constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;
    std::int64_t read = 0, first = 0, widest = 0, largest = 0;
    for (std::size_t i = 0; i < ev_.input_dims.size(); ++i) {
      const std::int64_t n = elements(ev_.input_dims[i]);
      if (n == 0) continue;  // a scalar, or no tensor
      const std::int64_t size = i < ev_.input_types.size() ? dtype_bytes(ev_.input_types[i]) : 0;
      if (size == 0) return 0;
      read += n * size;
      if (read > kMaxBytes) return 0;
      if (i == 0) first = n * size;
      widest = std::max(widest, size);
      largest = std::max(largest, n);
    }
    if (first == 0) return 0;
    if (copy) return read > first ? read : 0;  // the destination written, the source read
    return read + (in_place ? first : largest * widest);
  }

  /// The weight a cpu_op reads, from its recorded input shapes: linear (input, weight, bias), embedding
  /// (weight, indices), addmm (bias, input, weight).
  WeightUse weight_use() const {
    WeightUse w{WeightUse::Op::kLinear, ev_.tid, ev_.ts, ev_.dur, 0, 0, true};
    const auto& d = ev_.input_dims;
    for (const auto& dims : d)
      for (std::size_t k = dims.size() >= 2 ? dims.size() - 2 : 0; k < dims.size(); ++k)
        w.aligned = w.aligned && dims[k] % 8 == 0;
    auto at = [&](std::size_t i) { return i < d.size() ? elements(d[i]) : 0; };
    // Rows of a GEMM's input: its elements over its last dimension.
    auto rows = [&](std::size_t i) {
      return i < d.size() && !d[i].empty() && d[i].back() > 0 ? static_cast<double>(at(i) / d[i].back())
                                                              : 0.0;
    };
    if (ev_.name == "aten::linear") {
      w.params = at(1) + at(2);
      w.flops = 2 * rows(0) * static_cast<double>(at(1));
    } else if (ev_.name == "aten::embedding") {
      w.op = WeightUse::Op::kEmbedding;
      w.params = at(0);
    } else if (ev_.name == "aten::addmm") {
      w.op = WeightUse::Op::kAddmm;
      w.params = at(2) + at(0);
      w.flops = 2 * rows(1) * static_cast<double>(at(2));
    } else if (ev_.name == "aten::mm" && d.size() >= 2 && d[0].size() == 2 && d[1].size() == 2) {
      w.op = WeightUse::Op::kMatmul;
      w.flops = 2.0 * static_cast<double>(at(0)) * static_cast<double>(d[1][1]);
    } else if (ev_.name == "aten::bmm" && d.size() >= 2 && d[0].size() == 3 && d[1].size() == 3) {
      w.op = WeightUse::Op::kMatmul;
      w.flops = 2.0 * static_cast<double>(at(0)) * static_cast<double>(d[1][2]);
    } else if (ev_.name == "aten::scaled_dot_product_attention" && d.size() >= 2 && d[0].size() == 4 &&
               d[1].size() == 4) {
      // q [b, h, s, dim], k [b, h_kv, s_kv, dim]; is_causal is the sixth argument.
      w.op = WeightUse::Op::kAttention;
      const bool causal = ev_.concrete.size() > 5 && ev_.concrete[5] == "True";
      w.flops = 4.0 * static_cast<double>(at(0)) * static_cast<double>(d[1][2]) * (causal ? 0.5 : 1.0);
    }
    return w;
  }

  KinetoTrace& out_;
  std::string file_;
  int depth_ = 0;
  bool events_key_at_root_ = false, in_events_ = false, saw_events_ = false;
  bool devices_key_at_root_ = false, in_devices_ = false;
  std::size_t index_ = 0;
  std::string key_, arg_;
  EventFields ev_;
  std::unordered_map<std::string, std::int32_t> name_index_;
  std::unordered_map<std::int64_t, std::int32_t> thread_index_;
  std::int64_t memory_device_ = -1;  ///< the CUDA device whose memory events are read
};

}  // namespace

KinetoTrace parse_kineto_trace(std::istream& in, const std::string& file) {
  KinetoTrace trace;
  trace.file = file;
  TraceHandler handler(trace, file);
  nlohmann::json::sax_parse(in, &handler);
  if (!handler.saw_events())
    throw InputError(file, "/traceEvents", "missing; a PyTorch profiler trace lists its events there");
  if (trace.gpu.empty())
    throw InputError(file, "/traceEvents",
                     "no GPU kernels, copies or fills with a correlation id; profile with "
                     "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]");
  return trace;
}

KinetoTrace read_kineto_trace(const std::string& path) {
  GzipInput in(path);
  return parse_kineto_trace(in.stream(), path);
}

}  // namespace pipesim::trace_import
