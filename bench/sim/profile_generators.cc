#include "bench/sim/profile_generators.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/time.h"

namespace superserve {

const char* ProfileShapeName(ProfileShape s) {
  switch (s) {
    case ProfileShape::kLinear: return "linear";
    case ProfileShape::kGpu: return "gpu";
    case ProfileShape::kCpu: return "cpu";
  }
  return "?";
}

ModelProfile ShapedProfile(ProfileShape shape, int subnets, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  ModelProfile p;
  p.model = absl::StrCat(ProfileShapeName(shape), subnets);
  p.batch_sizes = {1, 2, 4, 8, 16, 32};
  const double grow_fixed = 1.0 + 3.0 * u(rng);
  const double grow_slope = 1.0 + 3.0 * u(rng);
  const double curve = 1.0 + 2.0 * u(rng);  // how late in accuracy the cost rises
  const int knee1 = u(rng) < 0.5 ? 4 : 8;
  const int knee2 = u(rng) < 0.5 ? 16 : 32;
  for (int i = 0; i < subnets; ++i) {
    const double x = subnets == 1 ? 0 : static_cast<double>(i) / (subnets - 1);
    const double xc = std::pow(x, curve);
    SubnetProfile s;
    s.id = i;
    s.accuracy = 70.0 + 10.0 * x;
    double row_scale = 1.0;
    if (shape == ProfileShape::kCpu) row_scale = 0.92 + 0.16 * u(rng);
    for (int32_t b : p.batch_sizes) {
      double ms = 0;
      switch (shape) {
        case ProfileShape::kLinear:
          ms = 1.5 * (1 + grow_fixed * xc) + 0.8 * (1 + grow_slope * xc) * b;
          break;
        case ProfileShape::kGpu:
          ms = 8.0 * (1 + grow_fixed * xc) + 0.15 * (1 + grow_slope * xc) * b;
          break;
        case ProfileShape::kCpu: {
          const double c = 0.4 * (1 + grow_slope * xc);
          ms = 0.6 * (1 + grow_fixed * xc) + c * std::min(b, knee1) +
               c * std::max(0, b - knee2);
          break;
        }
      }
      s.latency.push_back(Micros(1000.0 * ms * row_scale));
    }
    p.subnets.push_back(s);
  }
  return p;
}

}  // namespace superserve
