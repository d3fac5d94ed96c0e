// Matching a worker's report to the batch it was sent: results and
// telemetry to queries by id, an untrusted worker's extras ignored.
#ifndef SUPERSERVE_SERVING_RESULT_MATCHER_H_
#define SUPERSERVE_SERVING_RESULT_MATCHER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "policies/decision.h"
#include "policies/query.h"

namespace superserve {

// Matches a worker's results to the batch it was sent, treating the worker
// as untrusted: a result answers the batch's query with its id (usually the
// one at the same position, so a well-behaved worker costs one compare per
// result); an id the batch does not hold is foreign, a second result for a
// query is a duplicate, and both are ignored and counted. Whatever no
// result answered is left for the caller to fail (answered(k) false).
// Reused across batches by the serving core: no allocation per batch once
// its scratch has grown to the largest batch.
class ResultMatcher {
 public:
  // Starts matching results for `queries` (kept by reference until the
  // next Start: the caller's batch outlives the matching).
  void Start(const std::vector<QueryId>& queries);
  // The batch position that the result at `result_index` with `id`
  // answers, or -1 (foreign or duplicate: counted, to be ignored).
  int64_t Match(size_t result_index, QueryId id);

  int32_t foreign() const { return foreign_; }
  int32_t duplicate() const { return duplicate_; }
  // Whether a result answered the query at batch position `k` (a plain
  // loop at the caller, not a callback: the caller holds the core's lock,
  // which clang's thread-safety analysis cannot see through a lambda).
  bool answered(size_t k) const { return k < answered_.size() && answered_[k] != 0; }
  size_t size() const { return answered_.size(); }  // the batch's queries

 private:
  const std::vector<QueryId>* queries_ = nullptr;
  std::vector<char> answered_;
  int32_t foreign_ = 0;
  int32_t duplicate_ = 0;
};

// The telemetry a worker reported for each query of its batch, found by
// id. Workers report it in the results' order, so the entry after the last
// one found is the usual match: O(1) per query for a well-behaved worker.
class TelemetryLookup {
 public:
  // Kept by reference: `queries` outlives the lookup.
  explicit TelemetryLookup(const std::vector<QueryTelemetry>& queries) : queries_(queries) {}
  // nullptr when the worker reported none for `id`.
  const QueryTelemetry* Find(QueryId id) {
    if (cursor_ < queries_.size() && queries_[cursor_].id == id) return &queries_[cursor_++];
    for (const QueryTelemetry& q : queries_) {
      if (q.id == id) return &q;
    }
    return nullptr;
  }

 private:
  const std::vector<QueryTelemetry>& queries_;
  size_t cursor_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_RESULT_MATCHER_H_
