#ifndef SUPERSERVE_POLICIES_ORLOJ_SCORE_H_
#define SUPERSERVE_POLICIES_ORLOJ_SCORE_H_

#include <cstdint>
#include <vector>

#include "common/empirical_distribution.h"
#include "policies/batch_time_model.h"

namespace superserve {

// Orloj's per-request priority score (§4.1 Eq. (1)-(2), §4.4) for one
// (application, batch size): the expected cost saved by running the request
// now rather than after an exponentially distributed delay (rate b), per unit
// of expected batch time. The batch's time is c0 + c1*k*max(l) where the
// request's own l follows its application's distribution and the other k-1
// follow the model's mix (§4.3: the batch's members are not known when the
// score is computed); the CDF of the max is the product of the CDFs.
//
// With x = D - t the time left, the score is a sum over the batch-latency
// bins [L1_j, L2_j) with density h_j: a bin with L2_j <= x contributes
// h_j/b (e^{b L2_j} - e^{b L1_j}) e^{-b x}, the bin holding x contributes
// h_j/b (1 - e^{b L1_j} e^{-b x}), later bins nothing. So the score is
// alpha * e^{b t} + beta where (alpha, beta) change only when x crosses a bin
// edge (the "milestones"): requests are grouped by the bin holding x, and
// alpha = A_g * e^{-b D}. Times here are microseconds relative to a base the
// policy resets before e^{b t} can overflow.
class OrlojScoreTable {
 public:
  // The most bins of a batch-latency histogram. A decision looks at every
  // (batch size, application, bin) group, so its cost grows with the bins
  // (superserve-sim, 971 queries: 0.01 s at 48 bins, 0.04 s at 1024, 0.17 s
  // at 4000); and OrlojPolicy keeps a request's group in an int16 (33000
  // bins crashed).
  static constexpr int32_t kMaxGridBins = 1024;
  // The default anticipated delay (b = 0), in this batch's expected times.
  // E[L_B] is the request's own (Eq. 1 and 5: its application and k - 1 of
  // the mix), so with the paper's tiny b the score is ~P(success) / E[L_B]:
  // shortest first among requests sure to finish, which drops the long ones
  // at loose SLOs (-0.03 at 4-5 x P99, docs/dynamic.md); a delay of a few
  // batches makes a request's urgency count. 3 was chosen on seed 1 of the
  // grid among delays of 1 to 100 batches, and checked on seed 2.
  static constexpr double kDelayBatches = 3;

  struct Params {
    // b, or 0 for 1 / (kDelayBatches * E[L_B]). The paper's 1e-4 per
    // millisecond (1e-7) was the default.
    double b_per_us = 0;
    double cost = 1;         // c, the penalty of a missed deadline
    int32_t grid_bins = 48;  // bins of the batch-latency histogram, [1, kMaxGridBins]
    // A request is viable for this batch size while x >= the batch time's
    // quantile at this level (Algorithm 1 line 20's EstimateBatchLatency).
    double viable_quantile = 0.5;
  };

  // own: the request's application; mix: the model's application mix;
  // k: the batch size; mean_batch_us: E[L_B], or <= 0 for the expectation of
  // the batch-time histogram the score integrates (own and k-1 of the mix).
  static OrlojScoreTable Build(const EmpiricalDistribution& own, const EmpiricalDistribution& mix,
                               int32_t k, const BatchTimeModel& model, double mean_batch_us,
                               const Params& params);

  int32_t groups() const { return static_cast<int32_t>(a_.size()); }
  // The group of a request with x us left: -1 = not viable for this batch
  // size; j < groups()-1: x in bin j; groups()-1: x beyond the last bin.
  int32_t Group(double x_us) const;
  // The smallest x still in group g (the request leaves g below it).
  double Floor(int32_t g) const;
  double viable_from() const { return viable_from_; }

  // alpha of a request in group g with relative deadline d (us).
  double Alpha(int32_t g, double deadline_rel_us) const;
  double Beta(int32_t g) const { return beta_[g]; }
  // Inside group g the score is monotone in the deadline: true if the latest
  // deadline scores highest (A_g < 0), false if the earliest does.
  bool LatestScoresHighest(int32_t g) const { return a_[g] < 0; }
  // alpha * e^{b t} + beta at relative time t (us); g must be Group(d - t).
  double Score(int32_t g, double deadline_rel_us, double now_rel_us) const;
  // P(batch time <= x).
  double SuccessProbability(double x_us) const;
  // The batch-latency histogram's edges and bin probabilities (tests).
  const std::vector<double>& latency_edges() const { return edges_; }
  const std::vector<double>& probabilities() const { return prob_; }
  double b() const { return b_; }

 private:
  double b_ = 1e-7;
  double viable_from_ = 0;
  std::vector<double> edges_;  // batch-latency bin edges (us), n + 1
  std::vector<double> prob_;   // n
  std::vector<double> a_;      // n + 1: A_g (times e^{-b D} gives alpha)
  std::vector<double> beta_;   // n + 1
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_ORLOJ_SCORE_H_
