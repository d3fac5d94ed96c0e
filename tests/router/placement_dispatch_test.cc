// Placement through the router's Dispatcher (issue 43): a worker that
// registers with a memory budget is sent LoadModel (from its repository) and
// UnloadModel, gets a model's batches only once it reported the model
// loaded, and its ModelLoaded reports are input: one nobody asked for, or
// one with an impossible footprint, or a stored package's (its footprint
// aside), changes nothing it should not.
#include <gtest/gtest.h>

#include "router/dispatcher.h"
#include "common/tensor_codec.h"
#include "tests/policies/policy_test_util.h"
#include "tests/test_util/router_fakes.h"

namespace superserve {
namespace {

using testing::FakeConnection;
using testing::FakeQuery;

class PlacementDispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DispatcherOptions o;
    o.policy = "fixed-subnet";
    o.run_timer_thread = false;
    o.serving.missed_heartbeats = 0;
    d_ = std::make_unique<Dispatcher>(o, &clock_, nullptr);
    for (const char* name : {"a", "b"}) {
      ModelProfile p = testing::TwoSubnetProfile();
      p.model = name;
      p.memory_bytes = 60;
      p.load_time = Millis(10);
      ASSERT_TRUE(d_->AddModel(p).ok());
    }
    conn_ = std::make_shared<FakeConnection>();
    v1::RegisterWorker hello;
    hello.set_worker_id("w");
    hello.add_models("a");
    hello.add_models("b");
    hello.set_memory_budget_bytes(100);  // one of the two at a time, by the profiles
    auto id = d_->RegisterWorker(hello, conn_);
    ASSERT_TRUE(id.ok()) << id.status();
    worker_ = *id;
  }

  FakeQuery& Submit(const std::string& model) {
    queries_.push_back(std::make_unique<FakeQuery>(model, std::vector<int64_t>{2}));
    d_->Submit(queries_.back().get(), clock_.Now() + Seconds(1));
    return *queries_.back();
  }

  // What the router sent since the last call, in order: "load a",
  // "unload a", "batch a" (the ack is skipped).
  std::vector<std::string> Sent() {
    std::vector<std::string> out;
    while (!conn_->sent.empty()) {
      auto m = std::move(conn_->sent.front());
      conn_->sent.pop_front();
      if (m->has_load_model()) {
        EXPECT_TRUE(m->load_model().from_repository());
        EXPECT_EQ(m->load_model().files_size(), 0);
        out.push_back("load " + m->load_model().model());
      } else if (m->has_unload_model()) {
        // An eviction: a hot-registered package stays on the worker.
        EXPECT_TRUE(m->unload_model().keep_package());
        out.push_back("unload " + m->unload_model().model());
      } else if (m->has_batch()) {
        out.push_back("batch " + m->batch().model());
        batches_.push_back(m->batch());
      }
    }
    return out;
  }

  void Loaded(const std::string& model, int64_t bytes, const std::string& error = "") {
    v1::ModelLoaded l;
    l.set_model(model);
    l.set_memory_bytes(bytes);
    l.set_error(error);
    l.set_load_us(10000);
    d_->OnModelLoaded(worker_, l);
  }

  // Answers the oldest batch sent.
  void Answer() {
    ASSERT_FALSE(batches_.empty());
    const v1::Batch b = batches_.front();
    batches_.erase(batches_.begin());
    v1::BatchResult r;
    r.set_batch_id(b.batch_id());
    r.set_exec_us(1000);
    for (const auto& q : b.queries()) {
      auto* qr = r.add_results();
      qr->set_query_id(q.query_id());
      EncodeTensor(MakeFloatTensor({3}, std::vector<float>{0, 1, 0}), qr->mutable_output());
    }
    d_->OnBatchResult(worker_, &r);
  }

  // Serves one query of `a` with the footprint the worker reports.
  void ServeAWith(int64_t reported_bytes) {
    FakeQuery& q = Submit("a");
    EXPECT_EQ(Sent(), std::vector<std::string>{"load a"});
    Loaded("a", reported_bytes);
    EXPECT_EQ(Sent(), std::vector<std::string>{"batch a"});
    Answer();
    EXPECT_EQ(q.answers, 1);
    EXPECT_TRUE(q.status.ok()) << q.status;
  }

  SimulatedClock clock_{Seconds(1)};
  std::vector<std::unique_ptr<FakeQuery>> queries_;  // outlive d_
  std::unique_ptr<Dispatcher> d_;
  std::shared_ptr<FakeConnection> conn_;
  int32_t worker_ = -1;
  std::vector<v1::Batch> batches_;
};

TEST_F(PlacementDispatchTest, ABudgetedWorkerGetsABatchOnlyAfterItLoadedTheModel) {
  // Reports nobody asked for: a model never served, and one not loading.
  Loaded("nope", 10);
  Loaded("a", 10);
  Loaded("b", 0, "a failure nobody asked for");
  EXPECT_EQ(Sent(), std::vector<std::string>{});
  FakeQuery& q = Submit("a");
  EXPECT_EQ(Sent(), std::vector<std::string>{"load a"}) << "the stray report did not load it";
  EXPECT_EQ(q.answers, 0);
  Loaded("a", 0);
  EXPECT_EQ(Sent(), std::vector<std::string>{"batch a"});
  Answer();
  EXPECT_EQ(q.answers, 1);
  // A duplicate report of the same load changes nothing.
  Loaded("a", 0);
  EXPECT_EQ(Sent(), std::vector<std::string>{});
}

