#include "policies/orloj_policy.h"

#include <algorithm>
#include <limits>

#include "policies/profiled_policy.h"

namespace superserve {

OrlojPolicy::OrlojPolicy(const ModelProfile& profile, OrlojOptions options)
    : DynamicModelPolicy("orloj", profile, options.base, /*adaptive_exits=*/true),
      options_(options) {
  double min_l = std::numeric_limits<double>::max();
  for (size_t i = 0; i + 1 < distributions().size(); ++i) {
    min_l = std::min(min_l, distributions()[i].min());
  }
  fastest_ = Micros(model_.Latency(1, min_l));
  if (options_.every_batch_size) {
    for (int32_t k = 1; k <= batch_sizes_.back(); ++k) sizes_.push_back(k);
  } else {
    sizes_ = batch_sizes_;
  }
  for (int32_t k : sizes_) {
    dispatch_size_.push_back(*std::lower_bound(batch_sizes_.begin(), batch_sizes_.end(), k));
  }
  count_.assign(sizes_.size(), 0);
  stale_.assign(sizes_.size(), 0);
  OnDistributionsChanged();
  MaybeRefresh(0);  // the profile's tables: the first decision rebuilds nothing
}

void OrlojPolicy::OnDistributionsChanged() {
  const auto& d = distributions();
  const EmpiricalDistribution& mix = d.back();
  tables_.assign(sizes_.size(), {});
  efficient_.assign(sizes_.size(), false);
  double best_per_request = std::numeric_limits<double>::max();
  for (size_t b = 0; b < sizes_.size(); ++b) {
    const int32_t k = sizes_[b];
    // The batch size's own cost: k draws from the mix (§4.3).
    const double mean = model_.Latency(k, ExpectedMax(mix, k));
    // A batch of k runs as the profiled size >= k but for k requests.
    const double per_request = mean / k;
    efficient_[b] = b == 0 || per_request < best_per_request;
    best_per_request = std::min(best_per_request, per_request);
    for (const EmpiricalDistribution& own : d) {
      tables_[b].push_back(
          OrlojScoreTable::Build(own, mix, k, model_, /*mean_batch_us=*/0, options_.score));
    }
  }
  groups_per_dist_ = tables_.front().front().groups();
  max_b_ = 0;
  for (const auto& per_size : tables_) {
    for (const OrlojScoreTable& t : per_size) max_b_ = std::max(max_b_, t.b());
  }
  shift_ = overhead_estimate();
  floors_.assign(sizes_.size(), std::vector<Nanos>(d.size() * groups_per_dist_));
  for (size_t b = 0; b < sizes_.size(); ++b) {
    for (size_t dist = 0; dist < d.size(); ++dist) {
      for (int32_t g = 0; g < groups_per_dist_; ++g) {
        floors_[b][dist * groups_per_dist_ + g] = Micros(tables_[b][dist].Floor(g)) + shift_;
      }
    }
  }
  // Every tracked request is regrouped under the new tables.
  groups_.assign(sizes_.size(), std::vector<Group>(d.size() * groups_per_dist_));
  std::fill(count_.begin(), count_.end(), 0);
  std::fill(stale_.begin(), stale_.end(), 0);
  // Taken requests' keys went with the old groups.
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (it->second.taken) {
      tracked_.erase(it++);
    } else {
      std::fill(it->second.group.begin(), it->second.group.end(), -1);
      ++it;
    }
  }
  regroup_ = true;
}

void OrlojPolicy::Rebuild(Nanos now) {
  regroup_ = false;
  std::vector<QueryId> gone;
  for (auto& [id, r] : tracked_) {
    bool any = false;
    for (size_t b = 0; b < sizes_.size(); ++b) {
      Place(r, b, now);
      any |= r.group[b] >= 0;
    }
    if (!any) gone.push_back(id);
  }
  for (QueryId id : gone) tracked_.erase(id);
}

void OrlojPolicy::Place(Tracked& r, size_t b, Nanos now) {
  const OrlojScoreTable& t = tables_[b][r.dist];
  const int32_t g = t.Group(ToMicros(r.q.deadline - shift_ - now));
  if (g != r.group[b]) {
    Unplace(r, b);
    if (g >= 0) {
      GroupOf(b, r.dist, g).insert({r.q.deadline, r.q.id});
      ++count_[b];
      r.group[b] = static_cast<int16_t>(g);
    }
  }
}

void OrlojPolicy::Unplace(Tracked& r, size_t b) {
  if (r.group[b] < 0) return;
  GroupOf(b, r.dist, r.group[b]).erase({r.q.deadline, r.q.id});
  --count_[b];
  r.group[b] = -1;
}

void OrlojPolicy::TakeAt(size_t b, int32_t gi, Group::iterator it) {
  const QueryId id = it->second;
  groups_[b][gi].erase(it);
  --count_[b];
  auto t = tracked_.find(id);
  Tracked& r = t->second;
  r.group[b] = -1;
  r.taken = true;
  for (size_t other = 0; other < sizes_.size(); ++other) {
    if (r.group[other] < 0) continue;
    --count_[other];
    ++stale_[other];
    ++r.stale;
  }
  if (r.stale == 0) tracked_.erase(t);
}

