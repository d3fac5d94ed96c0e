#ifndef SUPERSERVE_PLANNER_WORKERS_NEEDED_H_
#define SUPERSERVE_PLANNER_WORKERS_NEEDED_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/model_profile.h"
#include "common/time.h"

namespace superserve {

// Autoscaling advice: the workers a model needs to serve `rate` req/s with a
// latency objective `slo`, from Harpagon's full plan for one subnet of its
// profile (-1 = the most accurate): its fully loaded machines plus one per
// partially loaded machine. `batch_overhead` is added to every batch's
// duration (the router's dispatch round trip, which profiles do not include).
// 0 at rate 0, at least 1 at any rate > 0. Errors: InvalidArgument (bad rate,
// objective or profile; more than kMaxPlannedWorkers), FailedPrecondition (the
// subnet cannot meet `slo` at any batch size).
absl::StatusOr<int32_t> WorkersNeeded(const ModelProfile& profile, double rate, Nanos slo,
                                      int32_t subnet_id = -1, Nanos batch_overhead = 0);

}  // namespace superserve

#endif  // SUPERSERVE_PLANNER_WORKERS_NEEDED_H_
