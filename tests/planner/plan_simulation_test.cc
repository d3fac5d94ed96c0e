// A planned deployment meets its objective in the simulator: the planner's
// worker count for a single-subnet model, a Poisson trace at the planned rate,
// the router's serving core with adaptive batching on that subnet (fixed-subnet).
#include <cstdio>

#include "bench/sim/simulator.h"
#include "bench/sim/trace_generators.h"
#include "gtest/gtest.h"
#include "planner/workers_needed.h"
#include "policies/policy_factory.h"

namespace superserve {
namespace {

// One subnet, batches 1..32: 3.0 ms at batch 1 up to 12 ms at batch 32
// (the emulated router test model's most accurate subnet).
ModelProfile OneSubnet() {
  ModelProfile p;
  p.model = "one";
  p.batch_sizes = {1, 2, 4, 8, 16, 32};
  SubnetProfile s;
  s.id = 3;
  s.accuracy = 90;
  for (double ms : {3.0, 3.3, 3.9, 5.1, 7.5, 12.0}) s.latency.push_back(Millis(ms));
  p.subnets.push_back(s);
  return p;
}

double Attainment(const ModelProfile& p, double rate, Nanos slo, int32_t workers) {
  PolicyConfig config;
  auto policy = MakePolicy("fixed-subnet", p, config);
  EXPECT_TRUE(policy.ok()) << policy.status();
  SimulatorOptions o;
  o.workers = workers;
  o.slo = slo;
  o.dispatch_overhead = Micros(500);
  auto arrivals = PoissonArrivals(rate, Seconds(5), 7);
  auto r = Simulate(p, arrivals, policy->get(), o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->slo_attainment() : 0;
}

TEST(PlanSimulationTest, PlannedWorkersMeetTheObjective) {
  const ModelProfile p = OneSubnet();
  const Nanos slo = Millis(50);
  for (double rate : {1000.0, 3000.0, 7500.0}) {
    auto workers = WorkersNeeded(p, rate, slo, -1, Micros(500));
    ASSERT_TRUE(workers.ok()) << workers.status();
    const double planned = Attainment(p, rate, slo, *workers);
    const double fewer = *workers > 1 ? Attainment(p, rate, slo, *workers - 1) : 0;
    std::printf(
        "rate %.0f req/s, objective 50 ms: %d workers planned, attainment %.4f (with "
        "one fewer: %.4f)\n",
        rate, *workers, planned, fewer);
    EXPECT_GE(planned, 0.99) << "rate " << rate;
  }
  // Near a whole number of fully loaded machines the plan is tight: one worker
  // fewer cannot carry the load (3 x 32 / 12.5 ms = 7,680 req/s).
  auto tight = WorkersNeeded(p, 7500, slo, -1, Micros(500));
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(*tight, 3);
  EXPECT_LT(Attainment(p, 7500, slo, *tight - 1), 0.9);
}

}  // namespace
}  // namespace superserve