// A worker's report that it stored a hot package (not loaded) may come while
// placement loads that model there (a query arrived as the model turned
// visible): it must not count as the load done, or batches would reach the
// worker before the model.
TEST_F(PlacementDispatchTest, AStoredPackagesReportDoesNotCompleteAPendingLoad) {
  FakeQuery& q = Submit("a");
  EXPECT_EQ(Sent(), std::vector<std::string>{"load a"});
  v1::ModelLoaded stored;
  stored.set_model("a");
  stored.set_stored(true);
  stored.set_memory_bytes(60);
  d_->OnModelLoaded(worker_, stored);
  EXPECT_EQ(Sent(), std::vector<std::string>{}) << "no batch before the load is reported";
  EXPECT_EQ(q.answers, 0);
  Loaded("a", 60);
  EXPECT_EQ(Sent(), std::vector<std::string>{"batch a"});
  Answer();
  EXPECT_EQ(q.answers, 1);
  EXPECT_TRUE(q.status.ok()) << q.status;
}

// The trial load that stored a hot package measured its footprint: it
// counts from the report on (the hostile-input rules of a load's report),
// so that the first placement load is planned with it.
TEST_F(PlacementDispatchTest, AStoredPackagesFootprintCountsBeforeItsFirstLoad) {
  for (int64_t bytes : {int64_t{30}, int64_t{1} << 62, int64_t{-5}}) {  // only 30 counts
    v1::ModelLoaded stored;
    stored.set_model("a");
    stored.set_stored(true);
    stored.set_memory_bytes(bytes);
    d_->OnModelLoaded(worker_, stored);
  }
  EXPECT_EQ(Sent(), std::vector<std::string>{});
  ServeAWith(0);  // the load measured nothing: the stored 30 stands
  Submit("b");
  EXPECT_EQ(Sent(), std::vector<std::string>{"load b"}) << "30 + 60 fit the 100-byte budget";
}

TEST_F(PlacementDispatchTest, TheMeasuredFootprintDecidesWhatFitsBesideIt) {
  ServeAWith(30);  // 30 + 60 fit the 100-byte budget: b loads beside a
  Submit("b");
  EXPECT_EQ(Sent(), std::vector<std::string>{"load b"});
}

TEST_F(PlacementDispatchTest, AnImpossibleFootprintIsIgnoredAndTheProfilesStands) {
  ServeAWith(-5);  // the profile's 60 stands: b evicts a
  Submit("b");
  EXPECT_EQ(Sent(), (std::vector<std::string>{"unload a", "load b"}));
  Loaded("b", int64_t{1} << 62);  // ignored too: b counts 60
  EXPECT_EQ(Sent(), std::vector<std::string>{"batch b"});
  Answer();
}

TEST_F(PlacementDispatchTest, AFailedLoadAnswersItsQueriesWithTheWorkersReason) {
  FakeQuery& q = Submit("a");
  EXPECT_EQ(Sent(), std::vector<std::string>{"load a"});
  Loaded("a", 0, "not in this worker's repository");
  EXPECT_EQ(Sent(), std::vector<std::string>{});
  ASSERT_EQ(q.answers, 1);
  EXPECT_EQ(q.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(q.status.message().find("not in this worker's repository"), std::string::npos)
      << q.status;
}

// A budgeted worker away while a model was unregistered declares its stored
// package on return: the router has it deleted (UnloadModel without
// keep_package), and leaves what it serves alone. A worker without a budget
// keeps what it declares.
TEST_F(PlacementDispatchTest, AReturningWorkerIsToldToDeleteAPackageNoLongerServed) {
  for (int64_t budget : {100, 0}) {
    auto conn = std::make_shared<FakeConnection>();
    v1::RegisterWorker hello;
    hello.set_worker_id("back");
    hello.add_models("a");
    hello.add_models("gone");
    hello.set_memory_budget_bytes(budget);
    ASSERT_TRUE(d_->RegisterWorker(hello, conn).ok());
    std::vector<std::string> unloads;
    for (const auto& m : conn->sent) {
      if (!m->has_unload_model()) continue;
      EXPECT_FALSE(m->unload_model().keep_package());
      unloads.push_back(m->unload_model().model());
    }
    EXPECT_EQ(unloads, budget > 0 ? std::vector<std::string>{"gone"} : std::vector<std::string>{})
        << "budget " << budget;
  }
}

TEST(PlacementRegistrationTest, ANegativeBudgetIsRefused) {
  SimulatedClock clock{Seconds(1)};
  DispatcherOptions o;
  o.run_timer_thread = false;
  Dispatcher d(o, &clock, nullptr);
  v1::RegisterWorker hello;
  hello.set_memory_budget_bytes(-1);
  auto id = d.RegisterWorker(hello, std::make_shared<FakeConnection>());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace superserve
