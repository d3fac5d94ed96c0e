// WorkerSpeed: per-worker speed estimates (worker_speed.h).
#include "serving/worker_speed.h"

#include <algorithm>
#include <cmath>

namespace superserve {

void WorkerSpeed::Record(Nanos measured, Nanos profiled) {
  if (measured <= 0 || profiled <= 0) return;
  const double bound = log_clip_;
  double sample = std::log(static_cast<double>(measured) / static_cast<double>(profiled));
  if (samples_ == 0) {
    // The first sample is clipped around 1 (no estimate yet).
    log_factor_ = std::clamp(sample, -bound, bound);
  } else {
    sample = std::clamp(sample, log_factor_ - bound, log_factor_ + bound);
    log_factor_ += options_.weight * (sample - log_factor_);
  }
  ++samples_;
  if (samples_ >= options_.min_samples) factor_ = std::exp(log_factor_);
}

double LowerMedian(std::vector<double> factors) {
  if (factors.empty()) return 1.0;
  const size_t k = (factors.size() - 1) / 2;
  std::nth_element(factors.begin(), factors.begin() + static_cast<std::ptrdiff_t>(k),
                   factors.end());
  return factors[k];
}

double RelativeSpeed(double factor, double fleet_median, double deadband) {
  if (!(fleet_median > 0) || !(factor > 0)) return 1.0;
  const double r = factor / fleet_median;
  return r < deadband && r > 1.0 / deadband ? 1.0 : r;
}

Nanos ProfiledLatency(const ModelProfile& profile, int32_t subnet_index, int32_t batch_size) {
  if (subnet_index < 0 || subnet_index >= static_cast<int32_t>(profile.subnets.size())) {
    return 0;  // a dynamic model: no profiled latency per batch
  }
  const int bi = profile.BatchIndex(batch_size);
  const auto& lat = profile.subnets[subnet_index].latency;
  return bi >= 0 && bi < static_cast<int>(lat.size()) ? lat[bi] : 0;
}

}  // namespace superserve
