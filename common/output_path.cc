#include "common/output_path.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;

absl::Status Refuse(absl::string_view flag, const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": ", why));
}

}  // namespace

absl::Status CheckOutputFile(absl::string_view flag, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " is empty"));
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Refuse(flag, path, "is a directory");
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::exists(parent, ec)) {
    return Refuse(flag, path, absl::StrCat("folder ", parent.string(), " does not exist"));
  }
  if (!fs::is_directory(parent, ec)) {
    return Refuse(flag, path, absl::StrCat(parent.string(), " is not a folder"));
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return Refuse(flag, path, absl::StrCat("folder ", parent.string(), " is not writable"));
  }
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    return Refuse(flag, path, "exists and is not writable");
  }
  return absl::OkStatus();
}

absl::Status MakeOutputDirectory(absl::string_view flag, const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " is empty"));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Refuse(flag, dir, absl::StrCat("cannot create it: ", ec.message()));
  if (!fs::is_directory(dir, ec)) return Refuse(flag, dir, "is not a folder");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return Refuse(flag, dir, "is not writable");
  return absl::OkStatus();
}

}  // namespace superserve
