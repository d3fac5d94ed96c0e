#include "bench/baselines/greedy_policies.h"

#include <algorithm>

namespace superserve {

ProfiledPolicy::Choice MaxBatchPolicy::Choose(const SchedulingContext& ctx,
                                              const QueueView& view) {
  int b = table_.LargestBatchWithin(0, view.slack);
  if (b < 0) b = 0;  // corrected latencies: the fastest tuple is elsewhere
  int r = table_.HighestRankWithin(b, view.slack);
  Choice c{r < 0 ? 0 : r, b};
  return PartialBatch(view.pending, view.slack, c);
}

ProfiledPolicy::Choice MaxAccPolicy::Choose(const SchedulingContext& ctx,
                                            const QueueView& view) {
  int r = table_.HighestRankWithin(0, view.slack);
  if (r < 0) r = 0;
  int b = table_.LargestBatchWithin(r, view.slack);
  if (b < 0) b = 0;
  if (view.pending < table_.batch_size(b)) b = std::min(b, table_.BatchIndexFor(view.pending));
  return Choice{r, b};
}

}  // namespace superserve
