#include "pipesim/trace_import/execution_trace.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gzip_stream.hpp"
#include "malformed_json.hpp"
#include "pipesim/sim/core/error.hpp"

namespace pipesim::trace_import {

namespace {

using sim::InputError;

/// A list being read inside an op's `values`: a tensor is a list of five integers and a device name.
struct ListFrame {
  int count = 0;
  bool tensor_shaped = true;
  std::array<std::int64_t, 5> ints{};
};

/// Streams `nodes` one op at a time (nlohmann's SAX interface): depth 1 is the root object, 2 the nodes
/// array, 3 a node, 4 its `inputs`/`outputs` objects and its `attrs` array, 5 a `values` array or an
/// attribute, 6 and deeper the values' lists.
class ExecutionTraceHandler : public nlohmann::json_sax<nlohmann::json> {
 public:
  ExecutionTraceHandler(ExecutionTrace& out, std::string file) : out_(out), file_(std::move(file)) {}
  bool saw_nodes() const { return saw_nodes_; }

  bool null() override { return other_value("null"); }
  bool boolean(bool) override { return other_value("a boolean"); }
  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(v > static_cast<number_unsigned_t>(INT64_MAX) ? -1 : static_cast<std::int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    const bool whole = std::isfinite(v) && std::fabs(v) < 9e18 && v == std::trunc(v);
    if (whole) return integer(static_cast<std::int64_t>(v));
    return other_value("a fraction");
  }
  bool string(string_t& v) override {
    if (in_node() && depth_ == 3 && key_ == "name") {
      op_.backward_node = v.rfind("autograd::engine::evaluate_function", 0) == 0;
      op_.optimizer = v.rfind("Optimizer.", 0) == 0;
    } else if (in_node() && depth_ == 3 && is_id_key()) {
      fail(key_, "expected an integer, got a string");
    } else if (in_attr()) {
      if (attr_key_ == "name") attr_name_ = v;
    } else if (!lists_.empty() && depth_ == list_depth()) {
      ListFrame& f = lists_.back();
      f.tensor_shaped = f.tensor_shaped && f.count == 5;
      ++f.count;
    }
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 3 && in_nodes_) {
      op_ = ExecutionOp{};
      has_id_ = seen_inputs_ = seen_outputs_ = outputs_first_ = false;
      lists_.clear();
    }
    if (in_attrs() && depth_ == 5) {
      attr_name_.clear();
      attr_value_ = -1;
    }
    note_nested();
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      nodes_key_at_root_ = k == "nodes";
    } else if (in_node()) {
      if (depth_ == 3) {
        key_ = k;
        arg_key_.clear();
        bool& seen = k == "inputs" ? seen_inputs_ : seen_outputs_;
        if (k == "inputs" || k == "outputs") {
          if (seen) fail(k, "a second one in the same node");
          seen = true;
        }
      } else if (depth_ == 4 && (key_ == "inputs" || key_ == "outputs"))
        arg_key_ = k;
      else if (in_attrs() && depth_ == 5)
        attr_key_ = k;
    }
    return true;
  }
  bool end_object() override {
    if (depth_ == 3 && in_nodes_) {
      finish_op();
      ++index_;  // errors name the node being read: its index in nodes
    } else if (in_attrs() && depth_ == 5) {
      if (attr_name_ == "seq_id") op_.sequence = attr_value_;
      if (attr_name_ == "tid") op_.tid = attr_value_;
    }
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    note_nested();
    ++depth_;
    if (depth_ == 2 && nodes_key_at_root_) {
      if (saw_nodes_) fail_at("/nodes", "a second nodes array");
      in_nodes_ = saw_nodes_ = true;
      index_ = 0;
    }
    if (in_values() && depth_ >= 6) lists_.push_back({});
    return true;
  }
  bool end_array() override {
    if (in_values() && depth_ >= 6 && !lists_.empty()) {
      const ListFrame f = lists_.back();
      lists_.pop_back();
      if (f.tensor_shaped && f.count == 6) add_tensor(f);
    }
    if (depth_ == 2) in_nodes_ = false;
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    throw_malformed_json(file_, position, e);
  }

