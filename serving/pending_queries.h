// The accepted queries not yet answered, by id: each enters once, on
// acceptance, and leaves once, when answered (the exactly-once contract's
// ledger).
#ifndef SUPERSERVE_SERVING_PENDING_QUERIES_H_
#define SUPERSERVE_SERVING_PENDING_QUERIES_H_

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/time.h"
#include "policies/query.h"
#include "serving/model_registry.h"
#include "serving/query_handle.h"

namespace superserve {

// One accepted query: what its scheduler queues (`query`), where its answer
// goes, its input, and whether a worker holds it.
struct PendingQuery {
  Query query;
  QueryHandle* handle = nullptr;
  std::shared_ptr<QueryPayload> input;
  ModelId model = 0;
  Nanos dispatched_at = 0;
  bool on_worker = false;
};

// Ids grow from 1 and are never reused, so a late result or cancellation
// naming an answered query finds nothing. Not thread-safe (the core's lock
// guards it).
class PendingQueries {
 public:
  using Map = absl::flat_hash_map<QueryId, PendingQuery>;
  using iterator = Map::iterator;

  // A new entry under the next id (set in query.id), built in its slot.
  PendingQuery& Add() {
    const QueryId id = ++last_id_;
    PendingQuery& p = map_.try_emplace(id).first->second;
    p.query.id = id;
    return p;
  }
  iterator find(QueryId id) { return map_.find(id); }
  iterator end() { return map_.end(); }
  Map::const_iterator find(QueryId id) const { return map_.find(id); }
  Map::const_iterator end() const { return map_.end(); }
  // Answered: the entry leaves.
  void erase(iterator it) { map_.erase(it); }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  // Every pending id, ascending (the order Shutdown answers them in).
  std::vector<QueryId> Ids() const {
    std::vector<QueryId> ids;
    ids.reserve(map_.size());
    for (const auto& [id, p] : map_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }

 private:
  Map map_;
  QueryId last_id_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_PENDING_QUERIES_H_
