#include "policies/profiled_policy.h"

#include <algorithm>
#include <utility>

namespace superserve {

ProfiledPolicy::ProfiledPolicy(std::string name, const ModelProfile& profile,
                               ProfiledPolicyOptions options)
    : table_(profile, options.latency),
      name_(std::move(name)),
      options_(options),
      overhead_samples_(options.overhead_window, options.overhead_quantile, /*stride=*/16),
      overhead_(options.initial_overhead) {}

Decision ProfiledPolicy::Decide(const SchedulingContext& ctx) {
  const EdfQueue& q = ctx.queue;
  if (q.empty()) return Decision::Idle();
  if (last_completion_ >= 0 && ctx.now - last_completion_ > options_.telemetry_expiry) {
    overhead_samples_ = RollingPercentile(options_.overhead_window, options_.overhead_quantile,
                                          /*stride=*/16);
    overhead_ = options_.initial_overhead;
    last_completion_ = -1;
    estimates_unchecked_ = true;
  }
  QueueView view;
  // Drop rule: a query whose deadline falls before now + overhead + the
  // fastest tuple cannot be served in time by anything this policy runs.
  Nanos next_deadline = 0;
  view.drop = static_cast<int32_t>(q.CountDeadlinesBefore(
      ctx.now + overhead_ + FastestLatency(), &next_deadline, kMaxDropsPerDecision));
  if (view.drop > 0 && estimates_unchecked_) {
    // The latency estimates refuse the head, and no batch has completed for
    // telemetry_expiry: they may be what stopped the dispatching, and only a
    // completion could correct them. Back to the profile (ProfiledPolicyOptions).
    table_.Forget();
    OnEstimatesForgotten();
    estimates_unchecked_ = false;
    view.drop = static_cast<int32_t>(q.CountDeadlinesBefore(
        ctx.now + overhead_ + FastestLatency(), &next_deadline, kMaxDropsPerDecision));
  }
  // More late queries than one decision counts: drop these, ask again.
  if (next_deadline == INT64_MIN) return Decision::Idle(view.drop);
  view.pending = static_cast<int64_t>(q.size()) - view.drop;
  if (view.pending == 0 || ctx.free_workers.empty()) return Decision::Idle(view.drop);
  view.slack = next_deadline - ctx.now - overhead_;
  if (ctx.worker_speed != 1.0) {
    // A slower (or faster) worker: the slack in the fleet's time, which the
    // latency table is in. If the head is out of its reach it takes nothing
    // (a worker at the fleet's speed may still serve it; the drop above
    // stays the fleet's).
    view.slack = static_cast<Nanos>(static_cast<double>(view.slack) / ctx.worker_speed);
    if (view.slack < FastestLatency()) return Decision::Idle(view.drop);
  }
  Choice c = Choose(ctx, view);
  if (c.wake_at > 0) return Decision::WakeAt(c.wake_at, view.drop);
  if (c.rank < 0) return Decision::Idle(view.drop);
  Decision d;
  d.kind = Decision::Kind::kDispatch;
  d.drop = view.drop;
  d.batch_size = table_.batch_size(c.batch_index);
  d.take = static_cast<int32_t>(std::min<int64_t>(view.pending, d.batch_size));
  d.subnet_index = table_.subnet_index(c.rank);
  d.worker = ctx.free_workers.front();  // lowest id: idle workers stay idle
  return d;
}

ProfiledPolicy::Choice ProfiledPolicy::PartialBatch(int64_t n, Nanos slack,
                                                    Choice fallback) const {
  if (n >= table_.batch_size(fallback.batch_index)) return fallback;
  Choice c;
  c.batch_index = table_.BatchIndexFor(n);
  c.rank = table_.HighestRankWithin(c.batch_index, slack);
  return c.rank < 0 ? fallback : c;
}

Nanos ProfiledPolicy::EstimatedLatency(int32_t subnet_index, int32_t batch_size) const {
  if (subnet_index < 0 || subnet_index >= table_.num_subnets() || batch_size < 1 ||
      batch_size > table_.max_batch()) {
    return -1;
  }
  const int bi = table_.BatchIndexFor(batch_size);
  return table_.latency(table_.rank_of_subnet(subnet_index), bi) + overhead_;
}

void ProfiledPolicy::OnCompletion(const CompletionTelemetry& t) {
  const int bi = table_.ExactBatchIndex(t.batch_size);
  if (bi >= 0 && t.exec > 0) table_.Record(t.subnet_index, bi, t.exec);
  if (t.overhead >= 0 && t.subnet_index >= 0) {
    overhead_samples_.Add(t.overhead);
    overhead_ = overhead_samples_.value();
    last_completion_ = t.now;
    estimates_unchecked_ = false;
  }
}

}  // namespace superserve
