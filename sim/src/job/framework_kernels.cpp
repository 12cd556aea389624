#include "job/framework_kernels.hpp"

#include <string>

#include <fmt/format.h>

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

namespace {

constexpr double kMaxBytesPerElement = 1000;
constexpr std::int64_t kMaxKernels = 10000;
constexpr std::size_t kMaxEntries = 256;

/// Rethrows a word parser's error at the entry's JSON path.
template <class Parse>
auto word(JsonObject& e, const std::string& key, const std::string& fallback, Parse parse) {
  const std::string w = fallback.empty() ? e.string(key) : e.string_or(key, fallback);
  try {
    return parse(w);
  } catch (const InputError& err) {
    e.fail(key, err.message());
  }
}

KernelTraffic entry(const json& v, const std::string& file, const std::string& path, bool saved) {
  if (!v.is_object())
    throw InputError(file, path, "expected an object {what, tensor, bytes, kernels, source}");
  JsonObject e(v, file, path);
  KernelTraffic k;
  k.what = e.string("what");
  k.tensor = word(e, "tensor", "", parse_kernel_tensor);
  k.bytes_per_element = e.number("bytes", 0, kMaxBytesPerElement);
  k.kernels = saved ? 0 : static_cast<std::int32_t>(e.integer("kernels", 0, kMaxKernels));
  k.when = word(e, "when", "always", parse_model_feature);
  k.source = e.string("source");
  if (k.source.empty()) e.fail("source", "empty; name the framework's file and function, or the measurement");
  e.finish();
  return k;
}

std::vector<KernelTraffic> entries(JsonObject& pass, const std::string& key, bool saved) {
  std::vector<KernelTraffic> out;
  const json* v = pass.raw_optional(key);
  if (v == nullptr) return out;
  if (!v->is_array() || v->empty() || v->size() > kMaxEntries)
    pass.fail(key, fmt::format("expected a list of 1 to {} entries", kMaxEntries));
  for (std::size_t i = 0; i < v->size(); ++i)
    out.push_back(entry((*v)[i], pass.file(), pass.path_of(key) + "/" + std::to_string(i), saved));
  return out;
}

LayerKernels layer(JsonObject& kernels, const std::string& key) {
  LayerKernels l;
  if (!kernels.has(key)) {
    kernels.accept(key);
    return l;
  }
  JsonObject pass = kernels.object(key);
  l.forward = entries(pass, "forward", false);
  l.backward = entries(pass, "backward", false);
  l.saved = entries(pass, "saved", true);
  if (pass.has("launches")) {
    JsonObject n = pass.object("launches");
    LayerLaunches c;
    c.forward = static_cast<std::int32_t>(n.integer("forward", 0, kMaxKernels));
    c.backward = static_cast<std::int32_t>(n.integer("backward", 0, kMaxKernels));
    c.source = n.string("source");
    if (c.source.empty()) n.fail("source", "empty; name the trace the launches were counted in");
    n.finish();
    l.launches = c;
  } else {
    pass.accept("launches");
  }
  pass.finish();
  return l;
}

/// An optional {"value": X, "source": "..."}, X read by `read(object, "value")`; absent: `fallback`.
template <class T, class Read>
T sourced(JsonObject& kernels, const std::string& key, T fallback, Read read) {
  if (!kernels.has(key)) {
    kernels.accept(key);
    return fallback;
  }
  JsonObject s = kernels.object(key);
  const T v = read(s);
  if (s.string("source").empty()) s.fail("source", "empty; say where this figure comes from");
  s.finish();
  return v;
}

std::int64_t sourced_integer(JsonObject& kernels, const std::string& key, std::int64_t fallback,
                             std::int64_t lo, std::int64_t hi) {
  return sourced<std::int64_t>(kernels, key, fallback,
                               [&](JsonObject& s) { return s.integer("value", lo, hi); });
}

double sourced_number(JsonObject& kernels, const std::string& key, double fallback, double lo, double hi) {
  return sourced<double>(kernels, key, fallback, [&](JsonObject& s) { return s.number("value", lo, hi); });
}

}  // namespace

std::shared_ptr<const KernelComposition> parse_framework_kernels(JsonObject& root) {
  if (!root.has("kernels")) {
    root.accept("kernels");
    return nullptr;
  }
  JsonObject k = root.object("kernels");
  auto c = std::make_shared<KernelComposition>();
  c->residual_bytes = sourced_integer(k, "residual_bytes", 2, 1, 8);
  c->optimizer_step_bytes_per_param = sourced_integer(k, "optimizer_step_bytes_per_param", 0, 1, 1000);
  c->grad_buffer_bytes_per_param = sourced_integer(k, "grad_buffer_bytes_per_param", 0, 1, 64);
  c->gather_copy_bytes_per_param = sourced_integer(k, "gather_copy_bytes_per_param", 0, 1, 64);
  c->elementwise_efficiency = sourced_number(k, "elementwise_efficiency", 1, kMinElementwiseEfficiency, 1);
  c->embedding = layer(k, "embedding");
  c->block = layer(k, "block");
  c->head = layer(k, "head");
  k.finish();
  return c;
}

}  // namespace pipesim::sim
