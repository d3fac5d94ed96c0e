// ApplicationRegistry: application tags as ids, capped (application_registry.h).
#include "serving/application_registry.h"

#include "absl/strings/str_cat.h"

namespace superserve {

absl::Status ApplicationRegistry::Check(absl::string_view tag) const {
  if (options_.max_bytes > 0 && tag.size() > options_.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("application tag of ", tag.size(),
                                                   " bytes exceeds the limit of ",
                                                   options_.max_bytes, " bytes"));
  }
  if (options_.max_tags > 0 && names_.size() >= options_.max_tags && !ids_.contains(tag)) {
    return absl::InvalidArgumentError(
        absl::StrCat("application tag is new, and the router already tracks the maximum of ",
                     options_.max_tags, " tags (--max_applications)"));
  }
  return absl::OkStatus();
}

ApplicationRegistry::Interned ApplicationRegistry::Intern(absl::string_view tag) {
  if (last_ >= 0 && *names_[last_] == tag) return {last_, false};
  if (auto it = ids_.find(tag); it != ids_.end()) return {last_ = it->second, false};
  last_ = static_cast<int32_t>(names_.size());
  ids_.emplace(std::string(tag), last_);
  names_.push_back(std::make_shared<const std::string>(tag.data(), tag.size()));
  return {last_, true};
}

const std::shared_ptr<const std::string>& ApplicationRegistry::Name(int32_t id) const {
  static const std::shared_ptr<const std::string> kNone;
  if (id < 0 || static_cast<size_t>(id) >= names_.size()) return kNone;
  return names_[id];
}

std::string_view ApplicationRegistry::NameView(int32_t id) const {
  const auto& name = Name(id);
  return name != nullptr ? std::string_view(*name) : std::string_view();
}

}  // namespace superserve
