#ifndef SUPERSERVE_COMMON_MODEL_PACKAGE_H_
#define SUPERSERVE_COMMON_MODEL_PACKAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_profile.h"

namespace superserve {

namespace v1 {
class ModelManifest;
}

// The validated view of a package's manifest.json (proto/superserve/v1/
// package.proto; reference: docs/packages.md).
struct ModelManifest {
  enum class Kind { kSupernet, kDynamic, kStatic };

  std::string name;
  uint32_t version = 0;
  Kind kind = Kind::kSupernet;
  std::string family;
  std::string architecture_json;  // the "architecture" object, re-serialised
  std::string input_dtype;
  std::vector<int64_t> input_shape;
  std::vector<std::string> classes;
  double default_slo_ms = 0;
  std::string checkpoint;  // relative to the package directory; may be empty

  // Parses and validates the manifest on its own (no profile, no files).
  // Every error starts with "manifest.json: field <name>: ".
  static absl::StatusOr<ModelManifest> FromJson(std::string_view json);
  static absl::StatusOr<ModelManifest> FromProto(const v1::ModelManifest& proto);
};

std::string_view KindName(ModelManifest::Kind kind);

// Checks that the file at `path` is a complete zip archive, as every LibTorch
// checkpoint is (torch::save, torch.jit.save, torch.save since PyTorch 1.6):
// its end-of-central-directory record ends the file and its central directory
// lies inside it. Reads only the file's trailing records, without LibTorch,
// so that the torch-free router and superserve-admin validate refuse a copy
// cut short. The message says what is wrong, not which file.
absl::Status CheckZipArchive(const std::string& path);

// The manifest's agreement with the profile and the package's files:
// name == profile.model, family == profile.family, input shape ==
// profile.input_shape, classes (when given) == profile.num_classes, kind
// matches the profile (dynamic <=> histograms, static <=> one subnet), and
// the checkpoint file exists inside `directory` (and, for a .pt or .pth
// file, is a complete zip archive: CheckZipArchive). Errors name the field.
absl::Status CheckManifestAgainstPackage(const ModelManifest& manifest,
                                         const ModelProfile& profile,
                                         const std::string& directory);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_MODEL_PACKAGE_H_
