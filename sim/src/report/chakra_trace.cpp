#include "pipesim/sim/report/chakra_trace.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pipesim/sim/core/output_file.hpp"

namespace pipesim::sim {

namespace {

// Chakra's schema: field numbers and enum values of et_def.proto.
enum NodeType : std::uint64_t { kCompNode = 4, kSendNode = 5, kRecvNode = 6, kCollNode = 7 };
enum CollType : std::int64_t { kAllReduce = 0, kAllGather = 2, kAllToAll = 6, kReduceScatter = 7 };
constexpr int kWireVarint = 0, kWireBytes = 2;

/// A protobuf message being written: fields appended in field-number order.
class Message {
 public:
  void varint(int field, std::uint64_t v) {
    tag(field, kWireVarint);
    raw_varint(v);
  }
  void bytes(int field, const std::string& s) {
    tag(field, kWireBytes);
    raw_varint(s.size());
    out_ += s;
  }
  void message(int field, const Message& m) { bytes(field, m.out_); }
  /// A packed repeated uint64 (proto3's encoding of `repeated uint64`).
  void packed(int field, const std::vector<std::uint64_t>& values) {
    if (values.empty()) return;
    Message body;
    for (std::uint64_t v : values) body.raw_varint(v);
    bytes(field, body.out_);
  }
  /// The message with its length in front, as Chakra's encode_message writes it.
  std::string delimited() const {
    Message m;
    m.raw_varint(out_.size());
    return m.out_ + out_;
  }

 private:
  void tag(int field, int wire) {
    raw_varint(static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire));
  }
  void raw_varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  std::string out_;
};

/// AttributeProto: name (1) and one value (int64_val 9, bool_val 27, string_val 29).
Message int_attr(const std::string& name, std::int64_t v) {
  Message a;
  a.bytes(1, name);
  a.varint(9, static_cast<std::uint64_t>(v));
  return a;
}
Message bool_attr(const std::string& name, bool v) {
  Message a;
  a.bytes(1, name);
  a.varint(27, v ? 1 : 0);
  return a;
}
Message string_attr(const std::string& name, const std::string& v) {
  Message a;
  a.bytes(1, name);
  a.bytes(29, v);
  return a;
}

struct NodeFields {
  std::uint64_t id = 0;
  std::string name;
  NodeType type = kCompNode;
  std::vector<std::uint64_t> ctrl, data;
  std::uint64_t start_us = 0, duration_us = 0;
  std::vector<Message> attrs;
};

std::string node_message(const NodeFields& n) {
  Message m;
  m.varint(1, n.id);
  m.bytes(2, n.name);
  m.varint(3, n.type);
  m.packed(4, n.ctrl);
  m.packed(5, n.data);
  m.varint(6, n.start_us);
  m.varint(7, n.duration_us);
  for (const Message& a : n.attrs) m.message(10, a);
  return m.delimited();
}

std::uint64_t micros(TimePoint ns) {
  return ns <= 0 ? 0 : static_cast<std::uint64_t>((ns + 500) / 1000);
}

/// The buffer of a member's collective op: an op stands for every collective of its layers and pass, whose
/// ring moves 2(n-1)/n of their buffers per member for an all-reduce and (n-1)/n for the others.
std::int64_t collective_buffer(OpKind kind, const TransferWork& t) {
  const std::int64_t n = t.group_size;
  if (n < 2) return t.bytes;
  const std::int64_t factor = kind == OpKind::kAllReduce ? 2 : 1;
  return t.bytes * n / (factor * (n - 1));
}

bool is_gpu(const Plan& plan, DeviceId d) {
  return plan.devices[static_cast<std::size_t>(d)].kind == DeviceKind::kGpu;
}

/// Which rank's trace holds each op, and each collective group's members as ranks.
struct Ranks {
  std::vector<std::int32_t> of_device;  // -1 for a host or NVMe device
  std::int32_t count = 0;
  std::vector<std::int32_t> owner;  // per op
  std::map<std::int32_t, std::vector<std::int32_t>> members;

  std::int32_t of(DeviceId d) const { return of_device[static_cast<std::size_t>(d)]; }
};

/// Ranks are the plan's GPUs in device order. A host or NVMe stream's ops go with the first GPU of their
/// transfer, the rank that issues them.
Ranks assign_ranks(const Plan& plan) {
  Ranks ranks;
  ranks.of_device.assign(plan.devices.size(), -1);
  for (std::size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].kind == DeviceKind::kGpu) ranks.of_device[d] = ranks.count++;
  for (const Op& op : plan.ops)
    if (const auto* t = std::get_if<TransferWork>(&op.payload); t && is_collective(op.kind) && t->group >= 0)
      ranks.members[t->group].push_back(ranks.of(t->src));
  ranks.owner.resize(plan.ops.size());
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    std::int32_t r = ranks.of(plan.streams[static_cast<std::size_t>(plan.ops[i].stream)].device);
    if (r < 0) {
      const auto* t = std::get_if<TransferWork>(&plan.ops[i].payload);
      const DeviceId gpu = t && is_gpu(plan, t->src) ? t->src : t && is_gpu(plan, t->dst) ? t->dst : -1;
      r = gpu >= 0 ? ranks.of(gpu) : 0;
    }
    ranks.owner[i] = r;
  }
  return ranks;
}

