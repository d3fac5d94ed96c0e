#include "policies/edf_queue.h"

#include <algorithm>
#include <cstdint>
#include <queue>
#include <utility>

namespace superserve {

void EdfQueue::Push(const Query& q) {
  heap_.push_back(q);
  SiftUp(heap_.size() - 1);  // places q, indexing it
}

Query EdfQueue::Pop() { return RemoveAt(0); }

void EdfQueue::PopFront(size_t n, std::vector<Query>* out) {
  if (n > heap_.size()) n = heap_.size();
  out->reserve(out->size() + n);
  for (size_t i = 0; i < n; ++i) out->push_back(Pop());
}

void EdfQueue::TakeIds(const std::vector<QueryId>& ids, std::vector<Query>* out) {
  if (ids.empty() || heap_.empty()) return;
  if (!indexed_) BuildIndex();
  for (QueryId id : ids) {
    const auto it = index_.find(id);
    if (it == index_.end()) continue;  // not queued, or a repeat already taken
    out->push_back(RemoveAt(it->second));
  }
}

Query EdfQueue::RemoveAt(size_t i) {
  const Query q = heap_[i];
  if (indexed_) index_.erase(q.id);
  const Query last = heap_.back();
  heap_.pop_back();
  if (i < heap_.size()) {
    // The last query takes the hole and moves whichever way it belongs
    // (the sift indexes it where it ends).
    heap_[i] = last;
    if (i > 0 && Before(last, heap_[(i - 1) / 2])) {
      SiftUp(i);
    } else {
      SiftDown(i);
    }
  }
  return q;
}

void EdfQueue::BuildIndex() {
  indexed_ = true;
  index_.clear();
  index_.reserve(heap_.size());
  for (size_t i = 0; i < heap_.size(); ++i) index_[heap_[i].id] = i;
}

void EdfQueue::PeekFront(size_t k, std::vector<Query>* out) const {
  if (k == 0 || heap_.empty()) return;
  // Frontier of heap indices ordered by their queries: the next most urgent
  // query is always the frontier's minimum.
  auto cmp = [this](size_t a, size_t b) { return Before(heap_[b], heap_[a]); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(cmp)> frontier(cmp);
  frontier.push(0);
  while (k-- > 0 && !frontier.empty()) {
    size_t i = frontier.top();
    frontier.pop();
    out->push_back(heap_[i]);
    if (2 * i + 1 < heap_.size()) frontier.push(2 * i + 1);
    if (2 * i + 2 < heap_.size()) frontier.push(2 * i + 2);
  }
}

size_t EdfQueue::CountDeadlinesBefore(Nanos t, Nanos* next_deadline, size_t limit) const {
  Nanos next = INT64_MAX;
  size_t count = 0;
  if (heap_.empty() || heap_.front().deadline >= t) {
    if (!heap_.empty()) next = heap_.front().deadline;
    *next_deadline = next;
    return 0;
  }
  // Iterative DFS over the nodes before t; the boundary nodes (first node
  // >= t on each path) hold the candidates for the next deadline.
  // Reused across calls: the simulator drops millions of queries through
  // here and must not allocate per decision.
  thread_local std::vector<size_t> stack;
  stack.assign(1, 0);
  while (!stack.empty()) {
    size_t i = stack.back();
    stack.pop_back();
    if (heap_[i].deadline >= t) {
      if (heap_[i].deadline < next) next = heap_[i].deadline;
      continue;
    }
    if (++count >= limit) {
      *next_deadline = INT64_MIN;
      return count;
    }
    if (2 * i + 1 < heap_.size()) stack.push_back(2 * i + 1);
    if (2 * i + 2 < heap_.size()) stack.push_back(2 * i + 2);
  }
  *next_deadline = next;
  return count;
}

void EdfQueue::SiftUp(size_t i) {
  Query q = heap_[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!Before(q, heap_[parent])) break;
    Place(i, heap_[parent]);
    i = parent;
  }
  Place(i, q);
}

void EdfQueue::SiftDown(size_t i) {
  const size_t n = heap_.size();
  Query q = heap_[i];
  while (true) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
    if (!Before(heap_[child], q)) break;
    Place(i, heap_[child]);
    i = child;
  }
  Place(i, q);
}

}  // namespace superserve
