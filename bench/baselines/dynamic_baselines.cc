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

ClockworkWindowsPolicy::ClockworkWindowsPolicy(const ModelProfile& profile,
                                               ClockworkWindowsOptions options)
    : DynamicModelPolicy("clockwork-windows", profile, options.base), options_(options) {
  for (size_t b = 0; b < batch_sizes_.size(); ++b) measured_.emplace_back(options_.window, 0.5);
  OnDistributionsChanged();
}

void ClockworkWindowsPolicy::OnDistributionsChanged() {
  const double mean = distributions().back().Mean();
  profiled_.clear();
  for (int32_t k : batch_sizes_) profiled_.push_back(Micros(model_.Latency(k, mean)));
}

Nanos ClockworkWindowsPolicy::Estimate(size_t b) const {
  return measured_[b].count() > 0 ? measured_[b].value() : profiled_[b];
}

Nanos ClockworkWindowsPolicy::EstimatedLatency(int32_t, int32_t batch_size) const {
  for (size_t b = 0; b < batch_sizes_.size(); ++b) {
    if (batch_sizes_[b] >= batch_size) return overhead_estimate() + Estimate(b);
  }
  return -1;
}

void ClockworkWindowsPolicy::OnCompletion(const CompletionTelemetry& t) {
  DynamicModelPolicy::OnCompletion(t);
  for (size_t b = 0; b < batch_sizes_.size(); ++b) {
    if (batch_sizes_[b] == t.batch_size) measured_[b].Add(t.exec);
  }
}

Decision ClockworkWindowsPolicy::Decide(const SchedulingContext& ctx) {
  MaybeRefresh(ctx.now);
  const Nanos now = ctx.now;
  const Nanos overhead = overhead_estimate();
  Nanos next = 0;
  if (ctx.free_workers.empty()) {
    return Decision::Idle(static_cast<int32_t>(ctx.queue.CountDeadlinesBefore(
        now + overhead + Estimate(0), &next, kMaxDropsPerDecision)));
  }
  const int32_t worker = ctx.free_workers.front();
  if (static_cast<size_t>(worker) >= planned_end_.size()) planned_end_.resize(worker + 1, 0);
  Nanos& planned = planned_end_[worker];
  // The planned start of the next batch: the previous one's predicted end
  // when the next was committed before it (its head had arrived by then).
  const bool committed = planned > 0 && ctx.queue.Head().arrival <= planned - options_.schedule_ahead;
  const Nanos start = committed ? planned : now;
  planned = 0;
  const int32_t drop = static_cast<int32_t>(ctx.queue.CountDeadlinesBefore(
      start + overhead + Estimate(0), &next, kMaxDropsPerDecision));
  const int64_t pending = static_cast<int64_t>(ctx.queue.size()) - drop;
  if (pending <= 0 || next == INT64_MIN) return Decision::Idle(drop);
  const Nanos head_deadline = drop > 0 ? next : ctx.queue.Head().deadline;
  for (int32_t b = static_cast<int32_t>(batch_sizes_.size()) - 1; b >= 0; --b) {
    if (b > 0 && batch_sizes_[b - 1] >= pending) continue;  // a smaller size holds them all
    if (start + overhead + Estimate(b) > head_deadline && b > 0) continue;
    const int32_t take = static_cast<int32_t>(std::min<int64_t>(batch_sizes_[b], pending));
    const Nanos latest = head_deadline - overhead - Estimate(b);
    if (now > latest) {
      // The action window closed before the worker was free: cancelled.
      ++cancelled_;
      return Decision::Idle(drop + take);
    }
    Decision d;
    d.kind = Decision::Kind::kDispatch;
    d.drop = drop;
    d.batch_size = batch_sizes_[b];
    d.take = take;
    d.subnet_index = -1;
    d.worker = worker;
    d.earliest = start > now ? start : 0;
    d.latest = latest;
    planned = std::max(now, start) + overhead + Estimate(b);
    return d;
  }
  return Decision::Idle(drop);
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
