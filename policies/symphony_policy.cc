#include "policies/symphony_policy.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace superserve {
namespace {

int MostAccurateSubnet(const ModelProfile& profile) {
  int index = 0;
  for (int i = 1; i < static_cast<int>(profile.subnets.size()); ++i) {
    if (profile.subnets[i].accuracy > profile.subnets[index].accuracy) index = i;
  }
  return index;
}

}  // namespace

SymphonyPolicy::SymphonyPolicy(std::string name, const ModelProfile& profile,
                               SymphonyOptions options)
    : ProfiledPolicy(std::move(name), profile, options.base),
      rank_(table_.rank_of_subnet(MostAccurateSubnet(profile))),
      window_drop_(options.window_drop),
      window_fraction_(options.window_fraction),
      frontrun_margin_(options.frontrun_margin),
      arrivals_(options.rate_window) {}

int32_t SymphonyPolicy::TargetBatch(Nanos budget, double rate) const {
  const Nanos overhead = overhead_estimate();
  int32_t target = 1;
  for (int32_t b = 2; b <= table_.max_batch(); ++b) {
    const double l = static_cast<double>(table_.latency(rank_, table_.BatchIndexFor(b)) + overhead);
    // Workers this rate needs at batch b; staggered over them, the worst
    // wait is ℓ(b)/n.
    const double n = rate * l / kNanosPerSecond / b;
    if (n <= 0 || l * (1 + 1 / n) > static_cast<double>(budget)) break;
    target = b;
  }
  return target;
}

SymphonyPolicy::Candidate SymphonyPolicy::Plan(int64_t pending, Nanos deadline, Nanos arrival,
                                               Nanos now) const {
  const Nanos overhead = overhead_estimate();
  const Nanos slack = deadline - now - overhead;
  // GetBatch: the largest batch that still meets the head's deadline.
  int fit = table_.LargestBatchWithin(rank_, slack);
  if (fit < 0) fit = 0;
  Candidate c;
  c.size = std::min<int64_t>(std::max<int64_t>(pending, 1), table_.batch_size(fit));
  c.batch_index = table_.BatchIndexFor(c.size);
  c.latest = deadline - overhead - table_.latency(rank_, c.batch_index);
  c.exec = ExecTime(c, deadline, arrival, now);
  return c;
}

Nanos SymphonyPolicy::ExecTime(const Candidate& c, Nanos deadline, Nanos arrival,
                               Nanos now) const {
  const Nanos overhead = overhead_estimate();
  // Frontrun: once one more query would miss the head's deadline, waiting
  // cannot grow the batch. A full batch (the largest profiled) runs now.
  Nanos frontrun = std::numeric_limits<Nanos>::min();
  if (c.size < table_.max_batch()) {
    const auto margin =
        static_cast<Nanos>(frontrun_margin_ * static_cast<double>(deadline - arrival));
    frontrun =
        deadline - overhead - table_.latency(rank_, table_.BatchIndexFor(c.size + 1)) - margin;
  }
  return std::max(now, frontrun);
}

Nanos SymphonyPolicy::Urgency(const EdfQueue& queue, Nanos now) const {
  const Query& head = queue.Head();
  return Plan(static_cast<int64_t>(queue.size()), head.deadline, head.arrival, now).latest;
}

ProfiledPolicy::Choice SymphonyPolicy::Choose(const SchedulingContext& ctx,
                                              const QueueView& view) {
  // Infeasible heads first (the scheduler drops them and asks again), so
  // that the candidate is planned from the true head.
  if (view.drop > 0) return Choice{};
  const Query& head = ctx.queue.Head();
  Candidate c = Plan(view.pending, head.deadline, head.arrival, ctx.now);
  if (c.exec > ctx.now) {
    Choice wait;
    wait.wake_at = c.exec;
    return wait;
  }
  chosen_latest_ = c.latest;
  return Choice{rank_, c.batch_index};
}

Decision SymphonyPolicy::Decide(const SchedulingContext& ctx) {
  if (window_drop_ && !ctx.queue.empty() && !ctx.free_workers.empty()) {
    const Query& head = ctx.queue.Head();
    const Nanos budget = head.deadline - head.arrival;
    if (ctx.now - target_at_ >= Millis(5) || budget != target_budget_) {
      target_ = TargetBatch(budget, arrivals_.Rate(ctx.now));
      target_at_ = ctx.now;
      target_budget_ = budget;
    }
    const int64_t window = std::min<int64_t>(target_, static_cast<int64_t>(ctx.queue.size()));
    if (window > 1) {
      const Nanos slack = head.deadline - ctx.now - overhead_estimate();
      const double needed = static_cast<double>(table_.latency(rank_, table_.BatchIndexFor(window)));
      if (static_cast<double>(slack) < window_fraction_ * needed) {
        return Decision::Idle(1);  // the scheduler drops it and asks again
      }
    }
  }
  Decision d = ProfiledPolicy::Decide(ctx);
  if (d.kind == Decision::Kind::kDispatch) {
    // The schedulable window: it runs now; a worker that cannot start it by
    // d − ℓ(b) (the round trip's return leg aside) would miss the head.
    d.earliest = ctx.now;
    d.latest = chosen_latest_ + overhead_estimate();
  }
  return d;
}

}  // namespace superserve
