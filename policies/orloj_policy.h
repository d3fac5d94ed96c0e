#ifndef SUPERSERVE_POLICIES_ORLOJ_POLICY_H_
#define SUPERSERVE_POLICIES_ORLOJ_POLICY_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "policies/dynamic_policy.h"
#include "policies/orloj_score.h"

namespace superserve {

struct OrlojOptions {
  DynamicPolicyOptions base;
  OrlojScoreTable::Params score;
  // Relative timestamps are re-based once b * (now - base) exceeds this, so
  // that e^{b t} stays far from overflow (§4.4).
  double max_exponent = 50;
  // The batch sizes S of Algorithm 1: the profile's (false), or every size
  // from 1 to the profile's largest (true; a batch of k is dispatched as the
  // smallest profiled size >= k and runs for k).
  bool every_batch_size = false;
};

// Orloj (Algorithm 1): one priority queue per batch size holding the
// requests still viable for it, ordered by the time-varying score
// p(t) = alpha * e^{bt} + beta (policies/orloj_score.h). A decision
//   1. re-bases relative timestamps when due (every score is recomputed);
//   2. moves requests whose milestone passed to their new score group, and
//      out of the batch sizes they can no longer make;
//   3. drops the EDF head that no batch can save (Decision::drop);
//   4. picks the batch size as the pseudocode writes it among the efficient
//      sizes (those whose expected time per request, E[L_B] / k, is below
//      every smaller size's: a larger batch that is not serves its requests
//      in more worker time): ordered by (earliest deadline in Q_bs, bs)
//      descending, the first that is full: more requests than the next
//      smaller size holds (a dynamic batch runs unpadded; with every batch
//      size this is |Q_bs| >= bs); the smallest profiled size with a partial
//      batch when none is full, so that a model without batch size 1 is
//      still served;
//   5. pops the bs top-scored requests of Q_bs and names them in
//      Decision::take_ids;
//   6. load-adaptive exits (a profile listing dynamic.thresholds; steps 1-5
//      then plan with the lowest threshold's distributions): sets
//      Decision::exit_threshold_index to the highest threshold at which the
//      taken requests' batch meets its budget as surely as at the lowest
//      threshold (PickExitThreshold; the lowest when even it does so with
//      probability < viable_quantile). The budget: their earliest deadline,
//      and the latest finish that leaves the requests still queued (up to
//      the largest batch) time to run as one batch at the lowest threshold
//      (LowestThresholdBatchUs) by the earliest of theirs, each less the
//      dispatch overhead. An empty queue (light load): the batch's own.
//
// Priority queue: instead of the paper's dynamic convex hull, requests of one
// (batch size, application, score group) share A_g and beta_g, so inside a
// group the score is monotone in the deadline: each group is an ordered set
// by deadline and its best member is one of its two ends. The top of Q_bs is
// the best of the group ends: O(G) per query with G = applications x bins,
// O(log n) per insertion (one ordered insert per batch size) and per
// milestone. Milestones need no heap: inside a group they come in deadline
// order, so a decision looks at each group's earliest member. A dispatched
// request leaves the other batch sizes' queues lazily (see Tracked), and the
// earliest deadline of Q_bs is the first non-empty group's (Earliest)
// (bench/benchmarks/orloj_bench.cc measures it at 10,000 pending against the
// EDF queue).
class OrlojPolicy final : public DynamicModelPolicy {
 public:
  OrlojPolicy(const ModelProfile& profile, OrlojOptions options);

  Decision Decide(const SchedulingContext& ctx) override;
  void OnArrival(const Query& q, Nanos now) override;
  void OnRequeue(const Query& q, Nanos now) override { Insert(q, now); }

  // Requests tracked in Q_bs (tests and benchmarks).
  int64_t queued(size_t batch_index) const { return count_[batch_index]; }
  // The score table of (batch size index, distribution index) (tests).
  const OrlojScoreTable& table(size_t batch_index, int32_t dist) const {
    return tables_[batch_index][dist];
  }
  // The current score of a tracked request in Q_bs, or -1 if it is not there.
  double ScoreOf(QueryId id, size_t batch_index, Nanos now) const;
  Nanos base() const { return base_; }

