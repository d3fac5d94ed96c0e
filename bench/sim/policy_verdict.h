#ifndef SUPERSERVE_BENCH_SIM_POLICY_VERDICT_H_
#define SUPERSERVE_BENCH_SIM_POLICY_VERDICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/sim/scheduling_cases.h"
#include "policies/policy_factory.h"

namespace superserve {

// What the default policy promises on every profile and trace
// (docs/scheduling.md), judged in the simulator against references run on
// the same case:
//   - attainment >= the best fixed subnet's - kAttainmentTolerance;
//   - attainment >= every other shipped policy's - kAttainmentTolerance;
//   - where some fixed subnet holds kHold: attainment >= kHold and mean
//     accuracy >= the most accurate such subnet's - kAccuracyTolerance;
//   - on one-subnet profiles: goodput at >= 0.99 >= kGoodputRatio x
//     symphony's (JudgeGoodput).
inline constexpr double kHold = 0.999;
inline constexpr double kAttainmentTolerance = 0.005;
inline constexpr double kAccuracyTolerance = 0.3;
inline constexpr double kGoodputRatio = 0.97;

struct PolicyOutcome {
  double attainment = 0;
  double accuracy = 0;  // mean over the queries answered in time, percent
};

struct CaseVerdict {
  std::string label;
  PolicyOutcome outcome;  // the policy judged
  double best_fixed_attainment = 0;
  // Accuracy of the most accurate fixed subnet (of those run) holding kHold;
  // -1: none holds.
  double envelope = -1;
  int fixed_runs = 0;
  double best_other_attainment = 0;  // over the other shipped policies
  std::string best_other;

  double MarginToFixed() const { return outcome.attainment - best_fixed_attainment; }
  double MarginToOthers() const { return outcome.attainment - best_other_attainment; }
  bool HasEnvelope() const { return envelope >= 0; }
  double MarginToHold() const { return outcome.attainment - kHold; }
  double MarginToEnvelope() const { return outcome.accuracy - envelope; }
  // Every property holds on this case.
  bool Holds() const;
};

// Runs `policy` (with `config`), the fixed subnets and `others` on the case.
// Fixed subnets: every one when there are at most 12, else 12 evenly spaced
// in accuracy, the highest-capacity one, and a bisection between the most
// accurate holding sample and the next (so the envelope is that of the
// subnets run: a lower bound where attainment is not monotone in accuracy).
CaseVerdict JudgeCase(const SchedulingCase& c, const std::string& policy,
                      const PolicyConfig& config, const std::vector<std::string>& others);

struct GoodputVerdict {
  std::string label;
  double policy_rate = 0;     // the highest Poisson rate it serves at >= 0.99, q/s
  double reference_rate = 0;  // the same for the reference policy
  double Ratio() const { return reference_rate > 0 ? policy_rate / reference_rate : 1.0; }
};

// The Poisson trace JudgeGoodput runs at `load` x the fastest subnet's
// capacity on the case's profile, workers and SLO (about 6,000 queries).
std::vector<Nanos> GoodputTrace(const SchedulingCase& c, double load);

// Goodput at >= 0.99 of `policy` and `reference` on the case's profile,
// workers and SLO: Poisson traces from 0.3x to 1.6x the fastest subnet's
// capacity in steps of 0.02x (the highest step that holds counts).
GoodputVerdict JudgeGoodput(const SchedulingCase& c, const std::string& policy,
                            const std::string& reference, const PolicyConfig& config);

// Minimum, 5th percentile and median of `margins` (empty: all 0).
struct MarginSummary {
  int count = 0;
  double min = 0;
  double p5 = 0;
  double median = 0;
};
MarginSummary Summarize(std::vector<double> margins);

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_SIM_POLICY_VERDICT_H_
