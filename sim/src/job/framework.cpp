#include "pipesim/sim/job/framework.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/data_dir.hpp"
#include "core/json_reader.hpp"
#include "job/framework_kernels.hpp"
#include "job/framework_split.hpp"
#include "job/nccl_communicators.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/job/option_parsing.hpp"

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

namespace {

/// A setting is an object {"value": ..., "source": "..."}: no figure without where it comes from.
JsonObject setting_object(JsonObject& settings, const std::string& key, std::string& source) {
  JsonObject s = settings.object(key);
  source = s.string("source");
  if (source.empty())
    s.fail("source", "empty; name the framework's file and function this setting comes from");
  return s;
}

FrameworkSetting<bool> flag_setting(JsonObject& settings, const std::string& key) {
  FrameworkSetting<bool> out;
  JsonObject s = setting_object(settings, key, out.source);
  const json& v = s.raw("value");
  if (!v.is_boolean()) s.fail("value", "expected true or false");
  out.value = v.get<bool>();
  s.finish();
  return out;
}

/// A word setting, checked by the option's own parser so that the file gets the same list of valid words.
template <class Parse>
FrameworkSetting<std::string> word_setting(JsonObject& settings, const std::string& key, Parse parse) {
  FrameworkSetting<std::string> out;
  JsonObject s = setting_object(settings, key, out.source);
  out.value = s.string("value");
  try {
    parse(out.value);
  } catch (const InputError& e) {
    s.fail("value", e.message());
  }
  s.finish();
  return out;
}

void check_word(const std::string& value, const char* first, const char* second) {
  if (value != first && value != second)
    throw InputError("", "", fmt::format("unknown value '{}'; valid: {}, {}", value, first, second));
}

/// An optional number setting: {"value": X, "source": "..."} with X in [lo, hi]; absent, 0 with no source.
FrameworkSetting<double> number_setting(JsonObject& settings, const std::string& key, double lo, double hi) {
  FrameworkSetting<double> out;
  if (!settings.has(key)) {
    settings.accept(key);
    return out;
  }
  JsonObject s = setting_object(settings, key, out.source);
  out.value = s.number("value", lo, hi);
  s.finish();
  return out;
}

/// An optional {"value": {"all_reduce": us, "all_gather": us, "reduce_scatter": us}, "source": "..."}.
FrameworkSetting<HostCollectiveUs> host_collective_setting(JsonObject& settings, const std::string& key) {
  FrameworkSetting<HostCollectiveUs> out;
  if (!settings.has(key)) {
    settings.accept(key);
    return out;
  }
  JsonObject s = setting_object(settings, key, out.source);
  JsonObject v = s.object("value");
  out.value.all_reduce = v.number("all_reduce", 0, kMaxHostDispatchUs);
  out.value.all_gather = v.number("all_gather", 0, kMaxHostDispatchUs);
  out.value.reduce_scatter = v.number("reduce_scatter", 0, kMaxHostDispatchUs);
  v.finish();
  s.finish();
  return out;
}

/// An optional whole-number setting in [lo, hi]; absent, `fallback` with no source.
FrameworkSetting<std::int64_t> integer_setting(JsonObject& settings, const std::string& key,
                                               std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  if (!settings.has(key)) {
    settings.accept(key);
    return {fallback, {}};
  }
  FrameworkSetting<std::int64_t> out;
  JsonObject s = setting_object(settings, key, out.source);
  out.value = s.integer("value", lo, hi);
  s.finish();
  return out;
}

/// An optional word setting, checked by the option's own parser; absent, `fallback` with no source.
template <class Parse>
FrameworkSetting<std::string> optional_word_setting(JsonObject& settings, const std::string& key,
                                                    const std::string& fallback, Parse parse) {
  if (!settings.has(key)) {
    settings.accept(key);
    return {fallback, {}};
  }
  return word_setting(settings, key, parse);
}

/// An optional list setting of 1 to `max` strings (`what` says what they are, e.g. "schedule names"), each
/// checked by `check`, which throws InputError; absent, empty with no source.
template <class Check>
FrameworkSetting<std::vector<std::string>> list_setting(JsonObject& settings, const std::string& key,
                                                        std::size_t max, const std::string& what,
                                                        Check check) {
  FrameworkSetting<std::vector<std::string>> out;
  if (!settings.has(key)) {
    settings.accept(key);
    return out;
  }
  JsonObject s = setting_object(settings, key, out.source);
  const json& v = s.raw("value");
  if (!v.is_array() || v.empty() || v.size() > max)
    s.fail("value", fmt::format("expected a list of 1 to {} {}", max, what));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string where = s.path_of("value") + "/" + std::to_string(i);
    try {
      if (!v[i].is_string()) throw InputError("", "", "expected a string");
      check(v[i].get<std::string>());
    } catch (const InputError& e) {
      throw InputError(s.file(), where, e.message());
    }
    out.value.push_back(v[i].get<std::string>());
  }
  s.finish();
  return out;
}

