#include "common/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace superserve {

namespace fs = std::filesystem;

absl::StatusOr<ModelEntry> LoadModelDirectory(const std::string& directory) {
  fs::path dir(directory);
  auto profile = ModelProfile::LoadFile((dir / "profile.json").string());
  if (!profile.ok()) return profile.status();
  ModelEntry e;
  e.name = dir.filename().string();
  if (e.name.empty()) e.name = dir.parent_path().filename().string();
  e.directory = dir.string();
  if (profile->model != e.name) {
    return absl::InvalidArgumentError(absl::StrCat("model directory ", directory,
                                                   ": profile.json names model \"",
                                                   profile->model, "\", expected \"", e.name,
                                                   "\" (the directory name)"));
  }
  e.profile = *std::move(profile);
  return e;
}

absl::StatusOr<std::vector<ModelEntry>> LoadModelRepository(const std::string& repo) {
  std::error_code ec;
  if (!fs::is_directory(repo, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository ", repo, ": not a directory"));
  }
  std::vector<ModelEntry> out;
  for (const auto& d : fs::directory_iterator(repo, ec)) {
    if (!d.is_directory() || !fs::exists(d.path() / "profile.json")) continue;
    auto e = LoadModelDirectory(d.path().string());
    if (!e.ok()) return e.status();
    out.push_back(*std::move(e));
  }
  if (ec) return absl::InternalError(absl::StrCat("model repository ", repo, ": ", ec.message()));
  std::sort(out.begin(), out.end(),
            [](const ModelEntry& a, const ModelEntry& b) { return a.name < b.name; });
  return out;
}

}  // namespace superserve
