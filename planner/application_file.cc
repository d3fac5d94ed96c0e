#include "planner/application_file.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/model_profile.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace superserve {

namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

absl::Status Bad(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::Status OnlyKeys(const Struct& s, const std::set<std::string>& allowed,
                      const std::string& where) {
  for (const auto& [key, value] : s.fields()) {
    if (!allowed.count(key)) return Bad(where, absl::StrCat("unknown key \"", key, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Number(const Struct& s, const std::string& key, double fallback,
                              const std::string& where) {
  auto it = s.fields().find(key);
  if (it == s.fields().end()) return fallback;
  if (it->second.kind_case() != Value::kNumberValue || !std::isfinite(it->second.number_value())) {
    return Bad(where, absl::StrCat("\"", key, "\" must be a number"));
  }
  return it->second.number_value();
}

absl::StatusOr<std::string> Text(const Struct& s, const std::string& key,
                                 const std::string& where) {
  auto it = s.fields().find(key);
  if (it == s.fields().end()) return std::string();
  if (it->second.kind_case() != Value::kStringValue) {
    return Bad(where, absl::StrCat("\"", key, "\" must be a string"));
  }
  return it->second.string_value();
}

absl::StatusOr<const ListValue*> List(const Struct& s, const std::string& key,
                                      const std::string& where) {
  static const ListValue kEmpty;
  auto it = s.fields().find(key);
  if (it == s.fields().end()) return &kEmpty;
  if (it->second.kind_case() != Value::kListValue) {
    return Bad(where, absl::StrCat("\"", key, "\" must be a list"));
  }
  return &it->second.list_value();
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// `warnings` collects what loading a module's profile adjusted.
absl::StatusOr<ApplicationModule> ParseModule(const Struct& s, const std::string& base_dir,
                                              int32_t default_subnet, size_t position,
                                              std::vector<std::string>* warnings) {
  std::string where = absl::StrCat("modules[", position, "]");
  if (auto st = OnlyKeys(
          s, {"name", "profile", "subnet", "batches", "after", "rate_factor", "price"}, where);
      !st.ok()) {
    return st;
  }
  ApplicationModule m;
  auto name = Text(s, "name", where);
  if (!name.ok()) return name.status();
  if (name->empty()) return Bad(where, "needs a \"name\"");
  where = absl::StrCat("module ", *name);
  auto profile_path = Text(s, "profile", where);
  if (!profile_path.ok()) return profile_path.status();
  auto batches = List(s, "batches", where);
  if (!batches.ok()) return batches.status();
  const bool has_batches = s.fields().count("batches") > 0;
  if (profile_path->empty() == !has_batches) {
    return Bad(where, "needs exactly one of \"profile\" and \"batches\"");
  }
  if (!profile_path->empty()) {
    auto subnet = Number(s, "subnet", default_subnet, where);
    if (!subnet.ok()) return subnet.status();
    if (*subnet != std::floor(*subnet) || *subnet < -1 || *subnet > 1e9) {
      return Bad(where, "\"subnet\" must be a subnet id (an integer >= 0)");
    }
    const std::string path =
        (*profile_path)[0] == '/' ? *profile_path : absl::StrCat(base_dir, "/", *profile_path);
    auto profile = ModelProfile::LoadFile(path);
    if (!profile.ok()) return Bad(where, profile.status().ToString());
    if (warnings != nullptr) {
      warnings->insert(warnings->end(), profile->warnings.begin(), profile->warnings.end());
    }
    auto module = ModuleFromProfile(*profile, static_cast<int32_t>(*subnet));
    if (!module.ok()) return Bad(where, module.status().ToString());
    m.module = *std::move(module);
  } else {
    if (s.fields().count("subnet")) return Bad(where, "\"subnet\" goes with \"profile\"");
    for (int i = 0; i < (*batches)->values_size(); ++i) {
      const Value& v = (*batches)->values(i);
      const std::string at = absl::StrCat(where, " batches[", i, "]");
      if (v.kind_case() != Value::kStructValue) return Bad(at, "must be an object");
      if (auto st = OnlyKeys(v.struct_value(), {"batch", "duration_ms"}, at); !st.ok()) return st;
      auto batch = Number(v.struct_value(), "batch", 0, at);
      if (!batch.ok()) return batch.status();
      auto ms = Number(v.struct_value(), "duration_ms", 0, at);
      if (!ms.ok()) return ms.status();
      if (*batch != std::floor(*batch) || *batch < 1 || *batch > 1e6) {
        return Bad(at, "\"batch\" must be an integer in [1, 1e6]");
      }
      if (*ms <= 0) return Bad(at, "\"duration_ms\" must be > 0");
      m.module.configs.push_back({static_cast<int32_t>(*batch), *ms / 1e3});
    }
  }
  m.module.name = *name;
  auto price = Number(s, "price", 1.0, where);
  if (!price.ok()) return price.status();
  m.module.price = *price;
  auto factor = Number(s, "rate_factor", 1.0, where);
  if (!factor.ok()) return factor.status();
  m.rate_factor = *factor;
  auto after = List(s, "after", where);
  if (!after.ok()) return after.status();
  for (const Value& v : (*after)->values()) {
    if (v.kind_case() != Value::kStringValue) return Bad(where, "\"after\" lists module names");
    m.after.push_back(v.string_value());
  }
  return m;
}

}  // namespace

absl::StatusOr<Application> ParseApplicationJson(std::string_view json, const std::string& base_dir,
                                                 int32_t subnet_id) {
  Struct root;
  google::protobuf::util::JsonParseOptions options;
  auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &root, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a JSON object: ", std::string(parsed.message())));
  }
  Application app;
  if (!root.fields().count("modules")) {
    // A ModelProfile: one module.
    auto profile = ModelProfile::FromJson(json);
    if (!profile.ok()) return profile.status();
    auto module = ModuleFromProfile(*profile, subnet_id);
    if (!module.ok()) return module.status();
    app.name = module->name;
    app.warnings = profile->warnings;
    app.modules.push_back({*std::move(module), 1.0, {}});
    return app;
  }
  if (auto st = OnlyKeys(root, {"application", "modules"}, "application file"); !st.ok()) return st;
  auto name = Text(root, "application", "application file");
  if (!name.ok()) return name.status();
  app.name = *name;
  auto modules = List(root, "modules", "application file");
  if (!modules.ok()) return modules.status();
  for (int i = 0; i < (*modules)->values_size(); ++i) {
    const Value& v = (*modules)->values(i);
    if (v.kind_case() != Value::kStructValue) {
      return Bad(absl::StrCat("modules[", i, "]"), "must be an object");
    }
    auto m = ParseModule(v.struct_value(), base_dir, subnet_id, i, &app.warnings);
    if (!m.ok()) return m.status();
    app.modules.push_back(*std::move(m));
  }
  if (auto st = ValidateApplication(app); !st.ok()) return st;
  return app;
}

absl::StatusOr<Application> LoadApplicationFile(const std::string& path, int32_t subnet_id) {
  auto text = ReadText(path);
  if (!text.ok()) return text.status();
  auto app = ParseApplicationJson(*text, Dir(path), subnet_id);
  if (!app.ok())
    return absl::Status(app.status().code(), absl::StrCat(path, ": ", app.status().message()));
  return app;
}

}  // namespace superserve
