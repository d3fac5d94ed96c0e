#include "planner/module.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace superserve {

absl::Status ValidateModule(const Module& module) {
  const std::string who = module.name.empty() ? "module" : absl::StrCat("module ", module.name);
  if (module.configs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": no batch configurations"));
  }
  if (!std::isfinite(module.price) || module.price <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": price must be finite and > 0"));
  }
  std::set<int32_t> seen;
  for (const BatchConfig& c : module.configs) {
    if (c.batch <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": batch ", c.batch, " must be > 0"));
    }
    if (!seen.insert(c.batch).second) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": batch ", c.batch, " listed twice"));
    }
    if (!std::isfinite(c.duration_s) || c.duration_s <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": batch ", c.batch, " duration must be finite and > 0"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Module> ModuleFromProfile(const ModelProfile& profile, int32_t subnet_id) {
  if (profile.subnets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile ", profile.model, " has no subnets (a dynamic-only profile?)"));
  }
  int index = 0;
  if (subnet_id < 0) {
    for (size_t i = 1; i < profile.subnets.size(); ++i) {
      if (profile.subnets[i].accuracy > profile.subnets[index].accuracy)
        index = static_cast<int>(i);
    }
  } else {
    index = profile.SubnetIndex(subnet_id);
    if (index < 0) {
      return absl::NotFoundError(
          absl::StrCat("profile ", profile.model, " has no subnet with id ", subnet_id));
    }
  }
  const SubnetProfile& s = profile.subnets[index];
  if (s.latency.size() != profile.batch_sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("profile ", profile.model, " subnet ", s.id,
                                                   ": one latency per batch size expected"));
  }
  Module m;
  m.name = profile.model;
  for (size_t i = 0; i < profile.batch_sizes.size(); ++i) {
    m.configs.push_back(
        {profile.batch_sizes[i], static_cast<double>(s.latency[i]) / kNanosPerSecond});
  }
  if (auto st = ValidateModule(m); !st.ok()) return st;
  return m;
}

}  // namespace superserve
