#ifndef SUPERSERVE_POLICIES_SLACKFIT_POLICY_H_
#define SUPERSERVE_POLICIES_SLACKFIT_POLICY_H_

#include <string>

#include "common/model_profile.h"
#include "policies/arrival_rate.h"
#include "policies/latency_buckets.h"
#include "policies/profiled_policy.h"

namespace superserve {

// Default K, chosen by the bucket sweep in docs/scheduling.md.
inline constexpr int kDefaultSlackFitBuckets = 16;

struct SlackFitOptions {
  ProfiledPolicyOptions base;
  int num_buckets = kDefaultSlackFitBuckets;
  // Partial batches (fewer queued than the bucket's batch): true = DESIGN.md's
  // rule, the most accurate subnet that fits at the smallest batch >= n;
  // false = the bucket's own subnet at that batch (the paper's SlackFit
  // keeps the bucket's tuple), "slackfit-bp".
  bool partial_most_accurate = true;
  // The rate guard (our addition, "slackfit-rg"; off = SuperServe's SlackFit).
  // SlackFit's bucket just below the slack, and its most-accurate partial
  // batches, can run tuples whose throughput over all live workers is below
  // the arrival rate; once every worker is tied up that way the queue grows,
  // the head's slack shrinks to the drop threshold and stays there (EDF's
  // overload spiral). With the guard, every dispatch must sustain
  // guard_headroom x the measured arrival rate per worker: if SlackFit's
  // tuple does not, take the most accurate subnet that does, either now or,
  // when the head's slack covers it, after waiting for the arrivals that
  // fill its batch ("wake me at t"); if nothing sustains the rate, the
  // highest-throughput tuple that fits now (INFaaS's choice).
  bool rate_guard = false;
  double guard_headroom = 1.0;
  Nanos rate_window = Millis(100);
  // Under sustained overload (the arrival rate over overload_window above
  // shed_load_fraction x the highest capacity any tuple offers), the guard
  // may shed head queries that only a tiny batch could still serve, so that
  // a full batch runs instead of EDF's overload spiral.
  double shed_load_fraction = 0.9;
  // The guard treats tuples without telemetry yet as this much slower than
  // profiled (LatencyTable::Options::unmeasured_margin): it spreads work
  // over more tuples than SlackFit, many rarely measured.
  double guard_unmeasured_margin = 0.06;
  Nanos overload_window = Seconds(1);
};

// SuperServe's SlackFit (§4.2, App. A.5) with DESIGN.md's resolutions:
// bucket by latency, choose the bucket just below the head's slack, largest
// batch within it; partial batches take the most accurate subnet that fits;
// infeasible heads are dropped. Buckets follow the online-corrected latency
// table and are rebuilt when it changed (at most once per rebuild interval).
class SlackFitPolicy : public ProfiledPolicy {
 public:
  SlackFitPolicy(const ModelProfile& profile, SlackFitOptions options);
  explicit SlackFitPolicy(const ModelProfile& profile)
      : SlackFitPolicy(profile, SlackFitOptions()) {}

  void OnArrival(const Query& q, Nanos now) override;
  void OnCompletion(const CompletionTelemetry& t) override;

  const LatencyBuckets& buckets() const { return buckets_; }

 protected:
  Choice Choose(const SchedulingContext& ctx, const QueueView& view) override;

 private:
  static std::string NameFor(const SlackFitOptions& o);
  static SlackFitOptions Resolve(SlackFitOptions o);
  // Per-worker throughput (queries/s) of running `batch` queries as (rank, b).
  double Throughput(int64_t batch, int rank, int batch_index) const;
  Choice RateGuard(const SchedulingContext& ctx, const QueueView& view, Choice chosen);

  SlackFitOptions options_;
  LatencyBuckets buckets_;
  uint64_t buckets_version_;
  Nanos last_rebuild_ = 0;
  ArrivalRateEstimator arrivals_;
  ArrivalRateEstimator long_arrivals_;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_SLACKFIT_POLICY_H_
