// The autoscaling gauge superserve_workers_needed follows the measured rate:
// within one worker of the planner's offline answer at steady rate, up after
// a rate increase, down to zero when the traffic stops.
#include <cstdio>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "planner/workers_needed.h"
#include "router/router_metrics.h"

namespace superserve {
namespace {

// One subnet, batches 1..32: 3.0 ms at batch 1 up to 12 ms at batch 32.
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

class WorkersNeededMetricTest : public ::testing::Test {
 protected:
  // Poisson answers at `rate` for `duration`, with a serving tick every 10 ms.
  void Drive(double rate, Nanos duration) {
    const Nanos end = clock_.Now() + duration;
    std::exponential_distribution<double> gap(rate > 0 ? rate : 1);
    Nanos next_answer = rate > 0 ? clock_.Now() + Seconds(gap(rng_)) : end + 1;
    Nanos next_tick = clock_.Now() + Millis(10);
    while (true) {
      const Nanos t = std::min(next_answer, next_tick);
      if (t > end) break;
      ASSERT_TRUE(clock_.AdvanceTo(t).ok());
      if (t == next_answer) {
        QueryDone d;
        d.model = &model_;
        d.id = ++id_;
        d.now = t;
        d.latency = Millis(20);
        metrics_.OnQueryDone(d);
        next_answer = t + Seconds(gap(rng_));
      } else {
        metrics_.OnQueueDepth(model_, 0);
        next_tick = t + Millis(10);
      }
    }
    ASSERT_TRUE(clock_.AdvanceTo(end).ok());
  }

  std::string model_ = "one";
  SimulatedClock clock_{Seconds(1)};
  RouterMetrics metrics_;
  std::mt19937_64 rng_{5};
  QueryId id_ = 0;
};

TEST_F(WorkersNeededMetricTest, GaugeFollowsARateChange) {
  const ModelProfile profile = OneSubnet();
  RouterMetrics::WorkersNeededOptions o;
  o.objective = Millis(50);
  o.window = Seconds(2);
  o.batch_overhead = Micros(500);
  metrics_.EnableWorkersNeeded(o, &clock_);
  metrics_.SetModelProfile(profile);

  auto offline = [&](double rate) {
    auto n = WorkersNeeded(profile, rate, o.objective, -1, o.batch_overhead);
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -100;
  };

  Drive(1000, Seconds(4));
  const int32_t low = metrics_.RefreshWorkersNeeded(model_);
  EXPECT_NEAR(low, offline(1000), 1) << "at 1,000 req/s";

  Drive(7500, Seconds(4));
  const int32_t high = metrics_.RefreshWorkersNeeded(model_);
  EXPECT_NEAR(high, offline(7500), 1) << "at 7,500 req/s";
  EXPECT_GT(high, low);
  std::printf("workers needed: %d at 1,000 req/s (offline %d), %d at 7,500 req/s (offline %d)\n",
              low, offline(1000), high, offline(7500));
  const std::string scrape = metrics_.Scrape();
  EXPECT_NE(scrape.find("superserve_workers_needed{model=\"one\"} " + std::to_string(high)),
            std::string::npos)
      << scrape;

  // No traffic: the serving ticks alone bring the advice down to zero.
  Drive(0, Seconds(4));
  EXPECT_NE(metrics_.Scrape().find("superserve_workers_needed{model=\"one\"} 0"),
            std::string::npos);
}

TEST_F(WorkersNeededMetricTest, OffWithoutAClockOrAProfile) {
  EXPECT_EQ(metrics_.RefreshWorkersNeeded(model_), -1);
  RouterMetrics::WorkersNeededOptions o;
  metrics_.EnableWorkersNeeded(o, &clock_);
  EXPECT_EQ(metrics_.RefreshWorkersNeeded("no-profile"), -1);
  Drive(100, Seconds(1));  // answers for a model without a profile are ignored
  EXPECT_EQ(metrics_.Scrape().find("superserve_workers_needed{"), std::string::npos);
}

}  // namespace
}  // namespace superserve
