#include "common/model_package.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <unordered_set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/util/json_util.h"
#include "superserve/v1/package.pb.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("manifest.json: field ", field, ": ", problem));
}

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(s[0])) return false;
  for (char c : s) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

constexpr const char* kDtypes[] = {"float32", "float16", "int64", "int32", "uint8"};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Little-endian fields of a zip record.
uint64_t ReadLe(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool ReadAt(std::ifstream& in, uint64_t offset, unsigned char* out, size_t n) {
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(n));
  return in.gcount() == static_cast<std::streamsize>(n);
}

}  // namespace

absl::Status CheckZipArchive(const std::string& path) {
  // The zip layout (APPNOTE.TXT 4.3): entries, then the central directory,
  // then the end-of-central-directory record (22 bytes plus a comment of at
  // most 65535) that ends the file. Only those trailing records are read.
  constexpr size_t kEocdBytes = 22;
  constexpr size_t kMaxComment = 65535;
  constexpr size_t kZip64LocatorBytes = 20;
  constexpr size_t kZip64EocdBytes = 56;
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read it: ", ec.message()));
  constexpr const char* kTruncated =
      "; the file looks truncated (an interrupted copy or download?): copy it again";
  if (size < kEocdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a LibTorch archive (a zip file): ", size, " bytes", kTruncated));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open it");
  const uint64_t tail_size = std::min<uint64_t>(size, kEocdBytes + kMaxComment);
  std::string tail(tail_size, '\0');
  auto* t = reinterpret_cast<unsigned char*>(tail.data());
  if (!ReadAt(in, size - tail_size, t, tail_size)) return absl::DataLossError("cannot read it");
  // The record is the last one whose comment ends exactly at the end of the
  // file: a stray signature among the weights does not pass for it.
  int64_t found = -1;
  for (int64_t i = static_cast<int64_t>(tail_size - kEocdBytes); i >= 0; --i) {
    if (t[i] == 'P' && t[i + 1] == 'K' && t[i + 2] == 5 && t[i + 3] == 6 &&
        i + kEocdBytes + ReadLe(t + i + 20, 2) == tail_size) {
      found = i;
      break;
    }
  }
  if (found < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a complete LibTorch archive (a zip file): no end-of-central-directory record at "
        "the end of its ", size, " bytes", kTruncated));
  }
  const uint64_t eocd = size - tail_size + static_cast<uint64_t>(found);
  uint64_t directory_size = ReadLe(t + found + 12, 4);
  uint64_t directory_offset = ReadLe(t + found + 16, 4);
  uint64_t directory_end = eocd;  // the directory is followed by the record
  if (directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
    // Zip64 (archives over 4 GiB): a locator just before the record points
    // at the zip64 end-of-central-directory record with 64-bit fields.
    unsigned char locator[kZip64LocatorBytes];
    unsigned char record[kZip64EocdBytes];
    if (eocd < kZip64LocatorBytes ||
        !ReadAt(in, eocd - kZip64LocatorBytes, locator, kZip64LocatorBytes) ||
        ReadLe(locator, 4) != 0x07064b50) {
      return absl::InvalidArgumentError(absl::StrCat(
          "not a complete LibTorch archive (a zip file): its zip64 locator is missing",
          kTruncated));
    }
    const uint64_t record_offset = ReadLe(locator + 8, 8);
    if (record_offset + kZip64EocdBytes > eocd ||
        !ReadAt(in, record_offset, record, kZip64EocdBytes) || ReadLe(record, 4) != 0x06064b50) {
      return absl::InvalidArgumentError(absl::StrCat(
          "not a complete LibTorch archive (a zip file): its zip64 end-of-central-directory "
          "record at byte ", record_offset, " is missing", kTruncated));
    }
    directory_size = ReadLe(record + 40, 8);
    directory_offset = ReadLe(record + 48, 8);
    directory_end = record_offset;
  }
  unsigned char header[4];
  if (directory_offset > directory_end || directory_size > directory_end - directory_offset ||
      (directory_size > 0 &&
       (!ReadAt(in, directory_offset, header, 4) || ReadLe(header, 4) != 0x02014b50))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a complete LibTorch archive (a zip file): its central directory (", directory_size,
        " bytes at byte ", directory_offset, ") is not where its end record says, within the ",
        size, "-byte file", kTruncated));
  }
  return absl::OkStatus();
}

std::string_view KindName(ModelManifest::Kind kind) {
  switch (kind) {
    case ModelManifest::Kind::kSupernet:
      return "supernet";
    case ModelManifest::Kind::kDynamic:
      return "dynamic";
    case ModelManifest::Kind::kStatic:
      return "static";
  }
  return "?";
}

