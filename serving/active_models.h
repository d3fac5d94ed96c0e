// The models with queued queries: the only ones a free worker's scheduling
// pass and the sweep visit, however many idle models are registered.
#ifndef SUPERSERVE_SERVING_ACTIVE_MODELS_H_
#define SUPERSERVE_SERVING_ACTIVE_MODELS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace superserve {

// An unordered list with O(1) insertion and removal: `T` (ServedModel)
// carries its position here (`active_slot`, -1 when not listed). Every push
// lists its model (idempotent); a model whose queue emptied leaves lazily,
// when a pass meets it, or when it is removed. Removing moves the last
// entry into the freed position, so a walk by index that removes entry i
// visits position i again. Not thread-safe (the core's lock guards it).
template <typename T>
class ActiveModels {
 public:
  void Add(T* m) {
    if (m->active_slot >= 0) return;
    m->active_slot = static_cast<int32_t>(list_.size());
    list_.push_back(m);
  }
  void Remove(T* m) {
    if (m->active_slot < 0) return;
    T* last = list_.back();
    list_[m->active_slot] = last;
    last->active_slot = m->active_slot;
    list_.pop_back();
    m->active_slot = -1;
  }
  size_t size() const { return list_.size(); }
  bool empty() const { return list_.empty(); }
  T* operator[](size_t i) const { return list_[i]; }
  T* back() const { return list_.back(); }

 private:
  std::vector<T*> list_;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_ACTIVE_MODELS_H_
