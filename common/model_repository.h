#ifndef SUPERSERVE_COMMON_MODEL_REPOSITORY_H_
#define SUPERSERVE_COMMON_MODEL_REPOSITORY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_profile.h"

namespace superserve {

// One model of a model repository directory:
//   <repo>/<model>/profile.json     ModelProfile (protobuf JSON), required
//   <repo>/<model>/<checkpoint...>  whatever the model's family loads
// The router only needs the profile; the worker also loads the checkpoint.
struct ModelEntry {
  std::string name;       // the directory name; must equal profile.model
  std::string directory;  // <repo>/<model>
  ModelProfile profile;
};

// Loads one model directory (profile validated, name checked).
absl::StatusOr<ModelEntry> LoadModelDirectory(const std::string& directory);

// Every <repo>/<model>/ that has a profile.json, sorted by name. A directory
// without profile.json is skipped; a broken profile is an error naming it.
absl::StatusOr<std::vector<ModelEntry>> LoadModelRepository(const std::string& repo);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_MODEL_REPOSITORY_H_
