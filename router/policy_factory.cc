#include "router/policy_factory.h"

namespace superserve {

PolicyFactory& PolicyFactory::Global() {
  static PolicyFactory* factory = new PolicyFactory();
  return *factory;
}

void PolicyFactory::Register(const std::string& name, Maker maker) {
  extra_[name] = std::move(maker);
}

absl::StatusOr<std::unique_ptr<Policy>> PolicyFactory::Create(const std::string& name,
                                                              const ModelProfile& profile,
                                                              const PolicyConfig& config) const {
  if (auto it = extra_.find(name); it != extra_.end()) return it->second(profile, config);
  PolicyConfig c = config;
  if ((name == "clipper+" || name == "clipper") && c.fixed_subnet_id < 0 &&
      !profile.subnets.empty()) {
    const SubnetProfile* best = &profile.subnets.front();
    for (const auto& s : profile.subnets) {
      if (s.accuracy > best->accuracy) best = &s;
    }
    c.fixed_subnet_id = best->id;
  }
  return MakePolicy(name, profile, c);
}

std::vector<std::string> PolicyFactory::Names() const {
  std::vector<std::string> names = PolicyNames();
  for (const auto& [name, maker] : extra_) names.push_back(name);
  return names;
}

}  // namespace superserve