void OrlojPolicy::PurgeEnd(size_t b, size_t gi, bool back) {
  Group& g = groups_[b][gi];
  while (stale_[b] > 0 && !g.empty()) {
    auto it = back ? std::prev(g.end()) : g.begin();
    auto t = tracked_.find(it->second);
    Tracked& r = t->second;
    if (!r.taken) return;
    g.erase(it);
    r.group[b] = -1;
    --stale_[b];
    if (--r.stale == 0) tracked_.erase(t);
  }
}

void OrlojPolicy::Insert(const Query& q, Nanos now) {
  auto [it, inserted] = tracked_.try_emplace(q.id);
  Tracked& r = it->second;
  if (!inserted && r.taken) {  // requeued: its stale keys go now
    for (size_t b = 0; b < sizes_.size(); ++b) {
      if (r.group[b] < 0) continue;
      GroupOf(b, r.dist, r.group[b]).erase({r.q.deadline, r.q.id});
      --stale_[b];
    }
  } else if (!inserted) {
    for (size_t b = 0; b < sizes_.size(); ++b) Unplace(r, b);
  }
  r.taken = false;
  r.stale = 0;
  r.q = q;
  r.dist = DistIndex(q);
  r.group.assign(sizes_.size(), int16_t{-1});
  bool any = false;
  for (size_t b = 0; b < sizes_.size(); ++b) {
    Place(r, b, now);
    any |= r.group[b] >= 0;
  }
  if (!any) tracked_.erase(it);
}

void OrlojPolicy::OnArrival(const Query& q, Nanos now) {
  DynamicModelPolicy::OnArrival(q, now);
  Insert(q, now);
}

void OrlojPolicy::ProcessMilestones(Nanos now) {
  // A request leaves group g once x = D - t drops below the group's floor,
  // i.e. at D - floor: in deadline order inside the group, so only each
  // group's earliest members need looking at (no milestone heap).
  for (size_t b = 0; b < sizes_.size(); ++b) {
    for (size_t gi = 0; gi < groups_[b].size(); ++gi) {
      Group& group = groups_[b][gi];
      const Nanos floor = floors_[b][gi];
      while (!group.empty() && group.begin()->first - floor + 1 <= now) {
        auto it = tracked_.find(group.begin()->second);
        Tracked& r = it->second;
        if (r.taken) {  // a stale key: it goes
          group.erase(group.begin());
          r.group[b] = -1;
          --stale_[b];
          if (--r.stale == 0) tracked_.erase(it);
          continue;
        }
        Place(r, b, now);  // leaves `group`
        if (std::all_of(r.group.begin(), r.group.end(), [](int16_t x) { return x < 0; })) {
          tracked_.erase(it);  // viable for no batch size: the sweep answers it
        }
      }
    }
  }
}

Nanos OrlojPolicy::Earliest(size_t b) {
  Nanos earliest = std::numeric_limits<Nanos>::max();
  const auto& groups = groups_[b];
  for (size_t first = 0; first < groups.size(); first += groups_per_dist_) {
    for (size_t gi = first; gi < first + groups_per_dist_; ++gi) {
      PurgeEnd(b, gi, /*back=*/false);
      if (!groups[gi].empty()) {
        earliest = std::min(earliest, groups[gi].begin()->first);
        break;
      }
    }
  }
  return earliest;
}

double OrlojPolicy::ScoreOf(QueryId id, size_t b, Nanos now) const {
  auto it = tracked_.find(id);
  if (it == tracked_.end() || it->second.taken || it->second.group[b] < 0) return -1;
  const Tracked& r = it->second;
  return tables_[b][r.dist].Score(r.group[b], RelUs(r.q.deadline - shift_), RelUs(now));
}

