#include "pipesim/sim/core/units.hpp"
#include "pipesim/sim/report/trace.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <nlohmann/json.hpp>

#include "pipesim/sim/core/json_text.hpp"

namespace pipesim::sim {

namespace {

// Microseconds with nanosecond precision, printed exactly (no floating-point rounding drift).
std::string us(TimePoint ns) {
  const char* sign = ns < 0 ? "-" : "";
  if (ns < 0) ns = -ns;
  return fmt::format("{}{}.{:03}", sign, ns / 1000, ns % 1000);
}

std::string op_name(const Op& op) {
  std::string s = to_string(op.kind);
  if (op.tags.microbatch >= 0) s += fmt::format(" mb{}", op.tags.microbatch);
  if (op.tags.virtual_stage > 0) s += fmt::format(" v{}", op.tags.virtual_stage);
  return s;
}

}  // namespace

void write_chrome_trace(std::ostream& out, const Plan& plan, const Timeline& tl) {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& e) {
    out << (first ? "" : ",\n") << e;
    first = false;
  };
  std::vector<char> used(plan.devices.size(), 0);
  for (const auto& s : plan.streams) used[static_cast<std::size_t>(s.device)] = 1;
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    if (!used[d]) continue;
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":{}}}}})", d,
                     pipesim::sim::json_text(nlohmann::json(plan.devices[d].name))));
    emit(
        fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", d, d));
  }
  for (std::size_t s = 0; s < plan.streams.size(); ++s)
    emit(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                     plan.streams[s].device, s,
                     pipesim::sim::json_text(nlohmann::json(plan.streams[s].name))));
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    const auto& st = plan.streams[static_cast<std::size_t>(op.stream)];
    std::string args = fmt::format(R"("op":{},"stage":{},"layers":"{}-{}")", i, op.tags.stage,
                                   op.tags.layer_begin, op.tags.layer_end);
    if (const auto* w = std::get_if<TransferWork>(&op.payload))
      args += fmt::format(R"(,"bytes":{})", w->bytes);
    emit(
        fmt::format(R"({{"ph":"X","name":"{}","cat":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})",
                    op_name(op), to_string(op.kind), st.device, op.stream, us(tl.start[i]),
                    us(tl.end[i] - tl.start[i]), args));
  }
  // Flow arrows: from each p2p transfer to the ops that wait for it on the receiving side.
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    for (OpId d : op.deps) {
      const Op& src = plan.ops[static_cast<std::size_t>(d)];
      if (src.kind != OpKind::kP2P) continue;
      const auto& ss = plan.streams[static_cast<std::size_t>(src.stream)];
      const auto& ds = plan.streams[static_cast<std::size_t>(op.stream)];
      emit(fmt::format(R"({{"ph":"s","id":{},"name":"p2p","cat":"p2p","pid":{},"tid":{},"ts":{}}})", d,
                       ss.device, src.stream, us(tl.start[static_cast<std::size_t>(d)])));
      emit(fmt::format(R"({{"ph":"f","bp":"e","id":{},"name":"p2p","cat":"p2p","pid":{},"tid":{},"ts":{}}})",
                       d, ds.device, op.stream, us(tl.start[i])));
    }
  }
  for (const auto& s : tl.memory)
    emit(fmt::format(R"({{"ph":"C","name":"memory","pid":{},"ts":{},"args":{{"GiB":{:.6f}}}}})", s.device,
                     us(s.time), static_cast<double>(s.bytes) / kBytesPerGiB));
  out << "\n]}\n";
}

void write_timeline(std::ostream& out, const Plan& plan, const Timeline& tl, const Metrics& m) {
  out << "{\"format\":\"pipesim-timeline\",\"version\":1,\"source\":\"" << tl.source
      << "\",\n\"metrics\":" << metrics_to_json(plan, m, 0.0, -1) << ",\n\"ops\":[";
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    out << (i ? ",\n" : "\n")
        << fmt::format(R"({{"op":{},"kind":"{}","stream":{},"start_ns":{},"end_ns":{}}})", i,
                       to_string(op.kind), op.stream, tl.start[i], tl.end[i]);
  }
  out << "\n]}\n";
}

}  // namespace pipesim::sim
