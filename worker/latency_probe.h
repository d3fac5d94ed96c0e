#ifndef SUPERSERVE_WORKER_LATENCY_PROBE_H_
#define SUPERSERVE_WORKER_LATENCY_PROBE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_repository.h"
#include "worker/executor.h"

namespace superserve {

// Measures a loaded model's latency table on this worker, for a package whose
// profile left latency_us out (docs/packages.md), or for
// --measure_profiles_to: every subnet slot (those loading left out as
// dominated too, ModelProfile::EverySubnet) at every profiled batch size runs `repeats` times on zero inputs after one untimed
// run, and the median counts. Returns microseconds per batch size (the
// profile's order) by subnet id. The model must be loaded on `executor`;
// nothing else should run on it meanwhile, or the figures include that work.
// Cost: subnets x batch sizes x (repeats + 1) batches.
absl::StatusOr<std::map<int32_t, std::vector<double>>> MeasureLatencies(Executor* executor,
                                                                       const ModelEntry& model,
                                                                       int repeats = 7);

}  // namespace superserve

#endif  // SUPERSERVE_WORKER_LATENCY_PROBE_H_
