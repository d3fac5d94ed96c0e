#ifndef SUPERSERVE_ROUTER_MODEL_VERSIONS_H_
#define SUPERSERVE_ROUTER_MODEL_VERSIONS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace superserve {

// The versions of each served model name, by the manifest's `version`, and
// the one unpinned queries go to (the current one). Each version is served
// under an internal name: the first one under the model's own name, a later
// one under "<name>@<version>" (docs/packages.md, versions). Switching the
// current version is one assignment under the lock: a query resolved before
// it runs on the old version, one resolved after on the new. Thread-safe.
class ModelVersions {
 public:
  // The internal name a version of `name` is served under.
  static std::string InternalName(const std::string& name, uint32_t version, bool first);

  // Records a version that is now served; it becomes current when it is
  // newer than the current one (or there is none).
  void Add(const std::string& name, uint32_t version, const std::string& internal);
  // The internal name for `version` of `name` (0 = the current one). A name
  // with no versions recorded resolves to itself (the serving core then
  // answers for it); an unknown version is INVALID_ARGUMENT listing the
  // served ones.
  absl::StatusOr<std::string> Resolve(const std::string& name, uint32_t version) const;
  // 0 when `name` has no version recorded.
  uint32_t Current(const std::string& name) const;
  // Forgets `version` of `name` (0 = all of them) and returns the internal
  // names to take down. The current version cannot go while another one
  // stays (FAILED_PRECONDITION); NOT_FOUND for an unknown name or version.
  absl::StatusOr<std::vector<std::string>> Remove(const std::string& name, uint32_t version);
  // (name, version, current) of an internal name; nullopt if not recorded.
  struct Owner {
    std::string name;
    uint32_t version = 0;
    bool current = false;
  };
  std::optional<Owner> OwnerOf(const std::string& internal) const;

 private:
  struct Versions {
    std::map<uint32_t, std::string> internal;  // by version
    uint32_t current = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, Versions> models_;
  std::map<std::string, std::pair<std::string, uint32_t>> owners_;  // internal -> (name, version)
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_MODEL_VERSIONS_H_
