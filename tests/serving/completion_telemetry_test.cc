// What a policy learns from a batch that ran: exec scaled to a fleet-speed
// worker, the round trip's overhead beyond exec and the worker's queueing
// (never negative), and each reported query's application.
#include "serving/completion_telemetry.h"

#include <vector>

#include "gtest/gtest.h"

namespace superserve {
namespace {

// Batch of 8 at subnet 2, threshold 1, sent at 10 ms.
InflightBatch SentAt10ms() {
  InflightBatch b;
  b.id = 4;
  b.subnet_index = 2;
  b.exit_threshold_index = 1;
  b.batch_size = 8;
  b.sent_at = Millis(10);
  return b;
}

TEST(CompletionTelemetryTest, ExecAtFleetSpeedAndTheOverheadLeft) {
  BatchOutcome o;
  o.exec = Millis(6);
  o.worker_queue = Millis(1);
  // A worker twice as slow as the fleet: the fleet would have taken 3 ms.
  const CompletionTelemetry t =
      MakeCompletionTelemetry(3, SentAt10ms(), &o, 2.0, Millis(20), PendingQueries());
  EXPECT_EQ(t.worker, 3);
  EXPECT_EQ(t.subnet_index, 2);
  EXPECT_EQ(t.exit_threshold_index, 1);
  EXPECT_EQ(t.batch_size, 8);
  EXPECT_EQ(t.exec, Millis(3));
  // Round trip 20 - 10 = 10 ms, less 6 ms exec (measured, not scaled) and
  // 1 ms queued on the worker.
  EXPECT_EQ(t.overhead, Millis(3));
  EXPECT_EQ(t.now, Millis(20));
  EXPECT_TRUE(t.queries.empty()) << "a static model's worker reports none";

  // A round trip shorter than exec and queueing (15 - 10 < 6 + 1): no
  // overhead, not a negative one.
  const CompletionTelemetry early =
      MakeCompletionTelemetry(3, SentAt10ms(), &o, 1.0, Millis(15), PendingQueries());
  EXPECT_EQ(early.overhead, 0);
  EXPECT_EQ(early.exec, Millis(6)) << "speed 1: as measured";
}

TEST(CompletionTelemetryTest, EachReportedQueryGetsItsApplication) {
  PendingQueries pending;
  pending.Add().query.application = 5;  // id 1
  pending.Add().query.application = 0;  // id 2
  BatchOutcome o;
  o.exec = Millis(2);
  o.query_times = {{2, 9, Micros(700), 1}, {1, 9, Micros(400), 0}, {77, 9, Micros(900), 2}};
  const CompletionTelemetry t =
      MakeCompletionTelemetry(0, SentAt10ms(), &o, 1.0, Millis(13), pending);
  ASSERT_EQ(t.queries.size(), 3u);
  EXPECT_EQ(t.queries[0].id, 2u);
  EXPECT_EQ(t.queries[0].application, 0) << "the core's tag id, not the worker's 9";
  EXPECT_EQ(t.queries[0].exec, Micros(700));
  EXPECT_EQ(t.queries[0].exit, 1);
  EXPECT_EQ(t.queries[1].application, 5);
  EXPECT_EQ(t.queries[2].application, -1) << "77 is not pending";
  EXPECT_EQ(t.queries[2].exit, 2);
}

}  // namespace
}  // namespace superserve
