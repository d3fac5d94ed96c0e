// The serving core's cross-model order: a free worker goes to the model its
// policies' Urgency names most urgent (Symphony: the candidate with the
// smallest latest start), not simply to the earliest head deadline.
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "serving/serving_core.h"
#include "tests/baselines_registered.h"
#include "tests/policies/policy_test_util.h"
#include "tests/test_util/serving_fakes.h"

namespace superserve {
namespace {

using testing::FakeChannel;
using testing::FakeHandle;

// ℓ(b) = b + base ms for batches 1..8, one subnet.
ModelProfile Linear(const std::string& name, double base_ms) {
  std::vector<int32_t> batches;
  std::vector<double> ms;
  for (int b = 1; b <= 8; ++b) {
    batches.push_back(b);
    ms.push_back(b + base_ms);
  }
  ModelProfile p = testing::HandProfile(batches, {76}, {ms});
  p.model = name;
  return p;
}

class CrossModelOrderTest : public ::testing::Test {
 protected:
  // "fast" (ℓ(8) = 9 ms) and "slow" (ℓ(8) = 18 ms) share one worker. The
  // worker is busy with a first batch; then 8 queries of each queue up:
  // fast's deadline 15 ms (latest start 6 ms), slow's 20 ms (latest 2 ms).
  // Returns the model the worker takes when it frees up at 1 ms.
  std::string FirstModelServed(const std::string& policy) {
    ServingOptions o;
    o.missed_heartbeats = 0;
    o.log_lifecycle = false;
    ServingCore core(o, &clock_);
    PolicyConfig config;
    config.base.initial_overhead = 0;
    for (const ModelProfile& p : {Linear("fast", 1), Linear("slow", 10)}) {
      EXPECT_TRUE(core.AddModel(p, *MakePolicy(policy, p, config)).ok());
    }
    // Idle models do not change the answer (nor, by the active list, the
    // cost of the pass).
    for (int i = 0; i < 100; ++i) {
      ModelProfile idle = Linear("idle" + std::to_string(i), 1);
      EXPECT_TRUE(core.AddModel(idle, *MakePolicy(policy, idle, config)).ok());
    }
    auto channel = std::make_shared<FakeChannel>();
    WorkerRegistration r;
    r.name = "w";
    r.models = {"fast", "slow"};
    const int32_t worker = *core.RegisterWorker(r, channel);
    const Nanos t0 = clock_.Now();
    for (int i = 0; i < 8; ++i) Submit(&core, "fast", t0 + Millis(100));
    EXPECT_EQ(channel->sent.size(), 1u) << "a full batch runs at once";
    for (int i = 0; i < 8; ++i) Submit(&core, "fast", t0 + Millis(15));
    for (int i = 0; i < 8; ++i) Submit(&core, "slow", t0 + Millis(20));
    EXPECT_EQ(channel->sent.size(), 1u) << "the worker is busy";
    EXPECT_TRUE(clock_.Advance(Millis(1)).ok());
    BatchOutcome done;
    done.batch_id = channel->sent.front().batch_id;
    done.exec = Millis(1);
    for (QueryId id : channel->sent.front().queries) done.outputs.emplace_back(id, nullptr);
    core.OnBatchResult(worker, std::move(done));
    EXPECT_EQ(channel->sent.size(), 2u);
    std::string model = channel->sent.size() == 2 ? channel->sent.back().model : "";
    core.Shutdown();
    return model;
  }

  void Submit(ServingCore* core, const std::string& model, Nanos deadline) {
    handles_.push_back(std::make_unique<FakeHandle>());
    QueryRequest q;
    q.model = model;
    q.deadline = deadline;
    core->Submit(handles_.back().get(), q);
  }

  SimulatedClock clock_{Seconds(1)};
  std::vector<std::unique_ptr<FakeHandle>> handles_;
};

TEST_F(CrossModelOrderTest, SymphonyServesTheSmallestLatestStartFirst) {
  EXPECT_EQ(FirstModelServed("symphony"), "slow");
}

TEST_F(CrossModelOrderTest, EdfPoliciesServeTheEarliestHeadDeadlineFirst) {
  EXPECT_EQ(FirstModelServed("maxbatch"), "fast");
}

}  // namespace
}  // namespace superserve