Decision OrlojPolicy::Decide(const SchedulingContext& ctx) {
  const Nanos now = ctx.now;
  // Relative timestamps (§4.4): nothing stored depends on the base (alpha is
  // formed from the deadline when a score is read), so a reset costs nothing.
  if (!based_ || max_b_ * RelUs(now) > options_.max_exponent) {
    base_ = now;
    based_ = true;
  }
  MaybeRefresh(now);
  if (regroup_) Rebuild(now);
  ProcessMilestones(now);
  Nanos next = 0;
  const int32_t drop = static_cast<int32_t>(
      ctx.queue.CountDeadlinesBefore(now + shift_ + fastest_, &next, kMaxDropsPerDecision));
  if (ctx.free_workers.empty()) return Decision::Idle(drop);

  // Batch size: ordered by (earliest deadline in Q_bs, bs) descending, the
  // first with enough requests.
  int32_t cand = -1;
  Nanos cand_deadline = std::numeric_limits<Nanos>::min();
  for (size_t b = 0; b < sizes_.size(); ++b) {
    // Full: more requests than the next smaller size holds (a dynamic batch
    // runs unpadded, for the requests it has): with every batch size that
    // is |Q_bs| >= bs, the pseudocode's test.
    if (!efficient_[b] || count_[b] <= (b > 0 ? sizes_[b - 1] : 0)) continue;
    const Nanos earliest = Earliest(b);
    if (cand < 0 || earliest > cand_deadline ||
        (earliest == cand_deadline && sizes_[b] > sizes_[cand])) {
      cand = static_cast<int32_t>(b);
      cand_deadline = earliest;
    }
  }
  if (cand < 0) {  // no queue is full: a partial batch of the smallest size
    for (size_t b = 0; b < sizes_.size() && cand < 0; ++b) {
      if (count_[b] > 0) cand = static_cast<int32_t>(b);
    }
  }
  if (cand < 0) return Decision::Idle(drop);

  // Pop the top-scored requests of Q_cand: the best of the group ends.
  const auto& tables = tables_[cand];
  auto& groups = groups_[cand];
  const double t_rel = RelUs(now);
  auto end_score = [&](int32_t gi, bool back) {
    const Group& g = groups[gi];
    const Key& k = back ? *g.rbegin() : *g.begin();
    return tables[gi / groups_per_dist_].Score(gi % groups_per_dist_, RelUs(k.first - shift_),
                                               t_rel);
  };
  auto end_deadline = [&](int32_t gi, bool back) {
    const Group& g = groups[gi];
    return back ? g.rbegin()->first : g.begin()->first;
  };
  auto better = [](const Top& a, const Top& b) {  // heap order: worst on top
    if (a.score != b.score) return a.score < b.score;
    if (a.deadline != b.deadline) return a.deadline > b.deadline;
    return a.group_index > b.group_index;
  };
  tops_.clear();
  for (int32_t gi = 0; gi < static_cast<int32_t>(groups.size()); ++gi) {
    if (groups[gi].empty()) continue;
    // Inside a group the score is monotone in the deadline: the best member
    // is at one end, and stays at that end as members are popped.
    const bool back = tables[gi / groups_per_dist_].LatestScoresHighest(gi % groups_per_dist_);
    PurgeEnd(static_cast<size_t>(cand), static_cast<size_t>(gi), back);
    if (groups[gi].empty()) continue;
    tops_.push_back(Top{end_score(gi, back), gi, back, end_deadline(gi, back)});
  }
  std::make_heap(tops_.begin(), tops_.end(), better);
  Decision d;
  d.kind = Decision::Kind::kDispatch;
  d.drop = drop;
  d.batch_size = dispatch_size_[cand];
  d.subnet_index = -1;
  d.worker = ctx.free_workers.front();
  const int64_t want = std::min<int64_t>(sizes_[cand], count_[cand]);
  taken_dists_.clear();
  Nanos taken_deadline = std::numeric_limits<Nanos>::max();
  while (static_cast<int64_t>(d.take_ids.size()) < want && !tops_.empty()) {
    std::pop_heap(tops_.begin(), tops_.end(), better);
    Top top = tops_.back();
    tops_.pop_back();
    Group& g = groups[top.group_index];
    auto it = top.from_back ? std::prev(g.end()) : g.begin();
    d.take_ids.push_back(it->second);
    if (exit_thresholds() > 0) {
      taken_dists_.push_back(top.group_index / groups_per_dist_);
      taken_deadline = std::min(taken_deadline, it->first);
    }
    TakeAt(static_cast<size_t>(cand), top.group_index, it);
    PurgeEnd(static_cast<size_t>(cand), static_cast<size_t>(top.group_index), top.from_back);
    if (!g.empty()) {
      top.score = end_score(top.group_index, top.from_back);
      top.deadline = end_deadline(top.group_index, top.from_back);
      tops_.push_back(top);
      std::push_heap(tops_.begin(), tops_.end(), better);
    }
  }
  d.take = static_cast<int32_t>(d.take_ids.size());
  if (d.take == 0) return Decision::Idle(drop);
  // Load-adaptive exits (step 6 in orloj_policy.h): the budget is the
  // batch's earliest deadline, less what the requests still queued need as
  // one batch at the lowest threshold before theirs.
  if (exit_thresholds() > 0) {
    const double p = options_.score.viable_quantile;
    double budget_us = ToMicros(taken_deadline - now - shift_);
    if (count_[0] > 0) {
      const Nanos next = Earliest(0);
      const int32_t left = static_cast<int32_t>(std::min<int64_t>(count_[0], sizes_.back()));
      budget_us = std::min(budget_us,
                           ToMicros(next - now - 2 * shift_) - LowestThresholdBatchUs(left, p));
    }
    d.exit_threshold_index = PickExitThreshold(taken_dists_, budget_us, p);
  }
  return d;
}

}  // namespace superserve
