#ifndef SUPERSERVE_SERVING_RESULT_MATCHER_H_
#define SUPERSERVE_SERVING_RESULT_MATCHER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

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

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_RESULT_MATCHER_H_
