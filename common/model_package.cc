#include "common/model_package.h"

#include <cmath>
#include <filesystem>
#include <system_error>
#include <unordered_set>

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

}  // namespace

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
  }
  return absl::OkStatus();
}

}  // namespace superserve
