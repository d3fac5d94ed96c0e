// Property test of the default policy (issue 20, items 1 and 2): on generated
// profiles and traces, in the simulator (simulated clock, fixed seeds),
//   - attainment >= 0.999 wherever some fixed subnet (Clipper+) reaches 0.999,
//     otherwise >= the best baseline's attainment - 0.002;
//   - mean accuracy >= the Clipper+ envelope - 0.3 points, the envelope being
//     the accuracy of the most accurate fixed subnet that reaches 0.999;
// for every SlackFit bucket count K in {4, 6, 8, 12, 16, 32} (the default
// policy must not depend on it). Prints every case and the worst margin per K.
//
// The policy under test is PolicySpec().name (the default everywhere), or
// the environment variable POLICY_UNDER_TEST (the mutation check:
// POLICY_UNDER_TEST=slackfit must fail).
//
// Envelope: with up to 12 subnets every subnet runs as Clipper+; with more
// (100 and 1,000) a sample of 16 subnets evenly spaced in accuracy rank,
// then every subnet between the most accurate sampled one that holds 0.999
// and the next sampled one above it when there are at most 6, else a
// bisection over that interval (it assumes attainment falls with accuracy
// there). The envelope is then that of the subnets run, a lower bound of
// the true one when profiles are not monotone.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/baselines/timeout_batching_policy.h"
#include "bench/sim/profile_generators.h"
#include "bench/sim/simulator.h"
#include "bench/sim/symphony_cases.h"
#include "bench/sim/trace_generators.h"
#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "policies/symphony_policy.h"
#include "tests/baselines_registered.h"

