// The pieces of the fault soak and benchmark that need no processes: the
// fault plan, the client's ledger, the router totals' parsers.
#include <gtest/gtest.h>

#include <set>

#include "bench/harness/answer_ledger.h"
#include "bench/harness/fault_injector.h"
#include "bench/harness/local_cluster.h"

namespace superserve {
namespace {

TEST(RandomFaultPlan, SeededSpacedInRangeAndEveryKindBeforeRepeats) {
  const std::vector<FaultKind> kinds = {FaultKind::kKillWorker, FaultKind::kHangWorker,
                                        FaultKind::kRestartRouterKill};
  auto plan = RandomFaultPlan(3, Seconds(1), Seconds(20), 6, kinds, Seconds(2));
  ASSERT_EQ(plan.size(), 6u);
  std::set<FaultKind> first3;
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_GE(plan[i].at, Seconds(1));
    EXPECT_LT(plan[i].at, Seconds(20) + Seconds(2));
    if (i > 0) EXPECT_GE(plan[i].at - plan[i - 1].at, Seconds(2));
    if (i < 3) first3.insert(plan[i].kind);
    if (plan[i].kind == FaultKind::kHangWorker) {
      EXPECT_GE(plan[i].hang, Millis(300));
      EXPECT_LE(plan[i].hang, Millis(1500));
    }
    EXPECT_EQ(plan[i].replace, plan[i].kind == FaultKind::kKillWorker);
  }
  EXPECT_EQ(first3.size(), 3u);
  auto again = RandomFaultPlan(3, Seconds(1), Seconds(20), 6, kinds, Seconds(2));
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(again[i].at, plan[i].at);
    EXPECT_EQ(again[i].kind, plan[i].kind);
  }
  // A span too short for the gap holds fewer faults.
  EXPECT_EQ(RandomFaultPlan(3, 0, Seconds(5), 10, kinds, Seconds(2)).size(), 2u);
}

TEST(AnswerLedger, CountsLostAndDuplicatedAnswers) {
  AnswerLedger ledger;
  const uint64_t a = ledger.Send(0, Millis(100), Transport::kUnary);
  const uint64_t b = ledger.Send(Millis(1), Millis(100), Transport::kStream);
  ledger.Send(Millis(2), Millis(100), Transport::kUnary);  // never answered
  InferenceClient::Result ok;
  ok.latency = Millis(10);
  ok.response.mutable_served_by()->set_accuracy(85);
  ledger.Answer(a, ok);
  InferenceClient::Result late = ok;
  late.latency = Millis(150);
  ledger.Answer(b, late);
  ledger.Answer(b, ok);  // a second answer
  EXPECT_FALSE(ledger.WaitAllAnswered(Millis(1)));
  const AnswerLedger::Counts c = ledger.Count();
  EXPECT_EQ(c.sent, 3);
  EXPECT_EQ(c.terminal, 2);
  EXPECT_EQ(c.lost, 1);
  EXPECT_EQ(c.duplicated, 1);
  EXPECT_EQ(c.in_slo, 1);  // b's first answer was late
  EXPECT_DOUBLE_EQ(ledger.Entries()[a].accuracy, 85);
}

TEST(RouterTotals, ParsedFromMetricsAndExitLog) {
  const std::string text =
      "# TYPE superserve_queries_accepted_total counter\n"
      "superserve_queries_accepted_total 120\n"
      "superserve_queries_answered_total{x=\"y\"} 7\n"
      "superserve_queries_answered_total 118\n";
  EXPECT_EQ(*MetricValue(text, "superserve_queries_accepted_total"), 120);
  EXPECT_EQ(*MetricValue(text, "superserve_queries_answered_total"), 118);
  EXPECT_FALSE(MetricValue(text, "superserve_queries_pending").ok());
  auto t = RouterExitTotals("x\nI 12:00 router: accepted 42, answered 41, requeued 3, batches 9\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->accepted, 42);
  EXPECT_EQ(t->answered, 41);
  EXPECT_EQ(t->pending, 1);
  EXPECT_FALSE(RouterExitTotals("router: signal 15, draining").ok());
}

}  // namespace
}  // namespace superserve
