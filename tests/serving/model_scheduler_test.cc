#include "serving/model_scheduler.h"

#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"

namespace superserve {
namespace {

// Answers with a scripted list of decisions, then idles.
class ScriptedPolicy final : public Policy {
 public:
  explicit ScriptedPolicy(std::vector<Decision> script) : script_(std::move(script)) {}
  std::string_view name() const override { return "scripted"; }
  Decision Decide(const SchedulingContext& ctx) override {
    seen_free.push_back(static_cast<int32_t>(ctx.free_workers.size()));
    if (next_ >= script_.size()) return Decision::Idle();
    return script_[next_++];
  }
  std::vector<int32_t> seen_free;

 private:
  std::vector<Decision> script_;
  size_t next_ = 0;
};

Decision Dispatch(int32_t take, int32_t batch, int32_t subnet, int32_t worker, int32_t drop = 0) {
  Decision d;
  d.kind = Decision::Kind::kDispatch;
  d.take = take;
  d.batch_size = batch;
  d.subnet_index = subnet;
  d.worker = worker;
  d.drop = drop;
  return d;
}

class ModelSchedulerTest : public ::testing::Test {
 protected:
  ModelScheduler& Make(std::vector<Decision> script) {
    auto p = std::make_unique<ScriptedPolicy>(std::move(script));
    policy_ = p.get();
    s_ = std::make_unique<ModelScheduler>(&profile_, std::move(p));
    s_->AddWorker(3);
    s_->AddWorker(1);
    return *s_;
  }
  void Push(QueryId id, Nanos deadline) { s_->Push({id, 0, 0, deadline}, 0); }

