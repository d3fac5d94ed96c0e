#ifndef SUPERSERVE_NAS_PROFILER_LATENCY_MODEL_H_
#define SUPERSERVE_NAS_PROFILER_LATENCY_MODEL_H_

// A latency predictor fitted to measured latencies, for ranking search
// candidates. One timing of one candidate on a shared 2-core machine varies
// by tens of percent; ranking hundreds of candidates by such single numbers
// makes the accuracy-latency frontier a lottery (which noisy point happens
// to dominate its neighbours). A linear model of the architecture's cost
// features -- fitted by least squares over all candidates' timings, so the
// noise averages out -- gives every architecture one deterministic,
// machine-calibrated latency; OFA ranks candidates with a latency lookup
// table for the same reason. The final profile still holds measured
// latencies; this model only decides which subnets are Pareto-optimal.
//
// Torch-free.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace superserve::nas {

// Cost features of one architecture at a fixed batch size. Which ones matter
// on CPU: multiply-accumulates (compute), activation elements (memory
// traffic) and the number of conv layers (fixed per-operator overhead, which
// dominates for the narrow layers of small subnets).
struct ArchitectureCost {
  double macs = 0;
  double activations = 0;
  double conv_layers = 0;
};

class FittedLatencyModel {
 public:
  // Least squares of latency_us ~ w0 + w1 macs + w2 activations + w3 layers,
  // then one refit without the points whose residual exceeds
  // `outlier_mads` median absolute residuals (timings hit by a neighbour's
  // burst). Needs at least 8 points; features that do not vary are dropped
  // (their weight is 0) rather than making the system singular.
  static absl::StatusOr<FittedLatencyModel> Fit(const std::vector<ArchitectureCost>& costs,
                                                const std::vector<double>& latency_us,
                                                double outlier_mads = 4.0);

  double PredictMicros(const ArchitectureCost& cost) const;

  // Fraction of the (kept points') latency variance the model explains.
  double r_squared() const { return r_squared_; }
  int outliers_dropped() const { return outliers_dropped_; }
  std::string DebugString() const;

 private:
  std::vector<double> weights_ = {0, 0, 0, 0};  // intercept, macs, activations, layers
  double r_squared_ = 0;
  int outliers_dropped_ = 0;
};

}  // namespace superserve::nas

#endif  // SUPERSERVE_NAS_PROFILER_LATENCY_MODEL_H_
