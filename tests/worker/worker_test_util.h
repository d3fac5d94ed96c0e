#ifndef SUPERSERVE_TESTS_WORKER_WORKER_TEST_UTIL_H_
#define SUPERSERVE_TESTS_WORKER_WORKER_TEST_UTIL_H_

#include "common/model_repository.h"

namespace superserve::testing {

// Model "m": inputs of shape {2}, batches 1 and 4, 3 classes, no subnets
// (the executors under test do not look at them).
inline ModelEntry SmallModelEntry() {
  ModelEntry e;
  e.name = "m";
  e.profile.model = "m";
  e.profile.input_shape = {2};
  e.profile.batch_sizes = {1, 4};
  e.profile.num_classes = 3;
  return e;
}

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_WORKER_WORKER_TEST_UTIL_H_
