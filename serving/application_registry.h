// The application tags clients put on queries, as small ids, capped.
#ifndef SUPERSERVE_SERVING_APPLICATION_REGISTRY_H_
#define SUPERSERVE_SERVING_APPLICATION_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace superserve {

// The application tags clients put on their queries, interned to small ids
// (0, 1, 2, ... in order of first use) so that queries, policies and
// histograms carry an int instead of a string. Ids are never reused or
// forgotten: a dynamic model's per-application histograms are indexed by
// them. The caps bound what a client can make the router keep: a tag longer
// than `max_bytes`, or a new tag once `max_tags` are known, is refused with
// the bound named. Not thread-safe: the serving core guards it with its lock.
class ApplicationRegistry {
 public:
  struct Options {
    size_t max_tags = 1024;   // 0 = no cap
    size_t max_bytes = 256;   // 0 = no cap
  };
  ApplicationRegistry() : ApplicationRegistry(Options()) {}
  explicit ApplicationRegistry(Options options) : options_(options) {}

  // OK when `tag` is known or may be added; INVALID_ARGUMENT naming the cap
  // otherwise.
  absl::Status Check(absl::string_view tag) const;

  struct Interned {
    int32_t id;
    bool added;  // the tag was new: whoever indexes by id learns its name now
  };
  // The tag's id, adding it if new (call Check first: Intern does not cap).
  // O(1): a repeat of the last tag costs one compare, others one lookup.
  Interned Intern(absl::string_view tag);

  // The tag of `id`; null for an id never handed out (-1: no tag).
  const std::shared_ptr<const std::string>& Name(int32_t id) const;
  // The tag of `id` as a view; empty for an unknown id.
  std::string_view NameView(int32_t id) const;
  size_t size() const { return names_.size(); }

  // Calls fn(id, tag) for every tag, in id order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (size_t id = 0; id < names_.size(); ++id) fn(static_cast<int32_t>(id), *names_[id]);
  }

 private:
  Options options_;
  absl::flat_hash_map<std::string, int32_t> ids_;
  std::vector<std::shared_ptr<const std::string>> names_;  // by id
  int32_t last_ = -1;  // Intern's last answer (clients mostly repeat their tag)
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_APPLICATION_REGISTRY_H_
