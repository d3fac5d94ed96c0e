// A batch a policy took, as sent and as kept in flight: the profile's subnet
// and control tuple (or exit threshold), the still-pending queries with their
// inputs (shared), marked on a worker, and the batch's wait-until deadline.
#include "serving/batch_builder.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/policies/policy_test_util.h"
#include "tests/test_util/serving_fakes.h"

namespace superserve {
namespace {

// Queries 1, 2, ... pending, due at `deadlines`, each with its own input.
void AddPending(PendingQueries* pending, const std::vector<Nanos>& deadlines) {
  for (Nanos deadline : deadlines) {
    PendingQuery& p = pending->Add();
    p.query.deadline = deadline;
    p.input = std::make_shared<QueryPayload>();
  }
}

TakenBatch Taken(const std::vector<Query>& queries) {
  TakenBatch t;
  t.worker = 2;
  t.subnet_index = 1;
  t.batch_size = 4;
  t.earliest = Millis(11);
  t.latest = Millis(14);
  t.queries = queries;
  return t;
}

TEST(BatchBuilderTest, ASubnetBatchCarriesItsSubnetAndThePendingQueries) {
  // Subnet 1 of TwoSubnetProfile: id 11, control tuple {subnet 11, depths {1}}.
  ServedModel m(5, 1, testing::TwoSubnetProfile(), std::make_unique<testing::IdlePolicy>());
  PendingQueries pending;
  AddPending(&pending, {Millis(20), Millis(35), Millis(30)});
  const std::shared_ptr<QueryPayload> input1 = pending.find(1)->second.input;
  pending.erase(pending.find(2));  // answered meanwhile (cancelled, say)
  const Nanos now = Millis(10);
  const BuiltBatch b =
      BuildBatch(m, Taken({{3, 0, 0, Millis(30)}, {2, 0, 0, Millis(35)}, {1, 0, 0, Millis(20)}}),
                 42, now, Seconds(1), &pending);

  EXPECT_EQ(b.plan.batch_id, 42u);
  EXPECT_EQ(b.plan.worker, 2);
  EXPECT_EQ(b.plan.model, "m");
  EXPECT_EQ(b.plan.subnet_index, 1);
  EXPECT_EQ(b.plan.subnet_id, 11);
  EXPECT_EQ(b.plan.control.subnet_id, 11);
  EXPECT_EQ(b.plan.control.depths, (std::vector<int32_t>{1}));
  EXPECT_EQ(b.plan.exit_threshold_index, -1);
  EXPECT_DOUBLE_EQ(b.plan.exit_threshold, 0);
  EXPECT_EQ(b.plan.batch_size, 4);
  EXPECT_EQ(b.plan.sent_at, Millis(10));
  EXPECT_EQ(b.plan.earliest, Millis(11));
  EXPECT_EQ(b.plan.latest, Millis(14));
  EXPECT_EQ(b.plan.queries, (std::vector<QueryId>{3, 1})) << "taken order, 2 left out";
  ASSERT_EQ(b.plan.inputs.size(), 2u);
  EXPECT_EQ(b.plan.inputs[1], input1) << "shared, not copied";
  for (QueryId id : {1, 3}) {
    EXPECT_TRUE(pending.find(id)->second.on_worker);
    EXPECT_EQ(pending.find(id)->second.dispatched_at, Millis(10));
  }

  EXPECT_EQ(b.inflight.id, 42u);
  EXPECT_EQ(b.inflight.model, 5u);
  EXPECT_EQ(b.inflight.subnet_index, 1);
  EXPECT_EQ(b.inflight.batch_size, 4);
  EXPECT_EQ(b.inflight.sent_at, Millis(10));
  EXPECT_EQ(b.inflight.queries, (std::vector<QueryId>{3, 1}));
  // The latest deadline of the queries sent (30 ms; 2's 35 ms left out)
  // plus the 1 s grace.
  EXPECT_EQ(b.inflight.deadline, Millis(1030));
}

TEST(BatchBuilderTest, AnEarlyExitBatchCarriesItsThreshold) {
  ModelProfile p = testing::DynamicProfile(100, 1.0, {1, 2}, {{"a", 200, 300}});
  p.dynamic.thresholds.resize(2);
  p.dynamic.thresholds[0].threshold = 0.5;
  p.dynamic.thresholds[1].threshold = 0.75;
  ServedModel m(1, 1, p, std::make_unique<testing::IdlePolicy>());
  PendingQueries pending;
  AddPending(&pending, {Millis(2)});
  TakenBatch t = Taken({{1, 0, 0, Millis(2)}});
  t.subnet_index = -1;
  t.exit_threshold_index = 1;
  const BuiltBatch b = BuildBatch(m, t, 1, Millis(5), Millis(100), &pending);
  EXPECT_EQ(b.plan.subnet_id, -1) << "no subnet to pick";
  EXPECT_EQ(b.plan.exit_threshold_index, 1);
  EXPECT_DOUBLE_EQ(b.plan.exit_threshold, 0.75);
  EXPECT_FLOAT_EQ(b.plan.control.exit_threshold, 0.75f);
  EXPECT_EQ(b.inflight.exit_threshold_index, 1);
  // Its one query was due at 2 ms, before now (5 ms): waited for from now.
  EXPECT_EQ(b.inflight.deadline, Millis(105));
}

TEST(BatchBuilderTest, NothingPendingNothingToSend) {
  ServedModel m(1, 1, testing::TwoSubnetProfile(), std::make_unique<testing::IdlePolicy>());
  PendingQueries pending;
  const BuiltBatch b =
      BuildBatch(m, Taken({{7, 0, 0, Millis(30)}}), 3, Millis(10), Seconds(1), &pending);
  EXPECT_TRUE(b.plan.queries.empty());
  EXPECT_TRUE(b.inflight.queries.empty());
}

}  // namespace
}  // namespace superserve
