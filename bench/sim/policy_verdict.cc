#include "bench/sim/policy_verdict.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "bench/sim/simulator.h"
#include "bench/sim/trace_generators.h"

namespace superserve {
namespace {

// The product policy that runs one subnet.
constexpr char kFixedSubnet[] = "fixed-subnet";

PolicyOutcome RunOnCase(const SchedulingCase& c, const std::vector<Nanos>& arrivals,
                  const std::string& policy, const PolicyConfig& config) {
  auto made = MakePolicy(policy, c.profile, config);
  if (!made.ok()) return {};
  auto r = Simulate(c.profile, arrivals, made->get(), c.sim);
  if (!r.ok()) return {};
  return {r->slo_attainment(), r->mean_accuracy()};
}

}  // namespace

bool CaseVerdict::Holds() const {
  if (MarginToFixed() < -kAttainmentTolerance) return false;
  if (MarginToOthers() < -kAttainmentTolerance) return false;
  if (HasEnvelope() && (MarginToHold() < 0 || MarginToEnvelope() < -kAccuracyTolerance)) {
    return false;
  }
  return true;
}

CaseVerdict JudgeCase(const SchedulingCase& c, const std::string& policy,
                      const PolicyConfig& config, const std::vector<std::string>& others) {
  CaseVerdict v;
  v.label = c.label;
  v.outcome = RunOnCase(c, c.arrivals, policy, config);
  const ModelProfile& p = c.profile;
  const int s = static_cast<int>(p.subnets.size());
  // Subnet indices in ascending accuracy.
  std::vector<int> by_accuracy(s);
  for (int i = 0; i < s; ++i) by_accuracy[i] = i;
  std::stable_sort(by_accuracy.begin(), by_accuracy.end(), [&](int a, int b) {
    return p.subnets[a].accuracy < p.subnets[b].accuracy;
  });
  std::map<int, PolicyOutcome> fixed;  // position in by_accuracy -> outcome
  auto run_fixed = [&](int pos) -> const PolicyOutcome& {
    auto it = fixed.find(pos);
    if (it != fixed.end()) return it->second;
    PolicyConfig fc;
    fc.fixed_subnet_id = p.subnets[by_accuracy[pos]].id;
    return fixed[pos] = RunOnCase(c, c.arrivals, kFixedSubnet, fc);
  };
  constexpr int kSample = 12;
  std::vector<int> sample;
  if (s <= kSample) {
    for (int i = 0; i < s; ++i) sample.push_back(i);
  } else {
    for (int k = 0; k < kSample; ++k) sample.push_back(k * (s - 1) / (kSample - 1));
    int fastest = 0;
    FastestCapacity(p, c.sim.workers, c.sim.slo, c.sim.dispatch_overhead, &fastest);
    sample.push_back(static_cast<int>(
        std::find(by_accuracy.begin(), by_accuracy.end(), fastest) - by_accuracy.begin()));
    std::sort(sample.begin(), sample.end());
    sample.erase(std::unique(sample.begin(), sample.end()), sample.end());
  }
  int best_holding = -1;
  for (int pos : sample) {
    if (run_fixed(pos).attainment >= kHold) best_holding = pos;
  }
  if (best_holding >= 0 && best_holding < s - 1) {
    auto next = std::upper_bound(sample.begin(), sample.end(), best_holding);
    if (next != sample.end()) {
      int lo = best_holding, hi = *next;  // lo holds, hi does not
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        (run_fixed(mid).attainment >= kHold ? lo : hi) = mid;
      }
    }
  }
  for (const auto& [pos, o] : fixed) {
    v.best_fixed_attainment = std::max(v.best_fixed_attainment, o.attainment);
    if (o.attainment >= kHold) {
      v.envelope = std::max(v.envelope, p.subnets[by_accuracy[pos]].accuracy);
    }
  }
  v.fixed_runs = static_cast<int>(fixed.size());
  for (const std::string& other : others) {
    const PolicyOutcome o = RunOnCase(c, c.arrivals, other, PolicyConfig());
    if (o.attainment >= v.best_other_attainment) {
      v.best_other_attainment = o.attainment;
      v.best_other = other;
    }
  }
  return v;
}

std::vector<Nanos> GoodputTrace(const SchedulingCase& c, double load) {
  const double rate =
      load * FastestCapacity(c.profile, c.sim.workers, c.sim.slo, c.sim.dispatch_overhead);
  if (rate <= 0) return {};
  // About 6,000 queries, and 20 SLOs at least (at most 30,000 queries).
  const Nanos duration =
      std::max(Seconds(6000 / rate), std::min<Nanos>(20 * c.sim.slo, Seconds(30000 / rate)));
  // The seed of the goodput step at this load, as JudgeGoodput runs it.
  const auto step = static_cast<uint64_t>(std::max(0LL, std::llround((load - 0.3) / 0.02)));
  return PoissonArrivals(rate, duration, c.seed + step);
}

GoodputVerdict JudgeGoodput(const SchedulingCase& c, const std::string& policy,
                            const std::string& reference, const PolicyConfig& config) {
  GoodputVerdict v;
  v.label = c.label;
  const double capacity =
      FastestCapacity(c.profile, c.sim.workers, c.sim.slo, c.sim.dispatch_overhead);
  for (int step = 0; step <= 65; ++step) {
    const double rate = capacity * (0.3 + 0.02 * step);
    const std::vector<Nanos> arrivals = GoodputTrace(c, 0.3 + 0.02 * step);
    if (RunOnCase(c, arrivals, policy, config).attainment >= 0.99) v.policy_rate = rate;
    if (RunOnCase(c, arrivals, reference, PolicyConfig()).attainment >= 0.99) v.reference_rate = rate;
  }
  return v;
}

MarginSummary Summarize(std::vector<double> margins) {
  MarginSummary m;
  m.count = static_cast<int>(margins.size());
  if (margins.empty()) return m;
  std::sort(margins.begin(), margins.end());
  m.min = margins.front();
  m.p5 = margins[static_cast<size_t>(0.05 * static_cast<double>(margins.size() - 1))];
  m.median = margins[(margins.size() - 1) / 2];
  return m;
}

}  // namespace superserve
