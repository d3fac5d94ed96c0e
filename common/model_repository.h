#ifndef SUPERSERVE_COMMON_MODEL_REPOSITORY_H_
#define SUPERSERVE_COMMON_MODEL_REPOSITORY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_package.h"
#include "common/model_profile.h"

namespace superserve {

// One model of a model repository directory, i.e. one model package
// (docs/packages.md):
//   <repo>/<model>/manifest.json    ModelManifest (protobuf JSON); optional
//                                   for the older layout without one
//   <repo>/<model>/profile.json     ModelProfile (protobuf JSON), required
//   <repo>/<model>/<checkpoint...>  whatever the model's family loads
// The router only needs the profile; the worker also loads the checkpoint.
// Start-up (LoadModelRepository) and Admin.RegisterModel both load through
// LoadModelDirectory, so both accept and reject exactly the same packages.
struct ModelEntry {
  std::string name;       // the directory name; must equal profile.model
  std::string directory;  // <repo>/<model>
  ModelProfile profile;
  std::optional<ModelManifest> manifest;  // absent in the older layout
};

// Loads and validates one model package: the manifest on its own, the
// profile's rules, the name against the directory, and the manifest against
// the profile and the package's files. Errors start with "model package
// <directory>: " and name the file and the field.
absl::StatusOr<ModelEntry> LoadModelDirectory(const std::string& directory);

// Every <repo>/<model>/ that has a manifest.json or a profile.json, sorted by
// name. Other directories are skipped; a broken package is an error naming it.
absl::StatusOr<std::vector<ModelEntry>> LoadModelRepository(const std::string& repo);

// A repository flag pointed at one package instead of the folder holding it
// (--model_repo models/fmnist for models/): `repo` has a manifest.json or a
// profile.json of its own and no <repo>/<model>/ package. The error names
// `flag`, the folder and its parent, the repository meant; OK otherwise (an
// empty repository too: a fleet may register every model at run time).
absl::Status CheckNotAPackage(const std::string& flag, const std::string& repo);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_MODEL_REPOSITORY_H_
