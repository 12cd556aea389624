#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/schedules/schedule.hpp"
#include "schedules/builtin.hpp"

namespace pipesim::sim {

const char* to_string(ScheduleKind kind) {
  return kind == ScheduleKind::kOrderBased ? "order-based" : "whole-plan";
}

// ---- Parameters ----

namespace {

std::string range_text(const ScheduleParameter& p) {
  if (p.type == ParameterType::kInteger || p.type == ParameterType::kIntegerPair)
    return fmt::format("{} .. {}", static_cast<std::int64_t>(p.min), static_cast<std::int64_t>(p.max));
  return fmt::format("{} .. {}", p.min, p.max);
}

[[noreturn]] void invalid(const ScheduleParameter& p, const std::string& what) {
  throw InputError(Option{p.option}, "", what);
}

std::int64_t parse_integer(const ScheduleParameter& p, const std::string& text) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    invalid(p, fmt::format("'{}' is not an integer; valid: {}", text, range_text(p)));
  return v;
}

}  // namespace

void check_parameter(const ScheduleParameter& p, const ParameterValue& value) {
  const bool type_ok =
      (p.type == ParameterType::kFlag && std::holds_alternative<bool>(value)) ||
      (p.type == ParameterType::kInteger && std::holds_alternative<std::int64_t>(value)) ||
      (p.type == ParameterType::kReal && std::holds_alternative<double>(value)) ||
      (p.type == ParameterType::kIntegerPair && std::holds_alternative<std::vector<std::int64_t>>(value));
  if (!type_ok) invalid(p, fmt::format("has the wrong type for parameter {}", p.name));
  auto in_range = [&](double x) { return std::isfinite(x) && x >= p.min && x <= p.max; };
  if (const auto* i = std::get_if<std::int64_t>(&value); i && !in_range(static_cast<double>(*i)))
    invalid(p, fmt::format("{} is out of range; valid: {}", *i, range_text(p)));
  if (const auto* d = std::get_if<double>(&value); d && !in_range(*d))
    invalid(p, fmt::format("{} is out of range; valid: {}", *d, range_text(p)));
  if (const auto* v = std::get_if<std::vector<std::int64_t>>(&value)) {
    const bool ok = v->size() == 2 && std::all_of(v->begin(), v->end(), [&](std::int64_t x) {
                      return in_range(static_cast<double>(x));
                    });
    if (!ok)
      invalid(p, fmt::format("expected {} with both in {}, e.g. {}", p.metavar, range_text(p),
                             to_string(p.default_value)));
  }
}

ParameterValue parse_parameter(const ScheduleParameter& p, const std::string& text) {
  ParameterValue value;
  switch (p.type) {
    case ParameterType::kFlag:
      if (text != "true" && text != "false") invalid(p, fmt::format("'{}' is not true or false", text));
      value = text == "true";
      break;
    case ParameterType::kInteger:
      value = parse_integer(p, text);
      break;
    case ParameterType::kReal: {
      std::size_t used = 0;
      double d = 0;
      try {
        d = std::stod(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (text.empty() || used != text.size())
        invalid(p, fmt::format("'{}' is not a number; valid: {}", text, range_text(p)));
      value = d;
      break;
    }
    case ParameterType::kIntegerPair: {
      const auto comma = text.find(',');
      if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos)
        invalid(p, fmt::format("expected {} with both in {}, e.g. {}", p.metavar, range_text(p),
                               to_string(p.default_value)));
      value = std::vector<std::int64_t>{parse_integer(p, text.substr(0, comma)),
                                        parse_integer(p, text.substr(comma + 1))};
      break;
    }
  }
  check_parameter(p, value);
  return value;
}

std::string to_string(const ParameterValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<std::int64_t>(&value)) return fmt::format("{}", *i);
  if (const auto* d = std::get_if<double>(&value)) return fmt::format("{}", *d);
  return fmt::format("{}", fmt::join(std::get<std::vector<std::int64_t>>(value), ","));
}

const ParameterValue& ScheduleParameters::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error("schedule parameter '" + name + "' was never set");
  return it->second;
}

// ---- The registry ----

namespace {

void validate(const std::deque<ScheduleDescriptor>& existing, const ScheduleDescriptor& d) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("schedule '{}': {}", d.name, why));
  };
  if (d.name.empty() || d.name == "all") fail("needs a name other than 'all'");
  for (const auto& s : existing)
    if (s.name == d.name) fail("is already registered");
  if (!d.check) fail("needs a check");
  if (d.kind == ScheduleKind::kOrderBased && !d.order) fail("is order-based but has no order");
  if (d.kind == ScheduleKind::kWholePlan && !d.build) fail("builds its whole plan but has no build");
  if (d.partitioner.rule == PartitionRule::kSeparateForwardBackward && !d.partitioner.own_partition)
    fail("has separate forward and backward partitions but no own_partition");
  for (const auto& p : d.parameters) {
    if (p.name.empty() || p.option.empty() ||
        p.option.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      fail("a parameter needs a name and an option key of [a-z0-9_]");
    check_parameter(p, p.default_value);
  }
}

std::deque<ScheduleDescriptor> builtin_schedules() {
  std::deque<ScheduleDescriptor> out;
#define PIPESIM_SCHEDULE(describe)             \
  {                                            \
    ScheduleDescriptor d = detail::describe(); \
    validate(out, d);                          \
    out.push_back(std::move(d));               \
  }
#include "schedules/builtin_schedules.def"
#undef PIPESIM_SCHEDULE
  return out;
}

struct Registry {
  std::mutex mutex;  // serializes registrations
  std::deque<ScheduleDescriptor> schedules = builtin_schedules();
};

Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

const std::deque<ScheduleDescriptor>& schedule_registry() {
  return registry().schedules;
}

const ScheduleDescriptor& register_schedule(ScheduleDescriptor descriptor) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  validate(r.schedules, descriptor);
  r.schedules.push_back(std::move(descriptor));
  return r.schedules.back();
}

const ScheduleDescriptor& find_schedule(const std::string& name) {
  std::string valid;
  for (const auto& s : schedule_registry()) {
    if (s.name == name) return s;
    valid += (valid.empty() ? "" : ", ") + s.name;
  }
  throw InputError(Option{"schedule"}, "", fmt::format("unknown schedule '{}'; valid: {}, all", name, valid));
}

StageLoad peak_stage_load(const ScheduleDescriptor& schedule, const ScheduleShape& shape,
                          std::int32_t stage) {
  const std::int32_t rank = stage % shape.pp, chunk = stage / shape.pp;
  std::int64_t whole = 0, owed = 0, peak = -1;
  StageLoad at_peak;
  for (const Task& t : schedule.order(shape, rank)) {
    if (t.chunk != chunk) continue;
    if (t.kind == TaskKind::kForward) ++whole;
    if (t.kind == TaskKind::kBackward) --whole;
    if (t.kind == TaskKind::kBackwardInput) --whole, ++owed;
    if (t.kind == TaskKind::kBackwardWeight) --owed;
    const std::int64_t load = whole * kActivationUnits + owed * kWeightGradActivationUnits;
    if (load > peak) {
      peak = load;
      at_peak = {whole, owed};
    }
  }
  return at_peak;
}

const ScheduleDescriptor& default_schedule() {
  return find_schedule("1f1b");
}

}  // namespace pipesim::sim
