#include "common/tar_package.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/model_package.h"

namespace superserve {
namespace {

constexpr size_t kBlock = 512;

// A NUL- or space-terminated octal field; false if malformed or too large.
bool ParseOctal(std::string_view field, uint64_t* out) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < field.size() && field[i] == ' ') ++i;
  bool any = false;
  for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v > (UINT64_MAX >> 3)) return false;
    v = (v << 3) | static_cast<uint64_t>(field[i] - '0');
    any = true;
  }
  for (; i < field.size(); ++i) {
    if (field[i] != ' ' && field[i] != '\0') return false;
  }
  *out = v;
  return any;
}

std::string_view CString(std::string_view field) {
  const size_t end = field.find('\0');
  return end == std::string_view::npos ? field : field.substr(0, end);
}

bool AllZero(std::string_view block) {
  for (char c : block) {
    if (c != '\0') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<TarMember>> ParseTarPackage(std::string_view bytes) {
  std::vector<TarMember> out;
  std::set<std::string> seen;
  std::string folder;  // the one folder members may sit in ("" = none yet)
  size_t total = 0;
  size_t offset = 0;
  auto bad = [](const std::string& member, const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("tar package: member \"", member, "\": ", why));
  };
  while (true) {
    if (offset + kBlock > bytes.size()) {
      if (offset == bytes.size() && !out.empty()) break;  // no end blocks: tolerated
      return absl::InvalidArgumentError(absl::StrCat(
          "tar package: truncated at byte ", offset, " (a header needs 512 bytes)"));
    }
    const std::string_view h = bytes.substr(offset, kBlock);
    if (AllZero(h)) break;  // the end-of-archive marker
    // Checksum: the header's bytes, its own field counted as spaces.
    uint64_t expected = 0;
    if (!ParseOctal(h.substr(148, 8), &expected)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tar package: header at byte ", offset, " has no valid checksum"));
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      sum += (i >= 148 && i < 156) ? static_cast<uint64_t>(' ')
                                   : static_cast<uint64_t>(static_cast<unsigned char>(h[i]));
    }
    std::string name(CString(h.substr(0, 100)));
    if (h.substr(257, 5) == "ustar") {
      const std::string_view prefix = CString(h.substr(345, 155));
      if (!prefix.empty()) name = absl::StrCat(std::string(prefix), "/", name);
    }
    if (sum != expected) return bad(name, "header checksum mismatch (not a tar file?)");
    uint64_t size = 0;
    if (!ParseOctal(h.substr(124, 12), &size)) return bad(name, "bad size field");
    const char type = h[156];
    offset += kBlock;
    if (size > bytes.size() - offset) {
      return bad(name, absl::StrCat("its ", size, " bytes run past the end of the file"));
    }
    const std::string_view content = bytes.substr(offset, size);
    offset += (size + kBlock - 1) / kBlock * kBlock;
    if (offset > bytes.size()) offset = bytes.size();
    if (type == 'x' || type == 'g') continue;  // pax attributes: names here are plain ASCII
    if (type != '0' && type != '\0' && type != '5') {
      return bad(name, absl::StrCat("type '", std::string(1, type),
                                    "' (links and special files are refused; regular files "
                                    "only)"));
    }
    // The path: "file", "folder/file" or "folder/" (after a leading "./").
    std::string path = name;
    while (path.rfind("./", 0) == 0) path = path.substr(2);
    if (path.empty() || path == ".") {
      if (type == '5') continue;
      return bad(name, "empty name");
    }
    if (path[0] == '/') return bad(name, "absolute path");
    std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
    for (const auto& p : parts) {
      if (p == "..") return bad(name, "\"..\" in the path");
      if (p == ".") return bad(name, "\".\" inside the path");
    }
    if (type == '5') {
      if (parts.size() != 1) return bad(name, "folders nested inside the package");
      if (!folder.empty() && folder != parts[0]) return bad(name, "a second folder");
      folder = parts[0];
      continue;
    }
    if (parts.size() > 2) return bad(name, "a file nested more than one folder deep");
    if (parts.size() == 2) {
      if (!folder.empty() && folder != parts[0]) return bad(name, "a second folder");
      folder = parts[0];
    }
    const std::string& file = parts.back();
    if (!seen.insert(file).second) return bad(name, "listed twice");
    if (out.size() == kMaxTarMembers) {
      return bad(name, absl::StrCat("more than ", kMaxTarMembers, " files"));
    }
    total += content.size();
    if (total > kMaxTarBytes) {
      return bad(name, absl::StrCat("the files exceed ", kMaxTarBytes >> 20, " MiB in all"));
    }
    out.push_back(TarMember{file, std::string(content)});
  }
  if (out.empty()) return absl::InvalidArgumentError("tar package: no files");
  return out;
}

absl::StatusOr<std::string> UnpackTarPackage(const std::string& tar_path,
                                             const std::string& scratch_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto size = fs::file_size(tar_path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read ", tar_path, ": ", ec.message()));
  if (size > kMaxTarBytes + (size_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(tar_path, ": larger than ", kMaxTarBytes >> 20, " MiB"));
  }
  std::ifstream in(tar_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", tar_path));
  auto members = ParseTarPackage(ss.str());
  if (!members.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(tar_path, ": ", members.status().message()));
  }
  const TarMember* manifest = nullptr;
  for (const auto& m : *members) {
    if (m.name == "manifest.json") manifest = &m;
  }
  if (manifest == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(tar_path, ": no manifest.json (a tar package needs one to name its model)"));
  }
  auto parsed = ModelManifest::FromJson(manifest->content);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(tar_path, ": ", parsed.status().message()));
  }
  const std::string& model = parsed->name;
  if (model.empty() || model == "." || model == ".." ||
      model.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(tar_path, ": manifest.json: field name: \"", model, "\" is not a folder name"));
  }
  const fs::path dir = fs::path(scratch_dir) / model;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  for (const auto& m : *members) {
    std::ofstream o(dir / m.name, std::ios::binary);
    o.write(m.content.data(), static_cast<std::streamsize>(m.content.size()));
    if (!o) return absl::InternalError(absl::StrCat("cannot write ", (dir / m.name).string()));
  }
  return dir.string();
}

}  // namespace superserve
