#ifndef SUPERSERVE_COMMON_TRACE_COLUMNS_H_
#define SUPERSERVE_COMMON_TRACE_COLUMNS_H_

#include "absl/strings/string_view.h"

namespace superserve {

// The column names of the arrival-trace CSV. superserve-sim
// (bench/sim/trace.cc) and superserve-loadgen (router/client/trace_csv.cc)
// each have their own reader (the load generator does not depend on bench/),
// but both take their column names from here, so a trace one of them replays
// the other replays too.
inline constexpr char kTraceArrivalColumn[] = "arrival_us";
inline constexpr char kTraceModelColumn[] = "model";

// The application tag: `application` (the README's and the load generator's
// spelling) or `app` (what superserve-trace and the simulator write).
inline bool IsTraceApplicationColumn(absl::string_view name) {
  return name == "application" || name == "app";
}

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_TRACE_COLUMNS_H_