/// An optional list of words, each one of `valid`.
FrameworkSetting<std::vector<std::string>> word_list_setting(JsonObject& settings, const std::string& key,
                                                             const std::vector<std::string>& valid) {
  const std::string words = fmt::format("{}", fmt::join(valid, ", "));
  return list_setting(settings, key, valid.size(), "of: " + words, [&](const std::string& word) {
    if (std::find(valid.begin(), valid.end(), word) == valid.end())
      throw InputError("", "", "expected one of: " + words);
  });
}

/// An optional list of order-based schedule names, each registered.
FrameworkSetting<std::vector<std::string>> schedules_setting(JsonObject& settings, const std::string& key) {
  return list_setting(settings, key, 64, "schedule names", [](const std::string& name) {
    if (find_schedule(name).kind != ScheduleKind::kOrderBased)  // find_schedule names the valid ones
      throw InputError("", "",
                       fmt::format("{} is a CPU-offload system that runs on any framework; list pipeline "
                                   "schedules only",
                                   name));
  });
}

}  // namespace

bool framework_offers(const FrameworkSetting<std::vector<std::string>>& offered, const std::string& word) {
  return offered.value.empty() ||
         std::find(offered.value.begin(), offered.value.end(), word) != offered.value.end();
}

bool framework_runs(const Framework& framework, const ScheduleDescriptor& schedule) {
  const std::vector<std::string>& offered = framework.schedules.value;
  return schedule.kind != ScheduleKind::kOrderBased || offered.empty() ||
         std::find(offered.begin(), offered.end(), schedule.name) != offered.end();
}

