// A partitioned worker on the simulated clock: its connection silently stops
// forwarding (no RST, so no "stream closed"), it just falls silent. The core
// must mark it dead within 2 heartbeat intervals (plus one tick) of the last
// thing it heard, re-queue its in-flight queries that can still make their
// deadline and answer the others DEADLINE_EXCEEDED, each exactly once, and
// ignore whatever the worker sends should the path come back.
#include <deque>
#include <memory>
#include <set>

#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "serving/serving_core.h"
#include "tests/policies/policy_test_util.h"
#include "tests/test_util/serving_fakes.h"

namespace superserve {
namespace {

using testing::FakeChannel;
using testing::FakeHandle;

constexpr Nanos kHeartbeat = Millis(100);
constexpr Nanos kTick = Millis(10);

using testing::OkOutcome;

class PartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServingOptions o;  // the default missed_heartbeats: the rule under test
    o.heartbeat_interval = kHeartbeat;
    o.tick_interval = kTick;
    // Long enough that the batch deadline never fires first: detection here
    // is by silence alone.
    o.batch_grace = Seconds(10);
    core_ = std::make_unique<ServingCore>(o, &clock_);
    ASSERT_TRUE(
        core_->AddModel(profile_, *MakePolicy("fixed-subnet", profile_, PolicyConfig())).ok());
    for (int i = 0; i < 2; ++i) {
      channels_.push_back(std::make_shared<FakeChannel>());
      WorkerRegistration r;
      r.models = {"hand"};
      ids_.push_back(*core_->RegisterWorker(r, channels_.back()));
      last_heard_.push_back(clock_.Now());
    }
  }

  FakeHandle& Submit(Nanos slo) {
    handles_.push_back(std::make_unique<FakeHandle>());
    QueryRequest r;
    r.model = "hand";
    r.deadline = clock_.Now() + slo;
    core_->Submit(handles_.back().get(), r);
    return *handles_.back();
  }

  // Advances the clock one tick at a time up to `until`; the workers in
  // `beating` heartbeat every interval. Returns the time at which `watch`
  // was first seen closed (0: not closed by `until`).
  Nanos RunUntil(Nanos until, const std::set<int>& beating, int watch) {
    Nanos closed_at = 0;
    while (clock_.Now() < until) {
      EXPECT_TRUE(clock_.Advance(kTick).ok());
      for (int i : beating) {
        if (clock_.Now() - last_heard_[i] >= kHeartbeat) {
          core_->OnHeartbeat(ids_[i]);
          last_heard_[i] = clock_.Now();
        }
      }
      core_->Tick();
      if (closed_at == 0 && channels_[watch]->closed) closed_at = clock_.Now();
    }
    return closed_at;
  }

  SimulatedClock clock_{Seconds(1)};
  ModelProfile profile_ = testing::ThreeSubnetProfile();
  std::vector<std::unique_ptr<FakeHandle>> handles_;  // outlive the core
  std::vector<std::shared_ptr<FakeChannel>> channels_;
  std::vector<int32_t> ids_;
  std::vector<Nanos> last_heard_;
  std::unique_ptr<ServingCore> core_;
};

TEST_F(PartitionTest, DefaultRuleIsTwoSilentIntervals) {
  EXPECT_EQ(ServingOptions().missed_heartbeats, 2);
  EXPECT_EQ(channels_[0]->heartbeat, kHeartbeat) << "workers are told the interval";
}