namespace superserve {
namespace {

constexpr double kHold = 0.999;
constexpr double kMarginFloor = -0.3;
constexpr double kAttainmentSlack = 0.002;
const int kBucketCounts[] = {4, 6, 8, 12, 16, 32};

// Per-worker throughput of the best tuple whose latency fits `budget`.
double BestThroughput(const ModelProfile& p, Nanos budget) {
  double best = 0;
  for (const auto& s : p.subnets) {
    for (size_t bi = 0; bi < p.batch_sizes.size(); ++bi) {
      if (s.latency[bi] <= budget) {
        best = std::max(best, p.batch_sizes[bi] * 1e9 / static_cast<double>(s.latency[bi]));
      }
    }
  }
  return best;
}

enum class TraceKind { kPoisson, kBursty, kTimeVarying, kMaf };

struct Case {
  std::string label;
  const ModelProfile* profile;
  std::vector<Nanos> arrivals;
  SimulatorOptions sim;
};

Case MakeCase(const ModelProfile& p, TraceKind kind, uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 17);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Case c;
  c.profile = &p;
  c.sim.workers = u(rng) < 0.5 ? 4 : 8;
  c.sim.seed = seed;
  c.sim.noise_cv = 0.03;
  c.sim.dispatch_overhead = Micros(500);
  // SLO: 1.5x to 4x the fastest subnet's largest-batch latency.
  Nanos fastest_max = p.subnets[0].latency.back();
  for (const auto& s : p.subnets) fastest_max = std::min(fastest_max, s.latency.back());
  const double slo_factor = 1.5 + 2.5 * u(rng);
  c.sim.slo = static_cast<Nanos>(slo_factor * static_cast<double>(fastest_max));
  // Load relative to the capacity of the best tuple within half the SLO.
  const double capacity = c.sim.workers * BestThroughput(p, c.sim.slo / 2);
  const double load = 0.3 + 0.55 * u(rng);
  const double rate = load * capacity;
  const Nanos duration = Seconds(2);
  std::string trace;
  switch (kind) {
    case TraceKind::kPoisson:
      c.arrivals = PoissonArrivals(rate, duration, seed);
      trace = absl::StrFormat("poisson %.0f", rate);
      break;
    case TraceKind::kBursty: {
      const double cv2 = 2.0 + 6.0 * u(rng);
      c.arrivals = BurstyArrivals(rate / 3, 2 * rate / 3, cv2, duration, seed);
      trace = absl::StrFormat("bursty %.0f cv2=%.1f", rate, cv2);
      break;
    }
    case TraceKind::kTimeVarying: {
      const double low = rate * (0.4 + 0.3 * u(rng));
      const double high = std::min(rate * 1.4, 0.95 * capacity);
      const double ramp_s = 0.05 + 0.9 * u(rng);  // several accelerations
      const double accel = (high - low) / ramp_s;
      c.arrivals = TimeVaryingArrivals(low, high, accel, 2.0, Millis(500), duration, seed);
      trace = absl::StrFormat("timevarying %.0f->%.0f accel=%.0f/s2", low, high, accel);
      break;
    }
    case TraceKind::kMaf: {
      MafOptions m;
      m.mean_rate = rate;
      m.duration = duration;
      m.seed = seed;
      c.arrivals = *MafArrivals(m);
      trace = absl::StrFormat("maf %.0f", rate);
      break;
    }
  }
  c.label = absl::StrFormat("%s %s slo=%.1fms(x%.1f) w=%d", p.model, trace,
                            ToMillis(c.sim.slo), slo_factor, c.sim.workers);
  return c;
}

struct Outcome {
  double attainment = 0;
  double accuracy = 0;
};

Outcome RunPolicy(const Case& c, const std::string& policy, const PolicyConfig& config) {
  auto made = MakePolicy(policy, *c.profile, config);
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return {};
  auto r = Simulate(*c.profile, c.arrivals, made->get(), c.sim);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return {r->slo_attainment(), r->mean_accuracy()};
}

Outcome RunFixed(const Case& c, int subnet_index) {
  PolicyConfig config;
  config.fixed_subnet_id = c.profile->subnets[subnet_index].id;
  return RunPolicy(c, "clipper+", config);
}

struct Envelope {
  double envelope = -1;         // accuracy of the most accurate holding subnet; -1: none
  double best_attainment = 0;   // over every baseline run
  int fixed_runs = 0;
};

Envelope ComputeEnvelope(const Case& c) {
  const ModelProfile& p = *c.profile;
  const int s = static_cast<int>(p.subnets.size());
  Envelope e;
  std::map<int, Outcome> runs;  // subnet index (= accuracy rank here) -> outcome
  auto run = [&](int i) {
    if (!runs.count(i)) runs[i] = RunFixed(c, i);
    return runs[i];
  };
  std::vector<int> sample;
  if (s <= 12) {
    for (int i = 0; i < s; ++i) sample.push_back(i);
  } else {
    constexpr int kSample = 16;
    for (int k = 0; k < kSample; ++k) sample.push_back(k * (s - 1) / (kSample - 1));
  }
  int best_holding = -1;
  for (int i : sample) {
    if (run(i).attainment >= kHold) best_holding = i;
  }
  if (s > 12 && best_holding >= 0 && best_holding < s - 1) {
    const int next = *std::upper_bound(sample.begin(), sample.end(), best_holding);
    if (next - best_holding <= 7) {
      for (int i = best_holding + 1; i < next; ++i) {
        if (run(i).attainment >= kHold) best_holding = i;
      }
    } else {
      int lo = best_holding, hi = next;  // lo holds, hi does not
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        (run(mid).attainment >= kHold ? lo : hi) = mid;
      }
      best_holding = lo;
    }
  }
  for (const auto& [i, o] : runs) {
    e.best_attainment = std::max(e.best_attainment, o.attainment);
    if (o.attainment >= kHold) e.envelope = std::max(e.envelope, p.subnets[i].accuracy);
  }
  for (const char* baseline : {"maxbatch", "maxacc"}) {
    e.best_attainment = std::max(e.best_attainment, RunPolicy(c, baseline, PolicyConfig()).attainment);
  }
  e.fixed_runs = static_cast<int>(runs.size());
  return e;
}

std::string PolicyUnderTest() {
  const char* env = std::getenv("POLICY_UNDER_TEST");
  return env != nullptr && *env != '\0' ? env : PolicySpec().name;
}

// One row per (case, K).
struct Row {
  std::string label;
  int k = 0;
  Envelope envelope;
  Outcome outcome;
  double margin() const {
    return envelope.envelope >= 0 ? outcome.accuracy - envelope.envelope : 0.0;
  }
};

