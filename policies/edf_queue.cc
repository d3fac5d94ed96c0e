#include "policies/edf_queue.h"

#include <algorithm>
#include <cstdint>
#include <queue>
#include <utility>

namespace superserve {

void EdfQueue::Push(const Query& q) {
  heap_.push_back(q);
  SiftUp(heap_.size() - 1);
}

Query EdfQueue::Pop() {
  Query top = heap_.front();
  heap_.front() = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) SiftDown(0);
  return top;
}

void EdfQueue::PopFront(size_t n, std::vector<Query>* out) {
  if (n > heap_.size()) n = heap_.size();
  out->reserve(out->size() + n);
  for (size_t i = 0; i < n; ++i) out->push_back(Pop());
}

void EdfQueue::TakeIds(const std::vector<QueryId>& ids, std::vector<Query>* out) {
  if (ids.empty() || heap_.empty()) return;
  std::vector<QueryId> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const QueryId lo = sorted.front(), hi = sorted.back();
  // One scan finds the positions (ascending); membership by a bitmap over
  // [lo, hi] when that range is modest (ids are allocated sequentially).
  std::vector<size_t> pos;
  pos.reserve(sorted.size());
  const QueryId range = hi - lo;
  if (range < (QueryId{1} << 24)) {
    thread_local std::vector<uint64_t> bits;
    bits.assign(range / 64 + 1, 0);
    for (QueryId id : sorted) bits[(id - lo) / 64] |= uint64_t{1} << ((id - lo) % 64);
    for (size_t i = 0; i < heap_.size() && pos.size() < sorted.size(); ++i) {
      const QueryId d = heap_[i].id - lo;  // wraps above `range` when id < lo
      if (d <= range && (bits[d / 64] >> (d % 64) & 1)) pos.push_back(i);
    }
  } else {
    for (size_t i = 0; i < heap_.size() && pos.size() < sorted.size(); ++i) {
      const QueryId id = heap_[i].id;
      if (id >= lo && id <= hi && std::binary_search(sorted.begin(), sorted.end(), id)) {
        pos.push_back(i);
      }
    }
  }
  if (pos.empty()) return;
  // Each target becomes the most urgent query and sifts up; then k pops
  // take them. In ascending position order a target's sift only moves its
  // ancestors (smaller positions, all already processed), so the positions
  // still to process stay valid. O(n) scan + O(k log n).
  std::vector<Query> original;
  original.reserve(pos.size());
  for (size_t p : pos) {
    original.push_back(heap_[p]);
    heap_[p].deadline = INT64_MIN;
    SiftUp(p);
  }
  for (size_t i = 0; i < pos.size(); ++i) Pop();
  for (QueryId id : ids) {
    auto it = std::find_if(original.begin(), original.end(),
                           [id](const Query& q) { return q.id == id; });
    if (it != original.end()) {
      out->push_back(*it);
      original.erase(it);  // a repeated id is taken once
    }
  }
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
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = q;
}

void EdfQueue::SiftDown(size_t i) {
  const size_t n = heap_.size();
  Query q = heap_[i];
  while (true) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
    if (!Before(heap_[child], q)) break;
    heap_[i] = heap_[child];
    i = child;
  }
  heap_[i] = q;
}

}  // namespace superserve