 protected:
  void OnDistributionsChanged() override;

 private:
  using Key = std::pair<Nanos, QueryId>;  // (deadline, id)
  using Group = absl::btree_set<Key>;
  // A request in the Q_bs it is viable for. A taken one (dispatched) leaves
  // only the queue it was popped from at once; its keys in the other queues
  // stay behind, no longer counted, and are erased when they reach a group's
  // end (PurgeEnd) or a milestone: a decision then costs one ordered-set
  // erase per taken request instead of one per batch size.
  struct Tracked {
    Query q;
    int32_t dist = 0;
    absl::InlinedVector<int16_t, 8> group;  // per batch index; -1 = not in Q_bs
    bool taken = false;
    int16_t stale = 0;  // taken: batch sizes whose queue still holds its key
  };

  void Insert(const Query& q, Nanos now);
  // Puts tracked request `r` into the group of Q_b matching `now` (or takes
  // it out of Q_b).
  void Place(Tracked& r, size_t b, Nanos now);
  void Unplace(Tracked& r, size_t b);
  // Takes the request whose key is `it` in group `gi` of Q_b (see Tracked).
  void TakeAt(size_t b, int32_t gi, Group::iterator it);
  // Erases taken requests' keys from one end of group gi of Q_b until a
  // live request (or nothing) is there.
  void PurgeEnd(size_t b, size_t gi, bool back);
  void ProcessMilestones(Nanos now);
  void Rebuild(Nanos now);
  double RelUs(Nanos t) const { return ToMicros(t - base_); }
  // The earliest deadline in Q_b (max if empty). After ProcessMilestones a
  // member of group g has Floor(g) <= D - now < Floor(g + 1): per
  // distribution, the lowest non-empty group holds the earliest deadline.
  Nanos Earliest(size_t b);
  Group& GroupOf(size_t b, int32_t dist, int32_t g) { return groups_[b][dist * groups_per_dist_ + g]; }

  OrlojOptions options_;
  Nanos fastest_ = 0;  // batch of one with the shortest time any application has
  // The dispatch overhead (DynamicModelPolicy::overhead_estimate) when the
  // tables were last built: a request's time left for its batch is
  // x = D - t - shift_, since its answer arrives that much after the batch.
  Nanos shift_ = 0;
  Nanos base_ = 0;
  double max_b_ = 0;  // the largest b of any table (re-basing)
  bool based_ = false;
  bool regroup_ = false;  // tables changed: regroup every tracked request
  int32_t groups_per_dist_ = 0;
  std::vector<std::vector<OrlojScoreTable>> tables_;  // [batch index][dist]
  std::vector<std::vector<Group>> groups_;            // [batch index][dist * G + g]
  // Floor(g) of each group as a time offset, [batch index][dist * G + g]:
  // a member leaves its group at deadline - floor (milestones).
  std::vector<std::vector<Nanos>> floors_;
  std::vector<int64_t> count_;                        // |Q_bs| (live requests)
  std::vector<int64_t> stale_;                        // taken requests' keys left in Q_bs
  std::vector<int32_t> sizes_;                        // S
  std::vector<int32_t> dispatch_size_;                // profiled size for each of S
  // Per batch size: whether its expected time per request (E[L_B] / k, the
  // score's own E[L_B]) is below every smaller size's. A size that is not
  // does the same work in more worker time than a smaller one and is never
  // chosen (its queue is still kept, for when the estimates change).
  std::vector<bool> efficient_;
  absl::flat_hash_map<QueryId, Tracked> tracked_;
  // Scratch of a decision.
  struct Top {
    double score;
    int32_t group_index;
    bool from_back;
    // Of the end member. Breaks equal scores: far from their deadlines
    // (thousands of batch times) scores underflow to 0, and then the
    // earliest deadline goes first, not the lowest application index.
    Nanos deadline;
  };
  std::vector<Top> tops_;
  std::vector<int32_t> taken_dists_;  // distribution index of each taken request
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_ORLOJ_POLICY_H_
