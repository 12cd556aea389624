#include "core/json_reader.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace pipesim::sim::detail {

std::string read_text_file(const std::string& path) {
  // Only regular files, and not beyond a size no input of pipesim reaches (a device or a FIFO never ends).
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{1} << 30;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw InputError(path, "", "cannot open file (missing or unreadable)");
  if (std::filesystem::is_directory(status)) throw InputError(path, "", "is a directory; give a JSON file");
  if (!std::filesystem::is_regular_file(status))
    throw InputError(path, "", "not a regular file (a device, FIFO or socket); give a JSON file");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxBytes) throw InputError(path, "", fmt::format("{} bytes; valid: at most 1 GiB", size));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file (missing or unreadable)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json parse_json_text(const std::string& text, const std::string& file) {
  // Nesting deeper than any pipesim file (a profile, a plan) is refused before anything recurses over it.
  constexpr int kMaxDepth = 64;
  int depth = 0;
  const auto limit = [&](int d, json::parse_event_t event, json&) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start)
      depth = std::max(depth, d + 1);
    return d < kMaxDepth;
  };
  try {
    json j = json::parse(text, limit);
    if (depth >= kMaxDepth)
      throw InputError(file, "", fmt::format("JSON nested deeper than {} levels; valid: at most {}", kMaxDepth,
                                             kMaxDepth - 1));
    return j;
  } catch (const json::parse_error& e) {
    throw InputError(file, "", fmt::format("malformed JSON at byte {}: expected valid JSON", e.byte));
  } catch (const json::exception& e) {
    // e.g. a number beyond double's range (1e400)
    throw InputError(file, "", fmt::format("unusable JSON: {}", e.what()));
  }
}

JsonObject::JsonObject(const json& j, std::string file, std::string path)
    : j_(j), file_(std::move(file)), path_(std::move(path)) {
  if (!j_.is_object()) throw InputError(file_, path_.empty() ? "/" : path_, "expected a JSON object");
}

void JsonObject::fail(const std::string& key, const std::string& message) const {
  throw InputError(file_, path_of(key), message);
}

const json& JsonObject::get(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  if (it == j_.end()) fail(key, "missing required key");
  return *it;
}

JsonObject JsonObject::object(const std::string& key) {
  return JsonObject(get(key), file_, path_of(key));
}

const json& JsonObject::raw(const std::string& key) {
  return get(key);
}

const json* JsonObject::raw_optional(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

std::string JsonObject::string(const std::string& key) {
  const json& v = get(key);
  if (!v.is_string()) fail(key, "expected a string");
  return v.get<std::string>();
}

std::string JsonObject::string_or(const std::string& key, const std::string& fallback) {
  const json* v = raw_optional(key);
  if (!v || v->is_null()) return fallback;
  if (!v->is_string()) fail(key, "expected a string");
  return v->get<std::string>();
}

double checked_number(const json& v, const std::string& file, const std::string& path, double lo, double hi) {
  if (!v.is_number()) throw InputError(file, path, "expected a number");
  double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw InputError(file, path, fmt::format("value {} out of range; valid: {} .. {}", x, lo, hi));
  return x;
}

std::int64_t checked_integer(const json& v, const std::string& file, const std::string& path, std::int64_t lo,
                             std::int64_t hi) {
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
                                  std::fabs(v.get<double>()) < 9e15))
    throw InputError(file, path, "expected an integer");
  std::int64_t x = v.is_number_float() ? static_cast<std::int64_t>(v.get<double>()) : v.get<std::int64_t>();
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    throw InputError(file, path,
                     fmt::format("value {} out of range; valid: {} .. {}", v.get<std::uint64_t>(), lo, hi));
  if (x < lo || x > hi)
    throw InputError(file, path, fmt::format("value {} out of range; valid: {} .. {}", x, lo, hi));
  return x;
}

double JsonObject::number(const std::string& key, double lo, double hi) {
  return checked_number(get(key), file_, path_of(key), lo, hi);
}

double JsonObject::number_or(const std::string& key, double fallback, double lo, double hi) {
  const json* v = raw_optional(key);
  if (!v || v->is_null()) return fallback;
  return checked_number(*v, file_, path_of(key), lo, hi);
}

std::int64_t JsonObject::integer(const std::string& key, std::int64_t lo, std::int64_t hi) {
  return checked_integer(get(key), file_, path_of(key), lo, hi);
}

std::int64_t JsonObject::integer_or(const std::string& key, std::int64_t fallback, std::int64_t lo,
                                    std::int64_t hi) {
  const json* v = raw_optional(key);
  if (!v || v->is_null()) return fallback;
  return checked_integer(*v, file_, path_of(key), lo, hi);
}

bool JsonObject::boolean_or(const std::string& key, bool fallback) {
  const json* v = raw_optional(key);
  if (!v || v->is_null()) return fallback;
  if (!v->is_boolean()) fail(key, "expected true or false");
  return v->get<bool>();
}

void JsonObject::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!seen_.count(it.key())) {
      std::string known;
      for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
      throw InputError(file_, path_of(it.key()), fmt::format("unknown key; valid keys here: {}", known));
    }
  }
}

}  // namespace pipesim::sim::detail
