#include "common/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/small_file.h"

namespace superserve {

namespace fs = std::filesystem;

namespace {

absl::Status InPackage(const std::string& directory, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("model package ", directory, ": ", s.message()));
}

// A manifest is a few hundred bytes; the bound keeps a hostile one small.
constexpr size_t kMaxManifestBytes = size_t{1} << 20;

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  return ReadSmallFile(path.string(), kMaxManifestBytes);
}

// What to do when a package's folder is not named after its model.
std::string FolderRule(const std::string& model, const std::string& folder) {
  return absl::StrCat(
      ": a package's folder is named after its model, a new version's too: put this package "
      "of ", model, " in a folder named ", model, " (e.g. ", folder, "/", model,
      "/, with a higher manifest version to replace a served one), or name the model ",
      folder, " in manifest.json and profile.json");
}

}  // namespace

absl::StatusOr<ModelEntry> LoadModelDirectory(const std::string& directory) {
  fs::path dir(directory);
  ModelEntry e;
  e.name = dir.filename().string();
  if (e.name.empty()) e.name = dir.parent_path().filename().string();
  e.directory = dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model package ", directory, ": not a directory"));
  }
  if (fs::exists(dir / "manifest.json", ec)) {
    auto json = ReadFile(dir / "manifest.json");
    if (!json.ok()) return InPackage(directory, json.status());
    auto manifest = ModelManifest::FromJson(*json);
    if (!manifest.ok()) return InPackage(directory, manifest.status());
    if (manifest->name != e.name) {
      // The rule holds everywhere a package travels (the repository scan,
      // a .tar, the copy each worker is sent), so a second version
      // (myfmnist-v2/) is refused too: say what to do.
      return InPackage(directory, absl::InvalidArgumentError(absl::StrCat(
                                      "manifest.json: field name: \"", manifest->name,
                                      "\" differs from the package directory's name \"", e.name,
                                      "\"", FolderRule(manifest->name, e.name))));
    }
    e.manifest = *std::move(manifest);
  }
  if (!fs::exists(dir / "profile.json", ec)) {
    return InPackage(directory, absl::InvalidArgumentError(
                                    "profile.json: missing (required: the subnets and their "
                                    "accuracy; latency_us may be left out for a worker to "
                                    "measure)"));
  }
  auto profile = ModelProfile::LoadFileAllowingUnmeasured((dir / "profile.json").string());
  if (!profile.ok()) {
    return InPackage(directory,
                     absl::Status(profile.status().code(),
                                  absl::StrCat("profile.json: ", profile.status().message())));
  }
  if (e.manifest.has_value()) {
    if (auto s = CheckManifestAgainstPackage(*e.manifest, *profile, e.directory); !s.ok()) {
      return InPackage(directory, s);
    }
  } else if (profile->model != e.name) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model directory ", directory, ": profile.json names model \"", profile->model,
        "\", expected \"", e.name, "\" (the directory name)", FolderRule(profile->model, e.name)));
  }
  e.profile = *std::move(profile);
  return e;
}

namespace {

// The file that makes `dir` a package ("" if none), as LoadModelRepository
// tells one: a manifest.json or a profile.json.
std::string PackageFile(const fs::path& dir) {
  std::error_code ec;
  for (const char* f : {"manifest.json", "profile.json"}) {
    if (fs::exists(dir / f, ec)) return f;
  }
  return "";
}

}  // namespace

absl::Status CheckNotAPackage(const std::string& flag, const std::string& repo) {
  const std::string own = PackageFile(repo);
  if (own.empty()) return absl::OkStatus();
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(repo, ec)) {
    std::error_code de;
    if (d.is_directory(de) && !PackageFile(d.path()).empty()) return absl::OkStatus();
  }
  fs::path parent = fs::path(repo).lexically_normal();
  if (!parent.has_filename()) parent = parent.parent_path();  // "models/fmnist/"
  parent = parent.parent_path();
  const std::string meant = parent.empty() ? "." : parent.string();
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " ", repo, " is a model package (it has a ", own,
      "), not a repository: pass the folder that holds the packages, its parent: ", flag, " ",
      meant));
}

absl::StatusOr<std::vector<ModelEntry>> LoadModelRepository(const std::string& repo) {
  std::error_code ec;
  if (!fs::is_directory(repo, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository ", repo, ": not a directory"));
  }
  std::vector<ModelEntry> out;
  for (const auto& d : fs::directory_iterator(repo, ec)) {
    // error_code overloads throughout: an entry that cannot be followed (a
    // symlink loop, a dangling link) is not a model folder, not a crash.
    std::error_code de;
    if (!d.is_directory(de) || (!fs::exists(d.path() / "profile.json", de) &&
                                !fs::exists(d.path() / "manifest.json", de))) {
      continue;
    }
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
