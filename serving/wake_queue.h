// The policy wake-ups the core must fire, one per model, earliest first.
#ifndef SUPERSERVE_SERVING_WAKE_QUEUE_H_
#define SUPERSERVE_SERVING_WAKE_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/time.h"

namespace superserve {

// The policy wake-ups the serving core has to fire: at most one per model,
// earliest first (ties: the lower id). An indexed binary heap over the
// entries themselves: `T` carries its listed time (`wake_listed`, > 0 while
// listed), its `id` and its position here (`wake_slot`, -1 when not listed).
// A deferring policy (Symphony) moves its wake-up on most arrivals; here that
// is one O(log n) sift of the model's entry, n the models with a wake-up,
// where a heap of (time, id) pairs kept every superseded time as a stale
// entry to pop later. Not thread-safe (the core's lock guards it).
template <typename T>
class WakeQueue {
 public:
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // The earliest; the queue is non-empty.
  T* top() const { return heap_.front(); }

  // Lists `e` at e->wake_listed (> 0), or moves it there: O(log n).
  void Update(T* e) {
    if (e->wake_slot < 0) {
      e->wake_slot = static_cast<int32_t>(heap_.size());
      heap_.push_back(e);
    }
    const size_t i = static_cast<size_t>(e->wake_slot);
    if (SiftUp(i) == i) SiftDown(i);
  }
  // Takes `e` out (a no-op if it is not listed) and clears its wake_listed.
  void Erase(T* e) {
    if (e->wake_slot >= 0) {
      const size_t i = static_cast<size_t>(e->wake_slot);
      T* last = heap_.back();
      heap_.pop_back();
      if (last != e) {
        Place(last, i);
        if (SiftUp(i) == i) SiftDown(i);
      }
      e->wake_slot = -1;
    }
    e->wake_listed = 0;
  }
  void Pop() { Erase(top()); }

  // Lists `e` at `at` unless it is listed there already (`at` <= 0: no
  // wake-up asked for, nothing to do).
  void List(T* e, Nanos at) {
    if (at <= 0 || at == e->wake_listed) return;
    e->wake_listed = at;
    Update(e);
  }
  // Takes out every entry listed at or before `now`, earliest first, and
  // appends to `due` those `current(e)` says are still asked for (a
  // decision taken since the listing may have answered it otherwise: such
  // a stale entry is dropped). `current` is called before the entry is
  // taken out, with its wake_listed still set.
  template <typename Current>
  void PopDue(Nanos now, Current current, std::vector<T*>* due) {
    while (!empty() && top()->wake_listed <= now) {
      T* e = top();
      const bool keep = current(e);
      Pop();
      if (keep) due->push_back(e);
    }
  }
  // Drops stale entries from the top, so that top() (if any) names a
  // wake-up still asked for: each would cost the owner an empty tick.
  template <typename Current>
  void DropStale(Current current) {
    while (!empty() && !current(top())) Pop();
  }

 private:
  static bool Before(const T* a, const T* b) {
    return a->wake_listed < b->wake_listed || (a->wake_listed == b->wake_listed && a->id < b->id);
  }
  void Place(T* e, size_t i) {
    heap_[i] = e;
    e->wake_slot = static_cast<int32_t>(i);
  }
  // Both return the entry's final position.
  size_t SiftUp(size_t i) {
    T* e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!Before(e, heap_[parent])) break;
      Place(heap_[parent], i);
      i = parent;
    }
    Place(e, i);
    return i;
  }
  size_t SiftDown(size_t i) {
    T* e = heap_[i];
    const size_t n = heap_.size();
    while (true) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
      if (!Before(heap_[child], e)) break;
      Place(heap_[child], i);
      i = child;
    }
    Place(e, i);
    return i;
  }

  std::vector<T*> heap_;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_WAKE_QUEUE_H_
