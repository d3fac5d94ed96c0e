// ResultMatcher: a worker's results to its batch's queries (result_matcher.h).
#include "serving/result_matcher.h"

#include <algorithm>

namespace superserve {

void ResultMatcher::Start(const std::vector<QueryId>& queries) {
  queries_ = &queries;
  answered_.assign(queries.size(), 0);
  foreign_ = 0;
  duplicate_ = 0;
}

int64_t ResultMatcher::Match(size_t result_index, QueryId id) {
  const std::vector<QueryId>& q = *queries_;
  const size_t n = q.size();
  const size_t k = result_index < n && q[result_index] == id
                       ? result_index
                       : static_cast<size_t>(std::find(q.begin(), q.end(), id) - q.begin());
  if (k >= n) {
    ++foreign_;
    return -1;
  }
  if (answered_[k]) {
    ++duplicate_;
    return -1;
  }
  answered_[k] = 1;
  return static_cast<int64_t>(k);
}

}  // namespace superserve