  ModelProfile profile_ = testing::ThreeSubnetProfile();  // fastest: 1 ms
  ScriptedPolicy* policy_ = nullptr;
  std::unique_ptr<ModelScheduler> s_;
};

TEST_F(ModelSchedulerTest, AppliesDropThenTakeAndSkipsCancelled) {
  ModelScheduler& s = Make({Dispatch(3, 4, 1, 3, /*drop=*/1), Dispatch(2, 2, 0, 1)});
  EXPECT_EQ(s.workers(), (std::vector<int32_t>{1, 3}));
  for (QueryId id = 1; id <= 6; ++id) Push(id, Millis(10 * id));
  s.MarkCancelled(3);
  EXPECT_EQ(s.queued(), 5u);
  std::vector<FreeSlot> slots = {{1, 1}, {3, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 2);
  EXPECT_EQ(r.dropped, std::vector<QueryId>{1});
  EXPECT_EQ(r.cancelled, std::vector<QueryId>{3});
  ASSERT_EQ(r.batches.size(), 2u);
  EXPECT_EQ(r.batches[0].worker, 3);
  EXPECT_EQ(r.batches[0].subnet_index, 1);
  ASSERT_EQ(r.batches[0].queries.size(), 2u) << "took 3 but one was cancelled";
  EXPECT_EQ(r.batches[0].queries[0].id, 2u);
  EXPECT_EQ(r.batches[0].queries[1].id, 4u);
  EXPECT_EQ(r.batches[1].worker, 1);
  EXPECT_EQ(r.batches[1].queries.size(), 2u);
  EXPECT_TRUE(slots.empty());
  EXPECT_EQ(policy_->seen_free, (std::vector<int32_t>{2, 1}));
  EXPECT_TRUE(s.empty());
}

TEST_F(ModelSchedulerTest, RejectsAnInvalidDispatch) {
  ModelScheduler& s = Make({Dispatch(1, 3, 0, 1)});  // 3 is no profiled batch size
  Push(1, Millis(10));
  std::vector<FreeSlot> slots = {{1, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 1);
  EXPECT_NE(r.invalid.find("invalid dispatch"), std::string::npos) << r.invalid;
  EXPECT_TRUE(r.batches.empty());
  ModelScheduler& t = Make({Dispatch(1, 1, 0, /*worker=*/7)});  // not offered
  Push(1, Millis(10));
  slots = {{1, 1}};
  EXPECT_FALSE(t.Schedule(0, &slots, 1).invalid.empty());
}

TEST_F(ModelSchedulerTest, TakeIdsTakesExactlyThoseQueriesAnywhereInTheQueue) {
  Decision d = Dispatch(0, 4, 2, 1);
  d.take_ids = {5, 2, 99, 6};  // 99 is not queued (stale view): skipped
  ModelScheduler& s = Make({d});
  for (QueryId id = 1; id <= 6; ++id) Push(id, Millis(10 * id));
  s.MarkCancelled(6);
  std::vector<FreeSlot> slots = {{1, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 1);
  ASSERT_TRUE(r.invalid.empty()) << r.invalid;
  ASSERT_EQ(r.batches.size(), 1u);
  ASSERT_EQ(r.batches[0].queries.size(), 2u);
  EXPECT_EQ(r.batches[0].queries[0].id, 5u);
  EXPECT_EQ(r.batches[0].queries[1].id, 2u);
  EXPECT_EQ(r.cancelled, std::vector<QueryId>{6});
  EXPECT_EQ(s.queued(), 3u);
  EXPECT_EQ(s.head_deadline(), Millis(10)) << "the rest keeps its EDF order";
  EXPECT_EQ(s.TakeAll(), (std::vector<QueryId>{1, 3, 4}));
}

TEST_F(ModelSchedulerTest, DynamicModelsDispatchWithoutASubnet) {
  profile_.subnets.clear();
  profile_.is_dynamic = true;
  profile_.dynamic.batch_overhead_us = 500;
  profile_.dynamic.per_request_factor = 0.5;
  profile_.dynamic.applications.push_back({"a", {3000, 4000}, {1}});
  profile_.dynamic.applications.push_back({"b", {1000, 9000}, {1}});
  ModelScheduler& s = Make({Dispatch(1, 1, /*subnet=*/0, 1), Dispatch(1, 1, -1, 1)});
  EXPECT_EQ(s.fastest(), Micros(500 + 0.5 * 1000));
  Push(1, Millis(10));
  std::vector<FreeSlot> slots = {{1, 1}};
  EXPECT_FALSE(s.Schedule(0, &slots, 1).invalid.empty()) << "no subnet 0 to run";
  ScheduleResult r = s.Schedule(0, &slots, 1);
  ASSERT_TRUE(r.invalid.empty()) << r.invalid;
  ASSERT_EQ(r.batches.size(), 1u);
  EXPECT_EQ(r.batches[0].subnet_index, -1);
}

TEST_F(ModelSchedulerTest, WakeAtIsRemembered) {
  ModelScheduler& s = Make({Decision::WakeAt(Millis(3))});
  Push(1, Millis(10));
  std::vector<FreeSlot> slots = {{1, 1}};
  ScheduleResult r = s.Schedule(0, &slots, 1);
  EXPECT_TRUE(r.batches.empty());
  EXPECT_EQ(s.wake_at(), Millis(3));
  s.clear_wake();
  EXPECT_EQ(s.wake_at(), 0);
}

TEST_F(ModelSchedulerTest, RequeueRule) {
  ModelScheduler& s = Make({});
  EXPECT_EQ(s.fastest(), Millis(1));
  EXPECT_EQ(s.TryRequeue({1, 0, 0, Millis(10)}, Millis(9)), ModelScheduler::Requeue::kQueued);
  EXPECT_EQ(s.TryRequeue({2, 0, 0, Millis(10)}, Millis(9) + 1), ModelScheduler::Requeue::kTooLate);
  s.RemoveWorker(1);
  s.RemoveWorker(3);
  EXPECT_EQ(s.TryRequeue({3, 0, 0, Millis(10)}, 0), ModelScheduler::Requeue::kNoWorker);
  EXPECT_EQ(s.queued(), 1u);
}

TEST_F(ModelSchedulerTest, SweepTakesExpiredPrefixAndCancelledAnywhere) {
  ModelScheduler& s = Make({});
  for (QueryId id = 1; id <= 8; ++id) Push(id, Millis(id));
  s.MarkCancelled(2);  // expired too: counted once, as cancelled
  s.MarkCancelled(6);
  s.MarkCancelled(8);
  std::vector<QueryId> expired, cancelled;
  s.Sweep(Millis(3), &expired, &cancelled);
  EXPECT_EQ(expired, (std::vector<QueryId>{1, 3}));
  EXPECT_EQ(cancelled, (std::vector<QueryId>{2, 6, 8}));
  EXPECT_EQ(s.queued(), 3u);
  EXPECT_EQ(s.TakeAll(), (std::vector<QueryId>{4, 5, 7}));
}

}  // namespace
}  // namespace superserve