// Runs every case of one profile shape once per process (the tests below read
// it) and prints every row and the worst margin per K. One shape per test
// instance, so that ctest runs the shapes side by side. The seeds are those of
// one loop over all shapes (profiles 1-12, then cases 13-60 in profile order).
const std::vector<Row>& Rows(ProfileShape shape) {
  static std::map<ProfileShape, std::vector<Row>>* cache = new std::map<ProfileShape, std::vector<Row>>();
  if (auto it = cache->find(shape); it != cache->end()) return it->second;
  std::vector<Row>& out = (*cache)[shape];
  const std::string policy = PolicyUnderTest();
  constexpr int kSubnetCounts[] = {6, 10, 100, 1000};
  constexpr TraceKind kKinds[] = {TraceKind::kPoisson, TraceKind::kBursty, TraceKind::kTimeVarying,
                                  TraceKind::kMaf};
  constexpr int kProfilesPerShape = 4, kShapes = 3, kKindsPerProfile = 4;
  const int shape_index = static_cast<int>(shape);
  for (int si = 0; si < kProfilesPerShape; ++si) {
    const int profile_index = shape_index * kProfilesPerShape + si;
    const ModelProfile p = ShapedProfile(shape, kSubnetCounts[si], 1 + profile_index);
    for (int ki = 0; ki < kKindsPerProfile; ++ki) {
      const uint64_t seed =
          1 + kShapes * kProfilesPerShape + profile_index * kKindsPerProfile + ki;
      const Case c = MakeCase(p, kKinds[ki], seed);
      const Envelope e = ComputeEnvelope(c);
      for (int k : kBucketCounts) {
        PolicyConfig config;
        config.baselines.slackfit_buckets = k;
        Row row{c.label, k, e, RunPolicy(c, policy, config)};
        std::printf("K=%-2d %-60s envelope %6.2f (best baseline att %.4f, %d fixed runs) | "
                    "%s att %.4f acc %6.2f margin %+.2f\n",
                    k, c.label.c_str(), e.envelope, e.best_attainment, e.fixed_runs,
                    policy.c_str(), row.outcome.attainment, row.outcome.accuracy, row.margin());
        out.push_back(row);
      }
    }
  }
  std::map<int, const Row*> worst;
  int below = 0, with_envelope = 0;

  for (const Row& r : out) {
    if (r.envelope.envelope < 0) continue;
    ++with_envelope;
    if (r.margin() < kMarginFloor) ++below;
    if (!worst.count(r.k) || r.margin() < worst[r.k]->margin()) worst[r.k] = &r;
  }
  std::printf("%s, %s profiles: %zu rows (case x K), %d with a fixed subnet at >= %.3f, %d of "
              "them below the envelope - %.1f; %zu where none holds\n",
              policy.c_str(), ProfileShapeName(shape), out.size(), with_envelope, kHold, below,
              -kMarginFloor, out.size() - with_envelope);
  for (const auto& [k, r] : worst) {
    std::printf("worst margin to the envelope, K=%d: %+.3f points (%s)\n", k, r->margin(),
                r->label.c_str());
  }
  return out;
}

class DefaultPolicyPropertyTest : public ::testing::TestWithParam<ProfileShape> {};

TEST_P(DefaultPolicyPropertyTest, AttainmentHoldsWhereAFixedSubnetHolds) {
  const std::vector<Row>& rows = Rows(GetParam());
  int with_envelope = 0;
  for (const Row& r : rows) {
    if (r.envelope.envelope < 0) continue;
    ++with_envelope;
    EXPECT_GE(r.outcome.attainment, kHold) << "K=" << r.k << " " << r.label;
  }
  EXPECT_GT(with_envelope, static_cast<int>(rows.size()) / 2);  // the accuracy rule is exercised
}

// Where no fixed subnet reaches kHold (overload), at least the best
// baseline's attainment less kAttainmentSlack.
TEST_P(DefaultPolicyPropertyTest, AttainmentNearTheBestBaselineWhereNoFixedSubnetHolds) {
  int without_envelope = 0;
  for (const Row& r : Rows(GetParam())) {
    if (r.envelope.envelope >= 0) continue;
    ++without_envelope;
    EXPECT_GE(r.outcome.attainment, r.envelope.best_attainment - kAttainmentSlack)
        << "K=" << r.k << " " << r.label;
  }
  // The generated GPU- and CPU-shaped cases include overload (6 and 12 rows
  // with these seeds); the linear ones happen not to.
  if (GetParam() != ProfileShape::kLinear) {
    EXPECT_GT(without_envelope, 0);
  }
}