/// The pipeline send whose receive is on rank r (sent from another rank).
bool is_p2p_into(const Plan& plan, const Ranks& ranks, std::size_t i, std::int32_t r) {
  const Op& op = plan.ops[i];
  const auto* t = std::get_if<TransferWork>(&op.payload);
  return t && op.kind == OpKind::kP2P && is_gpu(plan, t->dst) && ranks.of(t->dst) == r && ranks.owner[i] != r;
}

/// The node type and attributes of an op on its own rank: a GPU-to-GPU send, a collective or compute.
void describe_work(NodeFields& n, const Plan& plan, const Ranks& ranks, std::size_t i) {
  const Op& op = plan.ops[i];
  const auto* t = std::get_if<TransferWork>(&op.payload);
  n.attrs.push_back(bool_attr("is_cpu_op", std::holds_alternative<CpuWork>(op.payload)));
  if (t && op.kind == OpKind::kP2P && is_gpu(plan, t->src) && is_gpu(plan, t->dst)) {
    n.type = kSendNode;
    n.attrs.push_back(int_attr("comm_dst", ranks.of(t->dst)));
    n.attrs.push_back(int_attr("comm_size", t->bytes));
    n.attrs.push_back(int_attr("comm_tag", static_cast<std::int64_t>(i)));
  } else if (t && is_collective(op.kind)) {
    n.type = kCollNode;
    const std::int64_t type = op.kind == OpKind::kAllGather       ? kAllGather
                              : op.kind == OpKind::kReduceScatter ? kReduceScatter
                              : op.kind == OpKind::kAllToAll      ? kAllToAll
                                                                  : kAllReduce;
    n.attrs.push_back(int_attr("comm_type", type));
    n.attrs.push_back(int_attr("comm_size", collective_buffer(op.kind, *t)));
    if (t->group >= 0)
      n.attrs.push_back(
          string_attr("pg_name", fmt::format("{}", fmt::join(ranks.members.at(t->group), ","))));
  } else {
    n.type = kCompNode;
  }
}

}  // namespace

ChakraExport write_chakra_traces(const Plan& plan, const Timeline& timeline, const std::string& dir,
                                 const std::string& prefix) {
  const Ranks ranks = assign_ranks(plan);
  // Node ids: an op's is its index in the plan; a receive of transfer i on its receiver is i + ops.
  const auto ops = static_cast<std::uint64_t>(plan.ops.size());
  ChakraExport result;
  std::filesystem::create_directories(dir);
  for (std::int32_t r = 0; r < ranks.count; ++r) {
    std::string text;
    Message meta;
    meta.bytes(1, "0.0.4");
    text += meta.delimited();
    std::map<StreamId, std::uint64_t> last_on_stream;
    // Receives of pipeline sends to this GPU come first in id order with their transfer.
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      const Op& op = plan.ops[i];
      const bool p2p_in = is_p2p_into(plan, ranks, i, r);
      if (ranks.owner[i] != r && !p2p_in) continue;
      NodeFields n;
      n.id = p2p_in ? i + ops : i;
      n.start_us = micros(timeline.start[i]);
      n.duration_us = micros(timeline.end[i] - timeline.start[i]);
      n.name = fmt::format("{} mb{} layers {}-{}", to_string(op.kind), op.tags.microbatch,
                           op.tags.layer_begin, op.tags.layer_end);
      if (p2p_in) {
        const auto& t = std::get<TransferWork>(op.payload);
        n.type = kRecvNode;
        n.attrs.push_back(bool_attr("is_cpu_op", false));
        n.attrs.push_back(int_attr("comm_src", ranks.owner[i]));
        n.attrs.push_back(int_attr("comm_size", t.bytes));
        n.attrs.push_back(int_attr("comm_tag", static_cast<std::int64_t>(i)));
        n.name = "recv " + n.name;
        text += node_message(n);
        ++result.nodes;
        continue;
      }
      describe_work(n, plan, ranks, i);
      // The stream's order, then the ops it waits for: on this GPU as they are, a pipeline send from another
      // GPU as its receive here.
      if (const auto prev = last_on_stream.find(op.stream); prev != last_on_stream.end())
        n.ctrl.push_back(prev->second);
      last_on_stream[op.stream] = i;
      for (OpId d : op.deps) {
        const auto dep = static_cast<std::size_t>(d);
        if (ranks.owner[dep] == r)
          n.data.push_back(dep);
        else if (is_p2p_into(plan, ranks, dep, r))
          n.data.push_back(dep + ops);
        else
          ++result.dropped_deps;
      }
      text += node_message(n);
      ++result.nodes;
    }
    write_output_file((std::filesystem::path(dir) / fmt::format("{}.{}.et", prefix, r)).string(), text);
    ++result.files;
  }
  return result;
}

}  // namespace pipesim::sim
