// The autoscaling gauge superserve_workers_needed follows the measured rate:
// within one worker of the planner's offline answer at steady rate, up after
// a rate increase, down to zero when the traffic stops.
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

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

// An unregistered model's series stayed in every scrape until the router
// restarted: its queue depth and workers-needed advice frozen at their last
// values (an autoscaler kept acting on them), its counters growing nothing.
TEST(RouterMetricsRemoval, AnUnregisteredModelsSeriesLeaveTheScrapeAndOthersStay) {
  SimulatedClock clock(Seconds(1));
  RouterMetrics metrics;
  metrics.EnableWorkersNeeded(RouterMetrics::WorkersNeededOptions{}, &clock);
  ModelProfile gone = OneSubnet();
  gone.model = "gone";
  metrics.SetModelProfile(gone);
  metrics.SetModelProfile(OneSubnet());  // "one" stays
  auto application = std::make_shared<const std::string>("easy");
  const std::vector<std::string> models = {"gone", "one"};
  for (const std::string& name : models) {
    const std::string* model = &name;
    QueryDone d;
    d.model = model;
    d.id = 1;
    d.now = clock.Now();
    d.latency = Millis(5);
    d.accuracy = 90;
    d.subnet_id = 3;
    d.application = application;
    metrics.OnQueryDone(d);
    metrics.OnBatch(*model, 1);
    metrics.SetQueueDepth(*model, 7);
    metrics.OnBatchRefused(*model, "w");
  }
  const std::string before = metrics.Scrape();
  for (const char* series :
       {"superserve_queries_total{", "superserve_slo_attainment{",
        "superserve_query_latency_seconds_count{", "superserve_served_accuracy_percent_count{",
        "superserve_subnet_queries_total{",
        "superserve_batch_size_count{", "superserve_queue_depth{",
        "superserve_batches_refused_total{", "superserve_workers_needed{",
        "superserve_application_queries_total{application=\"easy\",",
        "superserve_application_slo_attainment{application=\"easy\","}) {
    EXPECT_NE(before.find(std::string(series) + "model=\"gone\""), std::string::npos)
        << series << " before:\n" << before;
  }
  metrics.RemoveModel("gone");
  const std::string after = metrics.Scrape();
  EXPECT_EQ(after.find("model=\"gone\""), std::string::npos) << after;
  EXPECT_NE(after.find("superserve_queue_depth{model=\"one\"} 7"), std::string::npos) << after;
  EXPECT_NE(after.find("superserve_application_queries_total{application=\"easy\",model=\"one\""),
            std::string::npos)
      << after;
  // Served again under the same name: counted from zero (Prometheus reads a
  // counter reset).
  metrics.OnBatch("gone", 4);
  EXPECT_NE(metrics.Scrape().find("superserve_batch_size_count{model=\"gone\"} 1"),
            std::string::npos);
  metrics.RemoveModel("never-served");  // nothing to remove: no effect
}

}  // namespace
}  // namespace superserve
