#include "router/model_versions.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace superserve {

std::string ModelVersions::InternalName(const std::string& name, uint32_t version, bool first) {
  return first ? name : absl::StrCat(name, "@", version);
}

void ModelVersions::Add(const std::string& name, uint32_t version, const std::string& internal) {
  std::lock_guard<std::mutex> lock(mu_);
  Versions& v = models_[name];
  v.internal[version] = internal;
  owners_[internal] = {name, version};
  if (v.current == 0 || version > v.current) v.current = version;
}

absl::StatusOr<std::string> ModelVersions::Resolve(const std::string& name,
                                                   uint32_t version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    if (version == 0) return name;
    return absl::InvalidArgumentError(
        absl::StrCat("model \"", name, "\" has no version ", version, " (not served)"));
  }
  const uint32_t want = version == 0 ? it->second.current : version;
  auto v = it->second.internal.find(want);
  if (v == it->second.internal.end()) {
    std::vector<uint32_t> served;
    for (const auto& [n, internal] : it->second.internal) served.push_back(n);
    return absl::InvalidArgumentError(absl::StrCat("model \"", name, "\" has no version ", want,
                                                   " (served: ", absl::StrJoin(served, ", "), ")"));
  }
  return v->second;
}

uint32_t ModelVersions::Current(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? 0 : it->second.current;
}

absl::StatusOr<std::vector<std::string>> ModelVersions::Remove(const std::string& name,
                                                               uint32_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("model \"", name, "\" is not served"));
  }
  Versions& v = it->second;
  std::vector<std::string> out;
  if (version == 0) {
    for (const auto& [n, internal] : v.internal) {
      out.push_back(internal);
      owners_.erase(internal);
    }
    models_.erase(it);
    return out;
  }
  auto one = v.internal.find(version);
  if (one == v.internal.end()) {
    return absl::NotFoundError(absl::StrCat("model \"", name, "\" has no version ", version));
  }
  if (version == v.current && v.internal.size() > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "version ", version, " of model \"", name,
        "\" is the current one; unregister the whole model, or the other versions first"));
  }
  out.push_back(one->second);
  owners_.erase(one->second);
  v.internal.erase(one);
  if (v.internal.empty()) models_.erase(it);
  return out;
}

std::optional<ModelVersions::Owner> ModelVersions::OwnerOf(const std::string& internal) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = owners_.find(internal);
  if (it == owners_.end()) return std::nullopt;
  Owner o;
  o.name = it->second.first;
  o.version = it->second.second;
  o.current = models_.at(o.name).current == o.version;
  return o;
}

}  // namespace superserve
