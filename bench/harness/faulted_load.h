#ifndef SUPERSERVE_BENCH_HARNESS_FAULTED_LOAD_H_
#define SUPERSERVE_BENCH_HARNESS_FAULTED_LOAD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/harness/answer_ledger.h"
#include "bench/harness/fault_injector.h"
#include "bench/harness/local_cluster.h"
#include "common/time.h"
#include "router/client/load_generator.h"

namespace superserve {

// An open-loop load against a LocalCluster while a fault plan is applied to
// its processes, counted on both sides: the client's AnswerLedger (one
// terminal status per query) and the router's accepted / answered totals.
// Used by the soak test and `superserve-bench faults` (docs/faults.md).
struct FaultedLoadOptions {
  std::vector<Nanos> arrivals;  // send times since the start, ascending
  Nanos slo = Millis(100);
  double stream_share = 0.5;    // share of queries sent over InferStream (rest: unary Infer)
  std::vector<Fault> faults;    // applied in order, each at its time
  uint64_t seed = 1;            // transport choice and fault victims
  Nanos drain = Seconds(10);    // after the last send, beyond the SLO
};

struct FaultedLoadResult {
  std::vector<AnswerLedger::Entry> queries;  // in send order
  AnswerLedger::Counts counts;
  // Answers the stream clients received for queries already answered (they
  // reach no callback): duplicates the ledger cannot see.
  int64_t stray_answers = 0;
  int64_t lost() const { return counts.lost; }
  int64_t duplicated() const { return counts.duplicated + stray_answers; }
  std::vector<AppliedFault> faults;
  // The last router's totals once the load is over and nothing is pending
  // (pending > 0 if it never got there within a few seconds).
  std::optional<RouterTotals> router_final;
  std::string router_final_error;  // why router_final is missing
  Nanos elapsed = 0;
};

// Runs the load (on a thread of its own) and the plan (on the caller's
// thread, which must outlive the cluster's processes), waits for every
// answer, then ReleaseHung. A fault that cannot be applied (no healthy
// worker left) is skipped with a line on stderr. After a router restart the
// clients are replaced (a fresh channel and stream; an InferStream does not
// outlive its router).
absl::StatusOr<FaultedLoadResult> RunFaultedLoad(LocalCluster& cluster,
                                                 const LabelledRequests& inputs,
                                                 const FaultedLoadOptions& options);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_HARNESS_FAULTED_LOAD_H_
