#ifndef SUPERSERVE_TESTS_BASELINES_REGISTERED_H_
#define SUPERSERVE_TESTS_BASELINES_REGISTERED_H_

// For tests that run the paper baselines (slackfit, maxbatch, clipper+, ...)
// by name or over PolicyNames(): registers them before main, so that before
// GoogleTest expands ValuesIn(PolicyNames()) too. Link superserve_baselines.
#include "bench/baselines/baselines.h"

namespace superserve::testing {
inline const bool kBaselinesRegistered = (RegisterBaselinePolicies(), true);
}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_BASELINES_REGISTERED_H_
