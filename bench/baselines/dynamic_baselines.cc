#include "bench/baselines/dynamic_baselines.h"

#include <algorithm>

#include "policies/profiled_policy.h"

namespace superserve {
namespace {

// The EDF-order dispatch both baselines share: drop the head that cannot
// make it even alone, then the largest batch index whose estimate meets the
// head's deadline, taking min(batch, pending) from the head.
template <typename EstimateFn>
Decision EdfDispatch(const SchedulingContext& ctx, const std::vector<int32_t>& batch_sizes,
                     int32_t max_index, Nanos overhead, EstimateFn estimate) {
  Nanos next = 0;
  const int32_t drop = static_cast<int32_t>(ctx.queue.CountDeadlinesBefore(
      ctx.now + overhead + estimate(0), &next, kMaxDropsPerDecision));
  if (ctx.free_workers.empty()) return Decision::Idle(drop);
  const int64_t pending = static_cast<int64_t>(ctx.queue.size()) - drop;
  if (pending <= 0) return Decision::Idle(drop);
  // The head after the drop; with the drop limit reached its deadline is
  // unknown: ask again after the drop.
  if (next == INT64_MIN) return Decision::Idle(drop);
  const Nanos head_deadline = drop > 0 ? next : ctx.queue.Head().deadline;
  for (int32_t b = max_index; b >= 0; --b) {
    if (b > 0 && batch_sizes[b - 1] >= pending) continue;  // a smaller size holds them all
    if (ctx.now + overhead + estimate(b) > head_deadline && b > 0) continue;
    Decision d;
    d.kind = Decision::Kind::kDispatch;
    d.drop = drop;
    d.batch_size = batch_sizes[b];
    d.take = static_cast<int32_t>(std::min<int64_t>(batch_sizes[b], pending));
    d.subnet_index = -1;
    d.worker = ctx.free_workers.front();
    return d;
  }
  return Decision::Idle(drop);
}

}  // namespace

ClockworkLikePolicy::ClockworkLikePolicy(const ModelProfile& profile,
                                         ClockworkLikeOptions options)
    : DynamicModelPolicy("clockwork", profile, options.base), options_(options) {
  for (size_t b = 0; b < batch_sizes_.size(); ++b) measured_.emplace_back(options_.window, options_.quantile);
  OnDistributionsChanged();
}

void ClockworkLikePolicy::OnDistributionsChanged() {
  const EmpiricalDistribution& mix = distributions().back();
  profiled_.clear();
  for (int32_t k : batch_sizes_) {
    profiled_.push_back(Micros(model_.Latency(k, mix.Quantile(options_.quantile))));
  }
}

Nanos ClockworkLikePolicy::Estimate(size_t b) const {
  return measured_[b].count() >= options_.min_samples ? measured_[b].value() : profiled_[b];
}

void ClockworkLikePolicy::OnCompletion(const CompletionTelemetry& t) {
  DynamicModelPolicy::OnCompletion(t);
  for (size_t b = 0; b < batch_sizes_.size(); ++b) {
    if (batch_sizes_[b] == t.batch_size) measured_[b].Add(t.exec);
  }
}

Decision ClockworkLikePolicy::Decide(const SchedulingContext& ctx) {
  MaybeRefresh(ctx.now);
  return EdfDispatch(ctx, batch_sizes_, static_cast<int32_t>(batch_sizes_.size()) - 1,
                     overhead_estimate(), [this](size_t b) { return Estimate(b); });
}

NexusLikePolicy::NexusLikePolicy(const ModelProfile& profile, NexusLikeOptions options)
    : DynamicModelPolicy("nexus", profile, options.base) {
  OnDistributionsChanged();
}

void NexusLikePolicy::OnDistributionsChanged() {
  const double mean = distributions().back().Mean();
  mean_latency_.clear();
  for (int32_t k : batch_sizes_) mean_latency_.push_back(Micros(model_.Latency(k, mean)));
  Plan();
}

void NexusLikePolicy::Plan() {
  planned_ = 0;
  for (size_t b = 0; b < batch_sizes_.size(); ++b) {
    if (slo_ <= 0 || 2 * mean_latency_[b] <= slo_) planned_ = static_cast<int32_t>(b);
  }
  if (slo_ <= 0) planned_ = static_cast<int32_t>(batch_sizes_.size()) - 1;
}

void NexusLikePolicy::OnArrival(const Query& q, Nanos now) {
  DynamicModelPolicy::OnArrival(q, now);
  if (q.deadline - q.arrival != slo_) {
    slo_ = q.deadline - q.arrival;
    Plan();
  }
}

Decision NexusLikePolicy::Decide(const SchedulingContext& ctx) {
  MaybeRefresh(ctx.now);
  return EdfDispatch(ctx, batch_sizes_, planned_, overhead_estimate(),
                     [this](size_t b) { return mean_latency_[b]; });
}

}  // namespace superserve