TEST_F(PartitionTest, APartitionedWorkerIsDeadWithinTwoIntervalsAndItsQueriesAnsweredOnce) {
  // w0 takes a query with plenty of time left; w1 one with little.
  FakeHandle& roomy = Submit(Seconds(5));
  ASSERT_EQ(channels_[0]->sent.size(), 1u);
  FakeHandle& tight = Submit(Millis(150));
  ASSERT_EQ(channels_[1]->sent.size(), 1u);
  // Both heartbeat for a while; nothing is declared.
  RunUntil(clock_.Now() + Millis(500), {0, 1}, 0);
  ASSERT_FALSE(channels_[0]->closed);
  ASSERT_FALSE(channels_[1]->closed);
  ASSERT_EQ(core_->Stats().workers_alive, 2);

  // w1's path goes silent: no more heartbeats, no result. w0 beats on.
  const Nanos last = last_heard_[1];
  const Nanos closed_at = RunUntil(clock_.Now() + Seconds(1), {0}, 1);
  ASSERT_GT(closed_at, 0) << "the partitioned worker was never declared dead";
  EXPECT_GT(closed_at - last, 2 * kHeartbeat - kTick) << "declared before 2 silent intervals";
  EXPECT_LE(closed_at - last, 2 * kHeartbeat + kTick)
      << "detected " << ToMillis(closed_at - last) << " ms after the last heartbeat";
  EXPECT_FALSE(channels_[0]->closed) << "the worker that heartbeats stays";
  EXPECT_EQ(core_->Stats().workers_alive, 1);

  // The tight query's deadline passed before the silence could be noticed:
  // answered DEADLINE_EXCEEDED at detection, exactly once.
  ASSERT_EQ(tight.answers, 1);
  EXPECT_EQ(tight.status.code(), absl::StatusCode::kDeadlineExceeded) << tight.status;

  // The roomy one is on w0 (alive); it completes normally.
  core_->OnBatchResult(ids_[0], OkOutcome(channels_[0]->sent.front()));
  channels_[0]->sent.pop_front();
  ASSERT_EQ(roomy.answers, 1);
  EXPECT_TRUE(roomy.status.ok()) << roomy.status;

  // The path heals and w1's late result arrives: ignored, nothing answered twice.
  core_->OnBatchResult(ids_[1], OkOutcome(channels_[1]->sent.front()));
  core_->OnHeartbeat(ids_[1]);
  RunUntil(clock_.Now() + Millis(100), {0, 1}, 1);
  EXPECT_EQ(tight.answers, 1);
  EXPECT_EQ(roomy.answers, 1);
  EXPECT_EQ(core_->Stats().workers_alive, 1) << "a dead worker is not revived by a heartbeat";
  EXPECT_EQ(core_->Stats().pending, 0);
}

TEST_F(PartitionTest, ThePartitionedWorkersQueriesThatCanStillMakeItAreServedByAnother) {
  // Both workers busy, so w0's query cannot be re-run at once by w1.
  FakeHandle& on_w0 = Submit(Seconds(2));
  FakeHandle& on_w1 = Submit(Seconds(2));
  ASSERT_EQ(channels_[0]->sent.size(), 1u);
  ASSERT_EQ(channels_[1]->sent.size(), 1u);
  // w0 is cut off at once; w1 beats on and finishes its batch.
  const Nanos last = last_heard_[0];
  core_->OnBatchResult(ids_[1], OkOutcome(channels_[1]->sent.front()));
  channels_[1]->sent.pop_front();
  ASSERT_EQ(on_w1.answers, 1);
  const Nanos closed_at = RunUntil(clock_.Now() + Millis(400), {1}, 0);
  ASSERT_GT(closed_at, 0);
  EXPECT_LE(closed_at - last, 2 * kHeartbeat + kTick);
  // Re-queued (not answered) and sent to w1 at once.
  EXPECT_EQ(on_w0.answers, 0);
  EXPECT_EQ(core_->Stats().requeued, 1);
  ASSERT_EQ(channels_[1]->sent.size(), 1u);
  ASSERT_EQ(channels_[1]->sent.front().queries.size(), 1u);
  EXPECT_EQ(channels_[1]->sent.front().queries[0], channels_[0]->sent.front().queries[0])
      << "the same query, re-run elsewhere";
  core_->OnBatchResult(ids_[1], OkOutcome(channels_[1]->sent.front()));
  ASSERT_EQ(on_w0.answers, 1);
  EXPECT_TRUE(on_w0.status.ok()) << on_w0.status;
  // w0's own (late) result: ignored.
  core_->OnBatchResult(ids_[0], OkOutcome(channels_[0]->sent.front()));
  EXPECT_EQ(on_w0.answers, 1);
  ServingStats s = core_->Stats();
  EXPECT_EQ(s.accepted, s.answered);
  EXPECT_EQ(s.pending, 0);
}

TEST_F(PartitionTest, OneLateHeartbeatIsTolerated) {
  // w0 heartbeats every interval, then one arrives 1.8 intervals after the
  // previous (a scheduling hiccup): within 2 silent intervals, not dead.
  RunUntil(clock_.Now() + Millis(300), {0, 1}, 0);
  RunUntil(last_heard_[0] + Millis(180), {1}, 0);
  core_->OnHeartbeat(ids_[0]);
  last_heard_[0] = clock_.Now();
  RunUntil(clock_.Now() + Millis(500), {0, 1}, 0);
  EXPECT_FALSE(channels_[0]->closed);
  EXPECT_EQ(core_->Stats().workers_alive, 2);
}

}  // namespace
}  // namespace superserve
