// Strict JSON reading for every loader: each object read through a JsonObject must have its keys consumed,
// so unknown keys (typos) are rejected; every error names the file and the JSON path.
#pragma once

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim::detail {

using nlohmann::json;

std::string read_text_file(const std::string& path);
json parse_json_text(const std::string& text, const std::string& file);

class JsonObject {
 public:
  JsonObject(const json& j, std::string file, std::string path);

  bool has(const std::string& key) const { return j_.contains(key); }
  /// Child object reader; the key is required.
  JsonObject object(const std::string& key);
  const json& raw(const std::string& key);  ///< required value of any type
  const json* raw_optional(const std::string& key);

  std::string string(const std::string& key);
  std::string string_or(const std::string& key, const std::string& fallback);
  double number(const std::string& key, double lo, double hi);
  double number_or(const std::string& key, double fallback, double lo, double hi);
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi);
  std::int64_t integer_or(const std::string& key, std::int64_t fallback, std::int64_t lo, std::int64_t hi);
  bool boolean_or(const std::string& key, bool fallback);

  /// Marks a key as known without reading it (for keys read elsewhere or deliberately ignored).
  void accept(const std::string& key) { seen_.insert(key); }
  /// Throws for the first key that was never read.
  void finish() const;

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  const std::string& file() const { return file_; }
  std::string path_of(const std::string& key) const { return path_ + "/" + key; }
  const json& value() const { return j_; }

 private:
  const json& get(const std::string& key);
  const json& j_;
  std::string file_;
  std::string path_;
  std::set<std::string> seen_;
};

/// Checks a number read from JSON element `v` at `path`.
double checked_number(const json& v, const std::string& file, const std::string& path, double lo, double hi);
std::int64_t checked_integer(const json& v, const std::string& file, const std::string& path, std::int64_t lo,
                             std::int64_t hi);

}  // namespace pipesim::sim::detail
