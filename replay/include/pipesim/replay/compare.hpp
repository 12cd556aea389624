// `pipesim compare`: a predicted and a measured pipesim-timeline of the same plan side by side: the step
// time error, the error of each op kind's durations (median, p90), per-stream busy time, bubble fraction,
// the most mismatched ops, and which profile figure to recalibrate first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipesim::replay {

struct TimedOp {
  std::string kind;
  std::int32_t stream = 0;
  std::int64_t start_ns = 0, end_ns = 0;
};

/// The parts of a pipesim-timeline file that compare reads.
struct TimelineFile {
  std::string path;
  std::string source;  ///< simulated, or measured (backend)
  double step_time_s = 0;
  double bubble_fraction = 0;
  std::vector<TimedOp> ops;
};

/// Reads a pipesim-timeline file; throws sim::InputError naming the file and JSON path.
TimelineFile load_timeline(const std::string& path);
TimelineFile parse_timeline(const std::string& json_text, const std::string& path);

struct KindError {
  std::string kind;
  std::int64_t ops = 0;
  double predicted_s = 0, measured_s = 0;  ///< summed durations
  double median = 0, p90 = 0;              ///< of measured / predicted - 1 per op (ops of nonzero duration)
};

struct StreamBusy {
  std::int32_t stream = 0;
  double predicted_s = 0, measured_s = 0;
};

struct OpMismatch {
  std::int64_t op = 0;
  std::string kind;
  double predicted_s = 0, measured_s = 0;
};

struct Comparison {
  double predicted_step_s = 0, measured_step_s = 0;
  double step_error = 0;  ///< measured / predicted - 1
  double predicted_bubble = 0, measured_bubble = 0;
  std::vector<KindError> kinds;     ///< by largest absolute time difference
  std::vector<StreamBusy> streams;  ///< stream order
  std::vector<OpMismatch> top;      ///< largest absolute difference first
  std::string advice;
};

/// Throws sim::InputError when the two timelines are not of the same plan (op count, kinds, streams).
Comparison compare_timelines(const TimelineFile& predicted, const TimelineFile& measured, int top = 10);

std::string comparison_table(const Comparison& c);
std::string comparison_json(const Comparison& c);

}  // namespace pipesim::replay
