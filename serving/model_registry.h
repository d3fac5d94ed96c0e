// The served models by name and by id: each one's profile, version and
// scheduler (ServedModel).
#ifndef SUPERSERVE_SERVING_MODEL_REGISTRY_H_
#define SUPERSERVE_SERVING_MODEL_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/model_profile.h"
#include "policies/policy.h"
#include "serving/model_scheduler.h"

namespace superserve {

using ModelId = uint64_t;

// A model being served: its profile, its version and its scheduler. Owned
// by the registry; removing the model frees all of it.
struct ServedModel {
  ServedModel(ModelId id, int64_t version, const ModelProfile& profile,
              std::unique_ptr<Policy> policy)
      : id(id),
        version(version),
        name(std::make_shared<const std::string>(profile.model)),
        profile(profile),
        scheduler(&this->profile, std::move(policy)) {}

  const ModelId id;         // never reused, so a stale id finds nothing
  const int64_t version;    // 1 for a name's first registration, then +1
  const std::shared_ptr<const std::string> name;
  const ModelProfile profile;
  ModelScheduler scheduler;
  // Position in the core's ActiveModels, the models with queued queries
  // (-1 = not listed), so that a scheduling pass visits only those.
  int32_t active_slot = -1;
  // The policy wake-up the core has listed for this model (0 = none), and
  // its position in the core's WakeQueue (-1 = not listed).
  Nanos wake_listed = 0;
  int32_t wake_slot = -1;
  // ServingCore::CloseModel: no new queries; removed once drained.
  bool closed = false;
  // Placement: live workers with a memory budget that declared the model
  // (ascending ids), where the core may load it; the scheduler's workers
  // are those that hold it.
  std::vector<int32_t> loadable_on;
};

// The models the engine serves, by name and by id. Not thread-safe.
class ModelRegistry {
 public:
  // ALREADY_EXISTS if a model of that name is served.
  absl::StatusOr<ServedModel*> Add(const ModelProfile& profile, std::unique_ptr<Policy> policy);
  // Takes the model out; the caller answers its queries, then drops it.
  std::unique_ptr<ServedModel> Remove(absl::string_view name);

  ServedModel* Find(absl::string_view name) const;
  ServedModel* Find(ModelId id) const;
  // Every served model, ascending id (registration order).
  std::vector<ServedModel*> All() const;
  // The same without building a vector (hot paths).
  template <typename F>
  void ForEach(F f) const {
    for (const auto& [id, m] : by_id_) f(m.get());
  }
  size_t size() const { return by_id_.size(); }

 private:
  std::map<ModelId, std::unique_ptr<ServedModel>> by_id_;
  absl::flat_hash_map<std::string, ServedModel*> by_name_;  // one lookup per query
  absl::flat_hash_map<ModelId, ServedModel*> index_;  // by_id_ for lookups: O(1) per answer
  absl::flat_hash_map<std::string, int64_t> last_version_;
  ModelId next_id_ = 1;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_MODEL_REGISTRY_H_
