// ModelRegistry: the served models by name and id (model_registry.h).
#include "serving/model_registry.h"

#include "absl/strings/str_cat.h"

namespace superserve {

absl::StatusOr<ServedModel*> ModelRegistry::Add(const ModelProfile& profile,
                                                std::unique_ptr<Policy> policy) {
  if (by_name_.contains(profile.model)) {
    return absl::AlreadyExistsError(absl::StrCat("model \"", profile.model, "\" already served"));
  }
  const ModelId id = next_id_++;
  const int64_t version = ++last_version_[profile.model];
  auto model = std::make_unique<ServedModel>(id, version, profile, std::move(policy));
  ServedModel* raw = model.get();
  by_id_.emplace(id, std::move(model));
  index_.emplace(id, raw);
  by_name_.emplace(profile.model, raw);
  return raw;
}

std::unique_ptr<ServedModel> ModelRegistry::Remove(absl::string_view name) {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return nullptr;
  auto m = by_id_.find(it->second->id);
  std::unique_ptr<ServedModel> out = std::move(m->second);
  index_.erase(m->first);
  by_id_.erase(m);
  by_name_.erase(it);
  return out;
}

ServedModel* ModelRegistry::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

ServedModel* ModelRegistry::Find(ModelId id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<ServedModel*> ModelRegistry::All() const {
  std::vector<ServedModel*> out;
  out.reserve(by_id_.size());
  for (const auto& [id, m] : by_id_) out.push_back(m.get());
  return out;
}

}  // namespace superserve