 private:
  bool in_node() const { return in_nodes_ && depth_ >= 3; }
  bool in_attrs() const { return in_node() && key_ == "attrs"; }
  bool in_attr() const { return in_attrs() && depth_ == 5; }
  bool in_values() const {
    return in_node() && (key_ == "inputs" || key_ == "outputs") && arg_key_ == "values";
  }
  bool is_id_key() const { return key_ == "id" || key_ == "ctrl_deps" || key_ == "parent"; }
  int list_depth() const { return 5 + static_cast<int>(lists_.size()); }

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw InputError(file_, fmt::format("/nodes/{}{}{}", index_, key.empty() ? "" : "/", key), message);
  }
  [[noreturn]] void fail_at(const std::string& path, const std::string& message) const {
    throw InputError(file_, path, message);
  }

  /// A list or object inside a list being read: that list is no tensor.
  void note_nested() {
    if (!lists_.empty() && depth_ + 1 > list_depth()) {
      lists_.back().tensor_shaped = false;
      ++lists_.back().count;
    }
  }

  bool other_value(const char* what) {
    if (depth_ == 2 && in_nodes_) fail("", fmt::format("expected a node object, got {}", what));
    if (in_node() && depth_ == 3 && is_id_key()) fail(key_, fmt::format("expected an integer, got {}", what));
    if (!lists_.empty() && depth_ == list_depth()) {
      lists_.back().tensor_shaped = false;
      ++lists_.back().count;
    }
    return true;
  }

  bool integer(std::int64_t v) {
    if (depth_ == 2 && in_nodes_) fail("", "expected a node object, got a number");
    if (!in_node()) return true;
    if (depth_ == 3) {
      if (key_ == "id") {
        if (v < 0) fail("id", fmt::format("{}; valid: an integer >= 0", v));
        op_.id = v;
        has_id_ = true;
      } else if (key_ == "ctrl_deps" || key_ == "parent") {
        op_.parent = v;
      }
    } else if (in_attr() && attr_key_ == "value") {
      attr_value_ = v;
    } else if (!lists_.empty() && depth_ == list_depth()) {
      ListFrame& f = lists_.back();
      if (f.count < 5) f.ints[static_cast<std::size_t>(f.count)] = v;
      f.tensor_shaped = f.tensor_shaped && f.count < 5;
      ++f.count;
    }
    return true;
  }

  void add_tensor(const ListFrame& f) {
    constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;  // a petabyte: no tensor of a training step
    const std::int64_t storage = f.ints[1], offset = f.ints[2], elements = f.ints[3], size = f.ints[4];
    // An undefined tensor (an optional result not computed) is written [id, 0, 0, 0, 0, ""].
    if (storage == 0 && elements == 0 && size == 0) return;
    const std::string where = fmt::format("{}/values", key_);
    if (storage < 0) fail(where, fmt::format("a tensor's storage id {}; valid: >= 0", storage));
    if (offset < 0 || elements < 0)
      fail(where, fmt::format("a tensor of offset {} and {} elements; valid: both >= 0", offset, elements));
    if (size < 1 || size > 64)
      fail(where, fmt::format("a tensor's element size {}; valid: 1 .. 64 bytes", size));
    if (offset > kMaxBytes / size || elements > kMaxBytes / size || (offset + elements) > kMaxBytes / size)
      fail(where, "a tensor beyond 1 PB");
    if (out_.tensors.size() >= UINT32_MAX) fail(where, "more than 4 billion tensor arguments");
    if (key_ == "outputs" && op_.inputs == 0 && op_.outputs == 0) outputs_first_ = true;
    out_.tensors.push_back({storage, (offset + elements) * size});
    if (key_ == "inputs")
      ++op_.inputs;
    else
      ++op_.outputs;
  }

  void finish_op() {
    if (!has_id_) fail("id", "missing; every node needs its integer id");
    // Inputs and outputs were appended in file order; put the inputs first when outputs came before them.
    op_.first_input = op_begin_;
    op_.first_output = op_begin_ + op_.inputs;
    if (outputs_first_) {
      std::rotate(out_.tensors.begin() + op_begin_, out_.tensors.begin() + op_begin_ + op_.outputs,
                  out_.tensors.end());
    }
    out_.ops.push_back(op_);
    op_begin_ = static_cast<std::uint32_t>(out_.tensors.size());
  }

  ExecutionTrace& out_;
  std::string file_;
  int depth_ = 0;
  bool nodes_key_at_root_ = false, in_nodes_ = false, saw_nodes_ = false;
  std::size_t index_ = 0;
  std::string key_, arg_key_, attr_key_, attr_name_;
  std::int64_t attr_value_ = -1;
  ExecutionOp op_;
  bool has_id_ = false, seen_inputs_ = false, seen_outputs_ = false, outputs_first_ = false;
  std::uint32_t op_begin_ = 0;
  std::vector<ListFrame> lists_;
};

}  // namespace

ExecutionTrace parse_execution_trace(std::istream& in, const std::string& file) {
  ExecutionTrace trace;
  trace.file = file;
  ExecutionTraceHandler handler(trace, file);
  nlohmann::json::sax_parse(in, &handler);
  if (!handler.saw_nodes())
    throw InputError(file, "/nodes", "missing; a PyTorch execution trace lists its ops there");
  if (trace.ops.empty()) throw InputError(file, "/nodes", "no ops");
  std::stable_sort(trace.ops.begin(), trace.ops.end(),
                   [](const ExecutionOp& a, const ExecutionOp& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < trace.ops.size(); ++i)
    if (trace.ops[i].id == trace.ops[i - 1].id)
      throw InputError(file, "/nodes",
                       fmt::format("two nodes of id {}; each op has its own", trace.ops[i].id));
  return trace;
}

ExecutionTrace read_execution_trace(const std::string& path) {
  GzipInput in(path);
  return parse_execution_trace(in.stream(), path);
}

}  // namespace pipesim::trace_import