TEST_P(DefaultPolicyPropertyTest, AccuracyWithinThreeTenthsOfTheClipperEnvelope) {
  for (const Row& r : Rows(GetParam())) {
    if (r.envelope.envelope < 0) continue;
    EXPECT_GE(r.margin(), kMarginFloor)
        << "K=" << r.k << " " << r.label << ": " << r.outcome.accuracy << " vs envelope "
        << r.envelope.envelope;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DefaultPolicyPropertyTest,
                         ::testing::Values(ProfileShape::kLinear, ProfileShape::kGpu, ProfileShape::kCpu),
                         [](const ::testing::TestParamInfo<ProfileShape>& info) {
                           return std::string(ProfileShapeName(info.param));
                         });

// Moved from symphony_cases_test.cc so that it runs in Release only, as the
// rest of this file (under ASan its simulations took ~45 s).
// Issue 19, item 6, on SingleSubnetCases() (3-s traces; the 10-s tables are
// superserve-symphony-repro --only single, docs/symphony.md): below the
// peak (0.3 / 0.5 / 0.7 x eager's goodput, Poisson and gamma CV² 4 and 8)
// the default holds 0.999 wherever eager Clipper+ on the same subnet does,
// and on the linear profiles with every batch size its goodput is within
// 5 % of Symphony's. (Padded profiles fall short: 0.86x and 0.75x on two,
// docs/symphony.md says why.)
TEST(DefaultPolicyOneSubnetTest, HoldsWhereEagerHoldsAndNearsSymphony) {
  Workload base;
  base.duration = Seconds(3);
  auto by_name = [](const std::string& name) -> PolicyBuilder {
    return [name](const ModelProfile& p) -> std::unique_ptr<Policy> {
      if (name == "eager") {  // Algorithm 1 with exec = now, as in the repro
        SymphonyOptions o;
        o.window_drop = false;
        return std::make_unique<TimeoutBatchingPolicy>(p, /*timeout=*/0, o);
      }
      return *MakePolicy(name, p, PolicyConfig());
    };
  };
  const std::string def = PolicySpec().name;
  int held = 0;
  for (const SingleSubnetCase& c : SingleSubnetCases(base)) {
    const Workload& w = c.workload;
    const double hint = w.sim.workers * 16 * 1e9 /
                        static_cast<double>(w.profile.subnets[0].latency[w.profile.BatchIndex(16)]);
    auto eager = Goodput(w, by_name("eager"), hint);
    ASSERT_TRUE(eager.ok()) << eager.status();
    for (double cv2 : {1.0, 4.0, 8.0}) {
      for (double load : {0.3, 0.5, 0.7}) {
        Workload b = w;
        b.cv2 = cv2;
        auto clipper = RunWorkload(b, load * *eager, by_name("clipper+"));
        ASSERT_TRUE(clipper.ok()) << clipper.status();
        if (clipper->slo_attainment() < 0.999) continue;
        ++held;
        auto mine = RunWorkload(b, load * *eager, by_name(def));
        ASSERT_TRUE(mine.ok()) << mine.status();
        EXPECT_GE(mine->slo_attainment(), 0.999)
            << c.label << ", " << w.sim.workers << " workers, CV² " << cv2 << ", " << load
            << " x eager's goodput";
      }
    }
    if (c.padded) continue;
    auto mine = Goodput(w, by_name(def), hint);
    auto symphony = Goodput(w, by_name("symphony"), hint);
    ASSERT_TRUE(mine.ok() && symphony.ok());
    EXPECT_GE(*mine, 0.95 * *symphony) << c.label << ", " << w.sim.workers << " workers";
  }
  EXPECT_GT(held, 50) << "cells where eager holds: the check must have something to check";
}

}  // namespace
}  // namespace superserve