Framework parse_framework(const std::string& text, const std::string& file) {
  const json root = detail::parse_json_text(text, file);
  if (!root.is_object()) throw InputError(file, "/", "expected a JSON object");
  JsonObject r(root, file, "");
  if (r.string("format") != "pipesim-framework") r.fail("format", "expected \"pipesim-framework\"");
  if (r.integer("version", 0, 1000) != 1) r.fail("version", "unsupported version; valid: 1");
  Framework f;
  f.name = r.string("name");
  if (f.name.empty()) r.fail("name", "empty; give the framework's name");
  f.description = r.string("description");
  f.source = r.string("source");
  JsonObject s = r.object("settings");
  f.attention = word_setting(s, "attention", [](const std::string& v) { parse_attention(v); });
  f.dropout = flag_setting(s, "dropout");
  f.sequence_parallel = flag_setting(s, "sequence_parallel");
  f.bias_kernels = word_setting(s, "bias_kernels", [](const std::string& v) { parse_bias_kernels(v); });
  f.norm_backward = word_setting(s, "norm_backward", [](const std::string& v) { parse_norm_backward(v); });
  f.grad_accumulation =
      word_setting(s, "grad_accumulation", [](const std::string& v) { parse_grad_accumulation(v); });
  f.grad_sync =
      word_setting(s, "grad_sync", [](const std::string& v) { check_word(v, "overlap", "after-backward"); });
  f.tp_overlap =
      word_setting(s, "tp_overlap", [](const std::string& v) { check_word(v, "backward", "none"); });
  f.blocking_p2p = flag_setting(s, "blocking_p2p");
  f.tp_async_gemms = optional_word_setting(
      s, "tp_async_gemms", "whole", [](const std::string& v) { check_word(v, "whole", "shard-first"); });
  f.selective_recompute =
      optional_word_setting(s, "selective_recompute", "attention",
                            [](const std::string& v) { check_word(v, "attention", "every-other-linear"); });
  f.host_dispatch_us = number_setting(s, "host_dispatch_us", 0, kMaxHostDispatchUs);
  f.host_collective_us = host_collective_setting(s, "host_collective_us");
  f.schedules = schedules_setting(s, "schedules");
  f.pipeline_split = optional_word_setting(s, "pipeline_split", "even",
                                           [](const std::string& v) { parse_pipeline_split(v); });
  f.rank_order = optional_word_setting(s, "rank_order", kDefaultRankOrder, [](const std::string& v) {
    check_word(v, "tp-cp-pp-dp", "tp-cp-dp-pp");
  });
  f.attention_kernel = optional_word_setting(s, "attention_kernel", "", [](const std::string& v) {
    const bool word = !v.empty() && v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
    if (!word)
      throw InputError("", "",
                       "expected a kernel name of lowercase letters, digits and '-', e.g. flash-attn-2");
  });
  f.attention_mask = optional_word_setting(s, "attention_mask", "causal",
                                           [](const std::string& v) { check_word(v, "causal", "dense"); });
  f.data_parallel =
      word_list_setting(s, "data_parallel", {"ddp", "zero-1", "zero-2", "zero-3", "fsdp-hybrid"});
  f.recompute = word_list_setting(s, "recompute", {"none", "selective", "full"});
  if (s.has("host_offload"))
    f.host_offload = flag_setting(s, "host_offload");
  else
    s.accept("host_offload");
  f.vocab_padding = integer_setting(s, "vocab_padding", 1, 1, 1 << 16);
  f.dp_grad_bytes = integer_setting(s, "dp_grad_bytes", 2, 1, 8);
  f.dp_bucket_params =
      integer_setting(s, "dp_bucket_params", 0, std::int64_t{1} << 20, std::int64_t{1} << 40);
  f.zero_param_gather = optional_word_setting(s, "zero_param_gather", "in-place", [](const std::string& v) {
    check_word(v, "in-place", "flattened-copy");
  });
  f.tp_gather_buffers = integer_setting(s, "tp_gather_buffers", 0, 0, 8);
  f.nccl_communicators = list_setting(s, "nccl_communicators", 16, "process group names",
                                      [](const std::string& group) { check_communicator_group(group); });
  f.grad_16bit_memory = optional_word_setting(
      s, "grad_16bit_memory", "step", [](const std::string& v) { check_word(v, "step", "ddp-buckets"); });
  s.finish();
  f.kernels = parse_framework_kernels(r);
  r.finish();
  return f;
}

Framework load_framework(const std::string& name_or_path) {
  const std::string path = resolve_shipped(name_or_path, "frameworks", "framework");
  return parse_framework(detail::read_text_file(path), path);
}

std::vector<std::string> shipped_frameworks() {
  return shipped_names("frameworks");
}

std::string refit_framework(const std::string& name_or_path, const std::string& name,
                            const FrameworkRefit& refit) {
  const std::string path = resolve_shipped(name_or_path, "frameworks", "framework");
  const std::string base = detail::read_text_file(path);
  parse_framework(base, path);                      // a malformed base is named as itself
  auto root = nlohmann::ordered_json::parse(base);  // in its own order
  root["name"] = name;
  root["settings"]["host_dispatch_us"] = {{"value", refit.host_dispatch_us},
                                          {"source", refit.host_dispatch_source}};
  const std::pair<const char*, const std::optional<LayerLaunches>*> layers[] = {
      {"embedding", &refit.embedding}, {"block", &refit.block}, {"head", &refit.head}};
  for (const auto& [layer, launches] : layers)
    if (launches->has_value())
      root["kernels"][layer]["launches"] = {{"forward", (*launches)->forward},
                                            {"backward", (*launches)->backward},
                                            {"source", (*launches)->source}};
  std::string text = root.dump(2) + "\n";
  parse_framework(text, name);  // what it wrote still reads as a framework
  return text;
}

}  // namespace pipesim::sim
