// The router's side of the exactly-once count on /metrics: accepted,
// answered and pending come from one serving-core snapshot per scrape, and
// stop when the core goes away (docs/faults.md). And the attainment gauge
// exists only once a model has answers.
#include <string>

#include "bench/harness/local_cluster.h"
#include "gtest/gtest.h"
#include "router/router_metrics.h"
#include "serving/serving_core.h"

namespace superserve {
namespace {

TEST(ServingTotalsMetric, EachScrapeReadsOneSnapshot) {
  RouterMetrics metrics;
  EXPECT_FALSE(MetricValue(metrics.Scrape(), "superserve_queries_accepted_total").ok());
  int scrapes = 0;
  metrics.ExportServingTotals([&] {
    ++scrapes;
    ServingStats s;
    s.accepted = 10 * scrapes;
    s.answered = 10 * scrapes - 3;
    s.pending = 3;
    return s;
  });
  for (int i = 1; i <= 2; ++i) {
    const std::string text = metrics.Scrape();
    EXPECT_EQ(*MetricValue(text, "superserve_queries_accepted_total"), 10 * i);
    EXPECT_EQ(*MetricValue(text, "superserve_queries_answered_total"), 10 * i - 3);
    EXPECT_EQ(*MetricValue(text, "superserve_queries_pending"), 3);
  }
  EXPECT_EQ(scrapes, 2) << "one snapshot per scrape";
  metrics.ExportServingTotals(nullptr);
  EXPECT_FALSE(MetricValue(metrics.Scrape(), "superserve_queries_pending").ok());
}

// A model with no answers yet has no attainment series (it read 0, "every
// query missed", while the model was idle); its first answer creates it.
TEST(SloAttainmentMetric, AbsentUntilTheModelsFirstAnswer) {
  RouterMetrics metrics;
  metrics.SetQueueDepth("idle", 0);  // every serving tick reports each model's queue
  metrics.OnBatch("idle", 1);
  const std::string before = metrics.Scrape();
  EXPECT_NE(before.find("superserve_queue_depth{model=\"idle\"} 0"), std::string::npos) << before;
  EXPECT_FALSE(MetricValue(before, "superserve_slo_attainment{model=\"idle\"}").ok()) << before;
  metrics.OnQueryDone("idle", QueryOutcome::kLate, Millis(5), 0, -1);
  EXPECT_EQ(*MetricValue(metrics.Scrape(), "superserve_slo_attainment{model=\"idle\"}"), 0);
  metrics.OnQueryDone("idle", QueryOutcome::kOk, Millis(5), 90, 3);
  EXPECT_EQ(*MetricValue(metrics.Scrape(), "superserve_slo_attainment{model=\"idle\"}"), 0.5);
}

}  // namespace
}  // namespace superserve
