// How much slower or faster one worker runs than its profile, and relative
// to the fleet.
#ifndef SUPERSERVE_SERVING_WORKER_SPEED_H_
#define SUPERSERVE_SERVING_WORKER_SPEED_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/model_profile.h"
#include "common/time.h"

namespace superserve {

// How much slower (> 1) or faster (< 1) one worker runs than its model's
// profile says: an exponentially weighted mean, in log space, of
// measured execution time / profiled latency of each batch it ran. A sample
// is clipped to within [1/clip, clip] times the current estimate, so one
// stall (a 1 ms emulated batch measured 90 ms on shared cores) moves the
// estimate by a bounded step, while a worker that really slowed down is
// followed within a few batches (x clip per batch at most).
class WorkerSpeed {
 public:
  struct Options {
    double weight = 0.25;    // of each new sample
    double clip = 2.0;       // per-sample bound, relative to the estimate
    int32_t min_samples = 4;  // factor() is 1 below this
  };
  WorkerSpeed() : WorkerSpeed(Options()) {}
  explicit WorkerSpeed(Options options)
      : options_(options), log_clip_(std::log(options.clip)) {}

  // One batch: `measured` execution time of what the profile puts at
  // `profiled`. Non-positive values are ignored.
  void Record(Nanos measured, Nanos profiled);
  // The estimate (1 until min_samples batches were recorded).
  // O(1): the serving core reads every worker's factor every few batches.
  double factor() const { return factor_; }
  int64_t samples() const { return samples_; }

 private:
  Options options_;
  double log_clip_;
  double log_factor_ = 0;
  double factor_ = 1.0;  // exp(log_factor_) once min_samples were recorded
  int64_t samples_ = 0;
};

// A worker's speed relative to the fleet's: its factor over the lower
// median of the factors of `fleet` (the live workers with enough samples),
// snapped to exactly 1 within [1/deadband, deadband] so that ordinary noise
// leaves every worker on the shared estimates. The lower median: with one
// straggler among two workers the normal one is the reference.
double LowerMedian(std::vector<double> factors);
double RelativeSpeed(double factor, double fleet_median, double deadband = 1.25);

// What `profile` puts a batch of `batch_size` on subnet `subnet_index` at:
// the `profiled` a measurement is divided by. 0 when it says nothing (a
// dynamic model, a batch size it does not list), which WorkerSpeed::Record
// skips.
Nanos ProfiledLatency(const ModelProfile& profile, int32_t subnet_index, int32_t batch_size);

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_WORKER_SPEED_H_
