#ifndef SUPERSERVE_BENCH_SIM_PROFILE_GENERATORS_H_
#define SUPERSERVE_BENCH_SIM_PROFILE_GENERATORS_H_

#include <cstdint>

#include "common/model_profile.h"

namespace superserve {

enum class ProfileShape { kLinear, kGpu, kCpu };

// "linear", "gpu", "cpu".
const char* ProfileShapeName(ProfileShape s);

// A Pareto-shaped profile of `subnets` subnets (accuracy 70-80 %, rising with
// latency), batches 1-32, named by its shape and subnet count:
//   linear: fixed + per-sample cost, both growing with accuracy (the
//           paper-shaped profile's form);
//   gpu:    a large fixed cost growing with accuracy, a small per-sample one;
//   cpu:    like models/fmnist: linear up to a knee, flat up to a second knee,
//           linear again, each subnet's row scaled by up to +-8 % (measured
//           profiles are not monotone in accuracy).
// Deterministic in `seed`. The default policy's property test and the
// single-subnet experiment of superserve-symphony-repro draw from it.
ModelProfile ShapedProfile(ProfileShape shape, int subnets, uint64_t seed);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_SIM_PROFILE_GENERATORS_H_
