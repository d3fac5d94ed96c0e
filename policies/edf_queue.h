#ifndef SUPERSERVE_POLICIES_EDF_QUEUE_H_
#define SUPERSERVE_POLICIES_EDF_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "policies/query.h"

namespace superserve {

// Pending queries of one model ordered by (deadline, id): earliest deadline
// first, ties by arrival order of ids, so that every run is deterministic.
// Binary min-heap: Push O(log n), Head O(1), PopFront(b) O(b log n).
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
  // *out in the order of `ids`; ids not queued are skipped. O(n): one scan
  // and a heap rebuild (for policies that do not serve in EDF order).
  void TakeIds(const std::vector<QueryId>& ids, std::vector<Query>* out);
  void Clear() { heap_.clear(); }
  // Removes every query for which pred(q) is true (pred sees each query
  // exactly once). O(n): one pass and a heap rebuild.
  template <typename Pred>
  void RemoveIf(Pred pred) {
    heap_.erase(std::remove_if(heap_.begin(), heap_.end(), pred), heap_.end());
    for (size_t i = heap_.size() / 2; i-- > 0;) SiftDown(i);
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
  void SiftUp(size_t i);
  void SiftDown(size_t i);

  std::vector<Query> heap_;
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_EDF_QUEUE_H_
