#ifndef SUPERSERVE_POLICIES_EDF_QUEUE_H_
#define SUPERSERVE_POLICIES_EDF_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "policies/query.h"

namespace superserve {

// Pending queries of one model ordered by (deadline, id): earliest deadline
// first, ties by arrival order of ids, so that every run is deterministic.
// Binary min-heap: Push O(log n), Head O(1), PopFront(b) O(b log n).
// TakeIds (policies that serve out of EDF order) builds an id -> position
// index on its first call, O(n); the queue then keeps it, one hash update per
// moved query, so that every later TakeIds costs O(k log n) for k ids.
// Queues that never see TakeIds pay nothing for it.
class EdfQueue {
 public:
  void Push(const Query& q);
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // Most urgent query. Requires !empty().
  const Query& Head() const { return heap_.front(); }
  // Removes the most urgent query and returns it. Requires !empty().
  Query Pop();
  // Removes the min(n, size()) most urgent queries, appending them to *out in
  // EDF order.
  void PopFront(size_t n, std::vector<Query>* out);
  // The k most urgent queries in EDF order without removing them (k small;
  // O(k log k) via a frontier walk of the heap).
  void PeekFront(size_t k, std::vector<Query>* out) const;
  // Removes the queries with these ids wherever they are, appending them to
  // *out in the order of `ids`; ids not queued (or repeated) are skipped.
  // O(k log n) once the id index exists (the first call builds it, O(n)).
  // Ids must be unique among the queued queries for this to be exact.
  void TakeIds(const std::vector<QueryId>& ids, std::vector<Query>* out);
  void Clear() {
    heap_.clear();
    index_.clear();
  }
  // Removes every query for which pred(q) is true (pred sees each query
  // exactly once). O(n): one pass and a heap rebuild.
  template <typename Pred>
  void RemoveIf(Pred pred) {
    heap_.erase(std::remove_if(heap_.begin(), heap_.end(), pred), heap_.end());
    for (size_t i = heap_.size() / 2; i-- > 0;) SiftDown(i);
    if (indexed_) BuildIndex();
  }
  // Number of queries whose deadline is strictly before `t` (they form a
  // prefix of the EDF order), and in *next_deadline the deadline of the first
  // query not counted (INT64_MAX when none). O(count + 1): the walk prunes at
  // every node whose deadline is >= t, because a heap's subtree never holds
  // an earlier deadline than its root. Policies use it to size the drop of
  // infeasible queries without popping from a read-only snapshot.
  // With `limit`, the walk stops after `limit` queries: it returns `limit`
  // and *next_deadline = INT64_MIN ("more may follow"), so a decision costs
  // O(limit) however many queries are late (the caller drops them and asks
  // again).
  size_t CountDeadlinesBefore(Nanos t, Nanos* next_deadline,
                              size_t limit = SIZE_MAX) const;

 private:
  static bool Before(const Query& a, const Query& b) {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.id < b.id);
  }
  // Puts q at heap_[i], keeping the index current.
  void Place(size_t i, const Query& q) {
    heap_[i] = q;
    if (indexed_) index_[q.id] = i;
  }
  void SiftUp(size_t i);
  void SiftDown(size_t i);
  // Removes and returns heap_[i] (O(log n)).
  Query RemoveAt(size_t i);
  void BuildIndex();

  std::vector<Query> heap_;
  // Whether index_ is kept (after the first TakeIds): id -> position in heap_.
  bool indexed_ = false;
  absl::flat_hash_map<QueryId, size_t> index_;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_EDF_QUEUE_H_
