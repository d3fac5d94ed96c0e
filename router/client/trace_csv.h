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

// The largest arrival_us a trace may hold: int64 nanoseconds end at
// ~9.22e18 (the simulator's reader has the same bound).
constexpr double kMaxTraceArrivalUs = 9.2e15;

// Reads the simulator's trace CSV: a header naming the columns, then one row
// per query. `arrival_us` is required (non-decreasing, in [0,
// kMaxTraceArrivalUs]); `slo_us` (or `deadline_us`, relative to arrival; in
// (0, kMaxQueryTimeout], a day, the router's bound on a query's deadline),
// `application` (or the simulator's `app`) and `model` are optional; other
// columns are ignored. Lines starting with '#' are comments. A bad number is
// an error naming its line and the allowed range (inf, nan and values past
// int64 once waited forever or wrapped to a negative SLO).
// (The client side's own small reader, so that superserve-loadgen does not
// depend on bench/; the column names are the simulator's, from
// common/trace_columns.h.)
absl::StatusOr<std::vector<TraceArrival>> ReadTraceCsv(const std::string& path);

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_CLIENT_TRACE_CSV_H_
