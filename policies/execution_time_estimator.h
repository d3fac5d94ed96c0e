#ifndef SUPERSERVE_POLICIES_EXECUTION_TIME_ESTIMATOR_H_
#define SUPERSERVE_POLICIES_EXECUTION_TIME_ESTIMATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/empirical_distribution.h"
#include "common/model_profile.h"

namespace superserve {

// Keeps each application's execution-time distribution of a dynamic model
// current from telemetry (Orloj §3.2, "long-term feedback loop"): per
// application, a sliding window of the last `window` per-query execution
// times. An application starts from its profiled histogram and switches to
// its window once `min_samples` measurements have arrived, so a shift in the
// input mix moves the estimate within one window. Also tracks each
// application's share of recent arrivals (the mix the batch estimates assume).
// Not thread-safe; deterministic.
class ExecutionTimeEstimator {
 public:
  struct Options {
    size_t window = 1000;      // measurements kept per application
    size_t min_samples = 100;  // before that, the profiled histogram
    int32_t bins = 64;         // equal-width bins of a measured histogram
    size_t share_window = 2000;  // arrivals over which the mix is measured
  };

  // One application per entry of profile.dynamic.applications, in order.
  ExecutionTimeEstimator(const DynamicModelProfile& profile, Options options);

  size_t applications() const { return apps_.size(); }
  const std::string& name(size_t app) const { return apps_[app].name; }
  // Index of the application named `name`, or -1.
  int32_t Find(const std::string& name) const;

  // One measured per-query execution time (us) of application `app`.
  void AddSample(size_t app, double exec_us);
  // One arrival of application `app` (for the mix).
  void AddArrival(size_t app);

  // The current distribution of `app` (cached until its next sample).
  const EmpiricalDistribution& Distribution(size_t app);
  // Each application's share of the recent arrivals (profiled counts' sums
  // until the first arrival). Sums to 1.
  std::vector<double> Shares() const;
  // Bumped whenever a distribution or the mix may have changed.
  uint64_t version() const { return version_; }

 private:
  struct App {
    std::string name;
    EmpiricalDistribution prior;
    std::vector<double> ring;  // at most options_.window samples
    size_t next = 0;           // ring write position once full
    bool dirty = false;
    EmpiricalDistribution current;
  };
  Options options_;
  std::vector<App> apps_;
  std::vector<double> prior_share_;
  std::vector<int32_t> arrivals_;  // ring of recent application ids
  size_t arrivals_next_ = 0;
  std::vector<int64_t> arrival_counts_;
  uint64_t version_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_EXECUTION_TIME_ESTIMATOR_H_
