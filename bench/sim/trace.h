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
// columns `app` and `model` (names). The one reader shared by the simulator
// and the load generator.
struct Trace {
  std::vector<Nanos> arrivals;
  // Either empty or one entry per arrival: an index into the names tables.
  std::vector<int32_t> app;
  std::vector<int32_t> model;
  std::vector<std::string> app_names;
  std::vector<std::string> model_names;

  size_t size() const { return arrivals.size(); }
  Nanos duration() const { return arrivals.empty() ? 0 : arrivals.back(); }
  double mean_rate() const;

  static absl::StatusOr<Trace> ReadCsv(const std::string& path);
  absl::Status WriteCsv(const std::string& path) const;
};

// Squared coefficient of variation of the inter-arrival times.
double InterArrivalCv2(const std::vector<Nanos>& arrivals);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_SIM_TRACE_H_
