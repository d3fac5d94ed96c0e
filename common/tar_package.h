#ifndef SUPERSERVE_COMMON_TAR_PACKAGE_H_
#define SUPERSERVE_COMMON_TAR_PACKAGE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace superserve {

// A model package as one tar file (docs/packages.md): the package's files at
// the top level or inside one folder, as `tar -cf pkg.tar fmnist/` writes
// them (ustar, GNU or pax; uncompressed).

struct TarMember {
  std::string name;  // the file's name, without the folder
  std::string content;
};

inline constexpr size_t kMaxTarMembers = 64;
inline constexpr size_t kMaxTarBytes = size_t{1} << 30;

// Parses the archive in memory. INVALID_ARGUMENT, naming the member, for
// anything but regular files (links, devices, GNU long names), absolute
// paths, "..", folders nested deeper than one or more than one folder, a
// file listed twice, a bad header checksum, a size that runs past the end,
// more than kMaxTarMembers files or kMaxTarBytes in all.
absl::StatusOr<std::vector<TarMember>> ParseTarPackage(std::string_view bytes);

// Reads `tar_path`, parses it, and writes its files to
// `<scratch_dir>/<model>/`, <model> being the name its manifest.json gives
// (the folder a package lives in is named after its model). Returns that
// folder; LoadModelDirectory then validates the package as any other.
absl::StatusOr<std::string> UnpackTarPackage(const std::string& tar_path,
                                             const std::string& scratch_dir);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_TAR_PACKAGE_H_
