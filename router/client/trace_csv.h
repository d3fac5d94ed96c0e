#ifndef SUPERSERVE_ROUTER_CLIENT_TRACE_CSV_H_
#define SUPERSERVE_ROUTER_CLIENT_TRACE_CSV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/time.h"

namespace superserve {

// One arrival of a replayed trace.
struct TraceArrival {
  Nanos arrival = 0;  // since the trace start
  Nanos slo = 0;      // 0 = the replayer's default
  std::string application;
  std::string model;  // empty = the replayer's default model
};

// Reads the simulator's trace CSV: a header naming the columns, then one row
// per query. `arrival_us` is required (non-decreasing); `slo_us` (or
// `deadline_us`, relative to arrival), `application` (or the simulator's
// `app`) and `model` are optional; other columns are ignored. Lines starting
// with '#' are comments.
// (The client side's own small reader, so that superserve-loadgen does not
// depend on bench/; it reads the same format as the simulator's.)
absl::StatusOr<std::vector<TraceArrival>> ReadTraceCsv(const std::string& path);

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_CLIENT_TRACE_CSV_H_
