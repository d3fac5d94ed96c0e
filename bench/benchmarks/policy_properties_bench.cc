// `policy-properties [tune|heldout] [CASES] [POLICY]`: the default policy's
// promises (bench/sim/policy_verdict.h) on generated cases
// (bench/sim/scheduling_cases.h), each against references run on the same
// case in the same run: the best fixed subnet, every other shipped policy,
// the most accurate fixed subnet that holds 0.999, and symphony's goodput on
// the one-subnet cases. Prints one line per case, the distribution of each
// margin (minimum, 5th percentile, median) and, with --json, one JSON line.
// `tune` (default) are the seeds a developer may look at; `heldout` the ones
// CI judges (tests/bench/default_policy_property_test.cc).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/benchmark_registry.h"
#include "bench/sim/policy_verdict.h"
#include "bench/sim/scheduling_cases.h"
#include "bench/sim/simulator.h"
#include "common/json_writer.h"

namespace superserve::bench::policy_properties_bench {
namespace {

JsonWriter SummaryJson(const MarginSummary& m) {
  JsonWriter j;
  j.Add("count", static_cast<int64_t>(m.count)).Add("min", m.min).Add("p5", m.p5).Add("median", m.median);
  return j;
}

int Run(const BenchmarkArgs& args) {
  std::string set = args.extra.size() > 0 ? args.extra[0] : "tune";
  // tune:OFFSET starts that many cases into the tune set (the set is endless).
  uint64_t offset = 0;
  if (set.rfind("tune:", 0) == 0) {
    offset = std::strtoull(set.c_str() + 5, nullptr, 10);
    set = "tune";
  }
  if (set != "tune" && set != "heldout") {
    std::fprintf(stderr, "policy-properties: the seed set is tune or heldout; got \"%s\"\n",
                 set.c_str());
    return 2;
  }
  const int cases = args.extra.size() > 1 ? std::atoi(args.extra[1].c_str()) : 60;
  if (cases < 1 || cases > 100000) {
    std::fprintf(stderr, "policy-properties: CASES must be in [1, 100000]\n");
    return 2;
  }
  const std::string policy = args.extra.size() > 2 ? args.extra[2] : PolicySpec().name;
  const uint64_t base = set == "tune" ? kTuneSeedBase + offset : kHeldOutSeedBase;
  std::vector<double> to_fixed, to_others, to_hold, to_envelope, goodput;
  int failures = 0;
  for (int i = 0; i < cases; ++i) {
    const SchedulingCase c = MakeSchedulingCase(base + i);
    const CaseVerdict v = JudgeCase(c, policy, PolicyConfig(), {"symphony"});
    to_fixed.push_back(v.MarginToFixed());
    to_others.push_back(v.MarginToOthers());
    if (v.HasEnvelope()) {
      to_hold.push_back(v.MarginToHold());
      to_envelope.push_back(v.MarginToEnvelope());
    }
    bool holds = v.Holds();
    std::string goodput_text;
    if (c.profile.subnets.size() == 1) {
      const GoodputVerdict g = JudgeGoodput(c, policy, "symphony", PolicyConfig());
      goodput.push_back(g.Ratio());
      holds = holds && g.Ratio() >= kGoodputRatio;
      goodput_text = absl::StrFormat(" | goodput %.0f vs symphony %.0f q/s (x%.3f)", g.policy_rate,
                                     g.reference_rate, g.Ratio());
    }
    if (!holds) ++failures;
    std::printf("%s %s | att %.4f acc %.2f | fixed %.4f (%d runs) %s %.4f | envelope %.2f%s\n",
                holds ? "ok  " : "FAIL", v.label.c_str(), v.outcome.attainment,
                v.outcome.accuracy, v.best_fixed_attainment, v.fixed_runs, v.best_other.c_str(),
                v.best_other_attainment, v.envelope, goodput_text.c_str());
    std::fflush(stdout);
  }
  const MarginSummary f = Summarize(to_fixed), o = Summarize(to_others), h = Summarize(to_hold),
                      e = Summarize(to_envelope), g = Summarize(goodput);
  auto line = [](const char* what, const MarginSummary& m) {
    std::printf("%-44s n=%-4d min %+.4f  p5 %+.4f  median %+.4f\n", what, m.count, m.min, m.p5,
                m.median);
  };
  std::printf("\n%s on %d %s cases: %d fail a property\n", policy.c_str(), cases, set.c_str(),
              failures);
  line("attainment - best fixed subnet's (>= -0.005)", f);
  line("attainment - best other policy's (>= -0.005)", o);
  line("attainment - 0.999 where a fixed holds (>= 0)", h);
  line("accuracy - envelope, points (>= -0.3)", e);
  line("goodput / symphony's, one subnet (>= 0.97)", g);
  if (args.json) {
    JsonWriter j;
    j.Add("benchmark", "policy-properties")
        .Add("policy", policy)
        .Add("seeds", set)
        .Add("cases", static_cast<int64_t>(cases))
        .Add("failures", static_cast<int64_t>(failures))
        .Add("margin_to_fixed", SummaryJson(f))
        .Add("margin_to_others", SummaryJson(o))
        .Add("margin_to_hold", SummaryJson(h))
        .Add("margin_to_envelope", SummaryJson(e))
        .Add("goodput_ratio_vs_symphony", SummaryJson(g));
    std::printf("%s\n", j.ToString().c_str());
  }
  return 0;
}

// `policy-case SEED POLICY [SUBNET_ID] [poisson=X]`: one generated case in
// detail (how a failing case of policy-properties is looked into);
// poisson=X replaces its trace with the Poisson one the goodput promise
// runs at X times the fastest subnet's capacity.
int RunCase(const BenchmarkArgs& args) {
  std::vector<std::string> extra = args.extra;
  double poisson = 0;
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    if (it->rfind("poisson=", 0) == 0) {
      const char* text = it->c_str() + 8;
      char* end = nullptr;
      poisson = std::strtod(text, &end);
      if (end == text || *end != '\0' || !std::isfinite(poisson) || poisson <= 0 ||
          poisson > 100) {
        std::fprintf(stderr, "policy-case: poisson=X needs X in (0, 100]; got \"%s\"\n", text);
        return 2;
      }
      extra.erase(it);
      break;
    }
  }
  if (extra.size() < 2) {
    std::fprintf(stderr, "policy-case: SEED POLICY [SUBNET_ID] [poisson=X]\n");
    return 2;
  }
  SchedulingCase c = MakeSchedulingCase(std::strtoull(extra[0].c_str(), nullptr, 10));
  if (poisson > 0) {
    c.arrivals = GoodputTrace(c, poisson);
    c.label += absl::StrFormat(" | Poisson at %.2fx capacity", poisson);
  }
  if (c.arrivals.empty()) {
    std::fprintf(stderr, "policy-case: no arrivals (%s)\n", c.label.c_str());
    return 1;
  }
  PolicyConfig config;
  if (extra.size() > 2) config.fixed_subnet_id = std::atoi(extra[2].c_str());
  auto policy = MakePolicy(extra[1], c.profile, config);
  if (!policy.ok()) {
    std::fprintf(stderr, "policy-case: %s\n", std::string(policy.status().message()).c_str());
    return 2;
  }
  SimulatorOptions sim = c.sim;
  sim.timeline = true;
  sim.timeline_bin = std::max<Nanos>(c.sim.slo * 5, (c.arrivals.back() - c.arrivals.front()) / 40);
  auto r = Simulate(c.profile, c.arrivals, policy->get(), sim);
  if (!r.ok()) {
    std::fprintf(stderr, "policy-case: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", c.label.c_str());
  for (const auto& s : c.profile.subnets) {
    std::printf("  subnet %3d acc %6.2f cap %8.0f q/s  l(1)=%.2fms l(max)=%.2fms\n", s.id, s.accuracy,
                SubnetCapacity(c.profile, &s - c.profile.subnets.data(), c.sim.workers, c.sim.slo,
                               c.sim.dispatch_overhead),
                ToMillis(s.latency.front()), ToMillis(s.latency.back()));
  }
  std::printf("%s: attainment %.4f accuracy %.2f met %lld late %lld dropped %lld batches %lld "
              "mean batch %.2f\n",
              extra[1].c_str(), r->slo_attainment(), r->mean_accuracy(),
              static_cast<long long>(r->met), static_cast<long long>(r->late),
              static_cast<long long>(r->dropped), static_cast<long long>(r->batches),
              r->mean_batch());
  for (const TimelineBin& b : r->timeline) {
    std::printf("  t=%8.3fs arrivals %6lld met %6lld late %5lld dropped %6lld batches %5lld acc %.2f\n",
                ToSeconds(b.start), static_cast<long long>(b.arrivals),
                static_cast<long long>(b.met), static_cast<long long>(b.late),
                static_cast<long long>(b.dropped), static_cast<long long>(b.batches),
                b.met ? b.accuracy_sum / b.met : 0.0);
  }
  return 0;
}

RegisterBenchmark reg_case("policy-case", "one generated case in detail (SEED POLICY [SUBNET_ID] [poisson=X])",
                           RunCase);

RegisterBenchmark reg("policy-properties",
                      "the default policy's promises on generated profiles and traces "
                      "([tune|heldout] [CASES] [POLICY])",
                      Run);

}  // namespace
}  // namespace superserve::bench::policy_properties_bench
