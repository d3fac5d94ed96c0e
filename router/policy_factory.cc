#include "router/policy_factory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace superserve {

PolicyFactory& PolicyFactory::Global() {
  static PolicyFactory* factory = [] {
    auto* f = new PolicyFactory();
    RegisterStandardPolicies(f);
    return f;
  }();
  return *factory;
}

void PolicyFactory::Register(const std::string& name, Maker maker) {
  makers_[name] = std::move(maker);
}

absl::StatusOr<std::unique_ptr<Policy>> PolicyFactory::Create(const std::string& name,
                                                              const ModelProfile& profile,
                                                              const PolicyOptions& options) const {
  auto it = makers_.find(name);
  if (it == makers_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown policy \"", name, "\"; known: ",
                                                   absl::StrJoin(Names(), ", ")));
  }
  return it->second(profile, options);
}

std::vector<std::string> PolicyFactory::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, maker] : makers_) names.push_back(name);
  return names;
}

void RegisterStandardPolicies(PolicyFactory* factory) {
  // Wired to policies/ once those classes land (branch issue5).
  (void)factory;
}

}  // namespace superserve
