// The router's side of the exactly-once count on /metrics: accepted,
// answered and pending come from one serving-core snapshot per scrape, and
// stop when the core goes away (docs/faults.md).
#include <string>

#include "gtest/gtest.h"
#include "router/client/local_cluster.h"
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

}  // namespace
}  // namespace superserve
