#ifndef SUPERSERVE_COMMON_MODEL_DIGEST_H_
#define SUPERSERVE_COMMON_MODEL_DIGEST_H_

#include <string>

#include "absl/status/statusor.h"

namespace superserve {

// What a router and a worker compare to agree that they serve the same
// version of a model (docs/security.md). Hex SHA-256 digests of a model
// directory's files:
//   profile     <dir>/profile.json, its bytes
//   checkpoint  every other regular file under <dir> (recursively) but
//               manifest.json, in order of relative path, each as
//               "path\0size\0bytes"; empty when the directory holds nothing
//               but the profile and the manifest (a router's copy usually
//               does; the manifest is checked against the profile instead)
struct ModelDigest {
  std::string profile;
  std::string checkpoint;
};

absl::StatusOr<ModelDigest> DigestModelDirectory(const std::string& directory);

// Hex SHA-256 of `bytes`.
std::string Sha256Hex(const std::string& bytes);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_MODEL_DIGEST_H_
