#ifndef SUPERSERVE_BENCH_HARNESS_FAULT_INJECTOR_H_
#define SUPERSERVE_BENCH_HARNESS_FAULT_INJECTOR_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/harness/local_cluster.h"
#include "common/time.h"

namespace superserve {

// The faults a LocalCluster can be put through (issue 15, docs/faults.md).
enum class FaultKind {
  kKillWorker,         // SIGKILL one worker
  kHangWorker,         // SIGSTOP one worker; SIGCONT after Fault::hang
  kTerminateWorker,    // SIGTERM one worker (it leaves cleanly)
  kRestartRouterDrain, // SIGTERM the router (it drains), start a new one
  kRestartRouterKill,  // SIGKILL the router, start a new one
};
const char* FaultKindName(FaultKind kind);

struct Fault {
  Nanos at = 0;  // since the run's start
  FaultKind kind = FaultKind::kKillWorker;
  // kHangWorker: how long the worker stays stopped; 0 = until
  // FaultInjector::ReleaseHung (the end of the run).
  Nanos hang = 0;
  // Worker faults: start a replacement worker process afterwards.
  bool replace = false;
};

// `count` faults at seeded random times in [start, end), at least `min_gap`
// apart (fewer when the span cannot hold them), kinds drawn from `kinds`
// with every kind used once before any repeats. Hangs last 0.3..1.5 s;
// killed and terminated workers are replaced.
std::vector<Fault> RandomFaultPlan(uint64_t seed, Nanos start, Nanos end, int count,
                                   const std::vector<FaultKind>& kinds, Nanos min_gap);

// What applying one fault did.
struct AppliedFault {
  Fault fault;
  Nanos started = 0;  // since the run's start
  Nanos took = 0;     // until Apply returned (router restarts: serving again)
  int worker = -1;    // the victim's LocalCluster index (worker faults)
  // Router restarts: the old router's totals scraped just before the signal,
  // and those it logged on exit (a drained router logs them; a killed one
  // cannot).
  std::optional<RouterTotals> router_before;
  std::optional<RouterTotals> router_exit;
  std::string detail;
};

// Applies faults to a LocalCluster's processes. Victims are drawn (seeded)
// from the workers that are running and not stopped. Not thread-safe: one
// thread applies faults while others send queries.
class FaultInjector {
 public:
  FaultInjector(LocalCluster* cluster, uint64_t seed) : cluster_(cluster), rng_(seed) {}
  ~FaultInjector() { ReleaseHung(); }

  // Applies `fault` now and returns when it is done: a timed hang after its
  // SIGCONT, a router restart once the new router listens. `run_start` is
  // the run's start on the real clock (for AppliedFault's times).
  absl::StatusOr<AppliedFault> Apply(const Fault& fault, Nanos run_start);
  // SIGCONT every worker still stopped.
  void ReleaseHung();
  // Workers running and not stopped.
  int healthy_workers();

 private:
  std::vector<int> HealthyWorkers();

  LocalCluster* cluster_;
  std::mt19937_64 rng_;
  std::vector<int> hung_;  // stopped until ReleaseHung
};

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_HARNESS_FAULT_INJECTOR_H_
