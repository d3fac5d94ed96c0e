#include "policies/shadowfit_policy.h"

#include <algorithm>

namespace superserve {

ShadowFitPolicy::ShadowFitPolicy(const ModelProfile& profile, ShadowFitOptions options)
    : RateFitPolicy("shadowfit", profile, options.ratefit), options_(options) {}

void ShadowFitPolicy::OnArrival(const Query& q, Nanos now) {
  RateFitPolicy::OnArrival(q, now);
  for (ClipperShadow& s : shadows_) s.Arrive(now, q.deadline, overhead_estimate());
}

int ShadowFitPolicy::UpperRank(const SchedulingContext& ctx, Nanos slo, int rate_rank) {
  const Nanos now = ctx.now;
  const int workers =
      std::max<int>(1, std::max<int>(ctx.live_workers, static_cast<int>(ctx.free_workers.size())));
  if (shadows_.empty()) {
    const int s = table_.num_subnets();
    const int n = std::max(1, std::min(s, options_.shadows));
    for (int k = 0; k < n; ++k) {
      shadows_.emplace_back(&table_, n == 1 ? s - 1 : k * (s - 1) / (n - 1), workers, now);
    }
  }
  hold_ = static_cast<Nanos>(options_.hold_slos * static_cast<double>(slo));
  int vouched = -1;
  for (ClipperShadow& s : shadows_) {
    s.set_workers(workers, now);
    s.Advance(now, overhead_estimate());
    if (now - s.held_since() >= hold_) vouched = s.rank();
  }
  return std::max(vouched, rate_rank);
}

bool ShadowFitPolicy::BacklogVetted(const SchedulingContext& ctx, int rank, const QueueView& view,
                                    double clearing) {
  if (clearing > options_.vouched_backlog_factor * static_cast<double>(view.slack)) return false;
  for (const ClipperShadow& s : shadows_) {
    if (s.rank() == rank) return ctx.now - s.held_since() >= hold_;
  }
  return false;
}

}  // namespace superserve
