#ifndef SUPERSERVE_COMMON_CPU_AFFINITY_H_
#define SUPERSERVE_COMMON_CPU_AFFINITY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace superserve {

// A Linux CPU list ("0", "0-3", "0,2,5-7"; as in taskset -c and cpuset) as
// sorted, distinct CPU numbers. An empty, malformed or reversed list is an
// error that quotes the offending part.
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view spec);

// The CPUs the calling thread may run on now (sched_getaffinity), sorted.
std::vector<int> AllowedCpus();

// Restricts every thread of this process to `cpus`. A CPU that is offline or
// outside the process's cpuset is an error that names it, and leaves the
// affinity as it was. Threads and child processes started afterwards inherit the
// mask. Why: on a small shared machine gRPC's internal threads hand work to
// each other several times per query; on one core those hand-offs need no
// cross-core wake-up (see docs/engine.md, "Pinning the router").
absl::Status PinProcessToCpus(const std::vector<int>& cpus);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_CPU_AFFINITY_H_
