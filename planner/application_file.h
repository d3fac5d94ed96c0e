#ifndef SUPERSERVE_PLANNER_APPLICATION_FILE_H_
#define SUPERSERVE_PLANNER_APPLICATION_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "planner/application.h"

namespace superserve {

// What superserve-plan --profile reads: either a ModelProfile (protobuf JSON,
// common/model_profile.h) planned as one module, the subnet `subnet_id`
// (-1 = the most accurate), or an application file (a JSON object with a
// "modules" list; docs/planning.md):
//
//   {"application": "chain",
//    "modules": [
//      {"name": "detect", "profile": "detect_profile.json", "subnet": 3},
//      {"name": "classify", "after": ["detect"], "rate_factor": 2.0, "price": 1.0,
//       "batches": [{"batch": 2, "duration_ms": 160}, {"batch": 4, "duration_ms": 200}]}]}
//
// Each module has a name and either "profile" (a ModelProfile file, relative
// paths from the application file's folder; "subnet" picks the subnet, else
// `subnet_id`) or inline "batches"; optional "after" (parents), "rate_factor"
// (requests per application request, default 1) and "price" (default 1).
// Unknown keys are errors.
absl::StatusOr<Application> LoadApplicationFile(const std::string& path, int32_t subnet_id = -1);

// The same from text; `base_dir` resolves relative "profile" paths.
absl::StatusOr<Application> ParseApplicationJson(std::string_view json, const std::string& base_dir,
                                                 int32_t subnet_id = -1);

}  // namespace superserve

#endif  // SUPERSERVE_PLANNER_APPLICATION_FILE_H_