absl::StatusOr<ModelManifest> ModelManifest::FromProto(const v1::ModelManifest& p) {
  ModelManifest m;
  if (p.name().empty()) return FieldError("name", "missing");
  if (!ValidName(p.name())) {
    return FieldError("name", absl::StrCat("\"", p.name(),
                                           "\" is not [A-Za-z0-9][A-Za-z0-9._-]* (at most 128)"));
  }
  m.name = p.name();
  if (p.version() == 0) return FieldError("version", "missing or 0 (versions start at 1)");
  m.version = p.version();
  if (p.kind() == "supernet") {
    m.kind = Kind::kSupernet;
  } else if (p.kind() == "dynamic") {
    m.kind = Kind::kDynamic;
  } else if (p.kind() == "static") {
    m.kind = Kind::kStatic;
  } else if (p.kind().empty()) {
    return FieldError("kind", "missing (supernet, dynamic or static)");
  } else {
    return FieldError("kind",
                      absl::StrCat("\"", p.kind(), "\" is not supernet, dynamic or static"));
  }
  if (p.family().empty()) return FieldError("family", "missing");
  m.family = p.family();
  if (p.has_architecture()) {
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    // Cannot fail for a Struct that was just parsed from JSON.
    (void)google::protobuf::util::MessageToJsonString(p.architecture(), &m.architecture_json,
                                                      opts);
  }
  if (!p.has_input()) return FieldError("input", "missing (dtype and shape)");
  if (p.input().dtype().empty()) return FieldError("input.dtype", "missing");
  bool known = false;
  for (const char* d : kDtypes) known = known || p.input().dtype() == d;
  if (!known) {
    return FieldError("input.dtype",
                      absl::StrCat("\"", p.input().dtype(),
                                   "\" is not one of float32, float16, int64, int32, uint8"));
  }
  m.input_dtype = p.input().dtype();
  if (p.input().shape().empty()) return FieldError("input.shape", "missing (per-sample shape)");
  for (int i = 0; i < p.input().shape_size(); ++i) {
    if (p.input().shape(i) < 1) {
      return FieldError(absl::StrCat("input.shape[", i, "]"),
                        absl::StrCat(p.input().shape(i), " is not >= 1"));
    }
    m.input_shape.push_back(p.input().shape(i));
  }
  std::unordered_set<std::string> seen;
  for (int i = 0; i < p.classes_size(); ++i) {
    const std::string& c = p.classes(i);
    if (c.empty()) return FieldError(absl::StrCat("classes[", i, "]"), "empty label");
    if (!seen.insert(c).second) {
      return FieldError(absl::StrCat("classes[", i, "]"),
                        absl::StrCat("label \"", c, "\" appears twice"));
    }
    m.classes.push_back(c);
  }
  if (!std::isfinite(p.default_slo_ms()) || p.default_slo_ms() <= 0) {
    return FieldError("default_slo_ms",
                      absl::StrCat(p.default_slo_ms(), " is not a finite value > 0 (ms)"));
  }
  m.default_slo_ms = p.default_slo_ms();
  if (!p.checkpoint().empty()) {
    fs::path c(p.checkpoint());
    bool escapes = c.is_absolute();
    for (const auto& part : c) escapes = escapes || part == "..";
    if (escapes) {
      return FieldError("checkpoint", absl::StrCat("\"", p.checkpoint(),
                                                   "\" must be a path inside the package "
                                                   "(relative, no \"..\")"));
    }
    m.checkpoint = c.lexically_normal().string();
  }
  return m;
}

absl::StatusOr<ModelManifest> ModelManifest::FromJson(std::string_view json) {
  v1::ModelManifest p;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &p, opts);
  if (!st.ok()) {
    // protobuf names the offending field ("Cannot find field: x", "name:
    // invalid value ...") or the syntax problem.
    return absl::InvalidArgumentError(
        absl::StrCat("manifest.json: not a valid manifest: ", st.message().as_string()));
  }
  return FromProto(p);
}

absl::Status CheckManifestAgainstPackage(const ModelManifest& m, const ModelProfile& profile,
                                         const std::string& directory) {
  if (profile.model != m.name) {
    return FieldError("name", absl::StrCat("\"", m.name, "\" but profile.json's model is \"",
                                           profile.model, "\""));
  }
  if (profile.family != m.family) {
    return FieldError("family", absl::StrCat("\"", m.family, "\" but profile.json's family is \"",
                                             profile.family, "\""));
  }
  if (profile.input_shape != m.input_shape) {
    return FieldError("input.shape",
                      absl::StrCat(ShapeString(m.input_shape), " but profile.json's input_shape is ",
                                   ShapeString(profile.input_shape)));
  }
  if (!m.classes.empty() && static_cast<int64_t>(m.classes.size()) != profile.num_classes) {
    return FieldError("classes", absl::StrCat(m.classes.size(), " labels but profile.json has ",
                                              profile.num_classes, " classes (num_classes)"));
  }
  switch (m.kind) {
    case ModelManifest::Kind::kDynamic:
      if (!profile.is_dynamic) {
        return FieldError("kind",
                          "dynamic but profile.json has no dynamic section (application "
                          "histograms)");
      }
      break;
    case ModelManifest::Kind::kSupernet:
      if (profile.is_dynamic || profile.subnets.empty()) {
        return FieldError("kind", "supernet but profile.json has no subnets");
      }
      break;
    case ModelManifest::Kind::kStatic:
      if (profile.is_dynamic || profile.subnets.size() != 1) {
        return FieldError("kind", absl::StrCat("static but profile.json has ",
                                               profile.subnets.size(),
                                               " subnets (a static model has exactly one)"));
      }
      break;
  }
  if (!m.checkpoint.empty()) {
    std::error_code ec;
    fs::path c = fs::path(directory) / m.checkpoint;
    if (!fs::is_regular_file(c, ec)) {
      return FieldError("checkpoint",
                        absl::StrCat("\"", m.checkpoint, "\": no such file in the package"));
    }
    // A checkpoint cut short used to pass every check here and fail only
    // when a worker loaded it (superserve-admin validate said "valid").
    if (absl::EndsWith(m.checkpoint, ".pt") || absl::EndsWith(m.checkpoint, ".pth")) {
      if (auto s = CheckZipArchive(c.string()); !s.ok()) {
        return FieldError("checkpoint", absl::StrCat("\"", m.checkpoint, "\": ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace superserve
