#ifndef SUPERSERVE_BENCH_SIM_TRACE_H_
#define SUPERSERVE_BENCH_SIM_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/time.h"

namespace superserve {

// An arrival trace: one query per row, arrival times relative to the trace's
// start, ascending. On disk it is CSV with header `arrival_us` and optional
// columns `application` (or `app`) and `model` (names); WriteCsv writes
// `app`. The simulator's reader; the load generator's
// (router/client/trace_csv.h) takes the same column names
// (common/trace_columns.h).
struct Trace {
  std::vector<Nanos> arrivals;
  // Either empty or one entry per arrival: an index into the names tables.
  std::vector<int32_t> app;
  std::vector<int32_t> model;
  std::vector<std::string> app_names;
  std::vector<std::string> model_names;

  // The latest arrival ReadCsv accepts: beyond ~9.2e15 us the nanoseconds
  // do not fit in an int64.
  static constexpr double kMaxArrivalUs = 9.2e15;

  size_t size() const { return arrivals.size(); }
  Nanos duration() const { return arrivals.empty() ? 0 : arrivals.back(); }
  double mean_rate() const;

  static absl::StatusOr<Trace> ReadCsv(const std::string& path);
  absl::Status WriteCsv(const std::string& path) const;
};

// A dynamic model's replayed per-query execution times (superserve-sim
// --exec_times): one value in us per line, in trace order; blank lines are
// skipped. A line that is not a number, a value outside [0, a day] (the
// longest a query may wait, kMaxQueryTimeout: nothing longer can meet a
// deadline, and far longer overflows the nanoseconds) and a file without
// any value are InvalidArgument errors naming the file and the line.
absl::StatusOr<std::vector<double>> ReadExecTimes(const std::string& path);

// Squared coefficient of variation of the inter-arrival times.
double InterArrivalCv2(const std::vector<Nanos>& arrivals);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_SIM_TRACE_H_
