// HotModels in memory: which workers are sent a package, when the model
// becomes visible, what a registration answers when workers fail, go away
// or join later, and what an unload sends.
#include "router/hot_models.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/model_repository.h"
#include "tests/router/engine_test_util.h"
#include "tests/test_util/router_fakes.h"

namespace superserve {
namespace {

using testing::RecordingConnection;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class HotModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = LoadModelDirectory(testing::EmulatedRepo() + "/emu");
    ASSERT_TRUE(e.ok()) << e.status();
    entry_ = *e;
    hot_ = std::make_unique<HotModels>(HotModels::Hooks{
        [this](const ModelProfile& p, const ModelDigest&, const std::string& name, uint32_t v) {
          std::lock_guard<std::mutex> lock(mu_);
          added_.push_back(absl::StrCat(p.model, " as ", name, " v", v));
          added_profiles_.push_back(p);
          return absl::OkStatus();
        },
        [this](int32_t worker, const std::string& model) {
          std::lock_guard<std::mutex> lock(mu_);
          attached_.push_back(absl::StrCat(worker, ":", model));
          return absl::OkStatus();
        }});
  }
  // Registers on another thread (Register blocks until settled).
  std::thread RegisterAside(HotModels::Outcome* out, Nanos timeout = Seconds(10)) {
    return std::thread([this, out, timeout] {
      *out = hot_->Register(entry_, ModelDigest{"p", "c"}, "emu", 1, timeout);
    });
  }
  static void WaitForLoad(RecordingConnection* c) {
    for (int i = 0; i < 2000 && c->sent().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  static v1::ModelLoaded Loaded(const std::string& error = "") {
    v1::ModelLoaded m;
    m.set_model("emu");
    m.set_error(error);
    m.set_load_us(1500);
    return m;
  }

  ModelEntry entry_;
  std::unique_ptr<HotModels> hot_;
  std::mutex mu_;
  std::vector<std::string> added_, attached_;
  std::vector<ModelProfile> added_profiles_;
};

TEST_F(HotModelsTest, VisibleWhenTheFirstWorkerIsReadyAndEveryWorkerGetsThePackage) {
  auto a = std::make_shared<RecordingConnection>();
  auto b = std::make_shared<RecordingConnection>();
  hot_->OnWorkerRegistered(0, "a#0", {}, a);
  hot_->OnWorkerRegistered(1, "b#1", {}, b);
  HotModels::Outcome out;
  std::thread t = RegisterAside(&out);
  WaitForLoad(a.get());
  WaitForLoad(b.get());
  const std::vector<v1::RouterMessage> to_a = a->sent();
  ASSERT_EQ(to_a.size(), 1u);
  const v1::LoadModel& load = to_a[0].load_model();
  EXPECT_EQ(load.model(), "emu");
  EXPECT_EQ(load.version().profile_digest(), "p");
  std::vector<std::string> files;
  for (const auto& f : load.files()) files.push_back(f.name());
  EXPECT_THAT(files, ::testing::ElementsAre("manifest.json", "profile.json"));
  hot_->OnModelLoaded(1, Loaded());  // b first
  t.join();
  EXPECT_TRUE(out.status.ok()) << out.status;
  EXPECT_TRUE(out.visible);
  ASSERT_EQ(out.workers.size(), 2u);
  EXPECT_FALSE(out.workers[0].ready);  // a still loading
  EXPECT_TRUE(out.workers[1].ready);
  EXPECT_EQ(out.workers[1].worker, "b#1");
  hot_->OnModelLoaded(0, Loaded());  // a serves it too, added once
  EXPECT_THAT(added_, ::testing::ElementsAre("emu as emu v1"));
  EXPECT_THAT(attached_, ::testing::ElementsAre("1:emu", "0:emu"));
  // A worker that joins later without the model is sent it; one that
  // declares it is not.
  auto c = std::make_shared<RecordingConnection>();
  auto d = std::make_shared<RecordingConnection>();
  hot_->OnWorkerRegistered(2, "c#2", {}, c);
  hot_->OnWorkerRegistered(3, "d#3", {"emu"}, d);
  EXPECT_EQ(c->sent().size(), 1u);
  EXPECT_TRUE(d->sent().empty());
  // Unload reaches every live worker and forgets the model.
  hot_->OnWorkerGone(2);
  hot_->Unload("emu");
  EXPECT_FALSE(hot_->Registered("emu"));
  const std::vector<v1::RouterMessage> after = a->sent();
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[1].unload_model().model(), "emu");
  EXPECT_EQ(c->sent().size(), 1u);  // gone: nothing more
  EXPECT_EQ(d->sent().size(), 1u);
}

TEST_F(HotModelsTest, EveryWorkerFailingUndoesTheRegistrationNamingEachReason) {
  auto a = std::make_shared<RecordingConnection>();
  auto b = std::make_shared<RecordingConnection>();
  hot_->OnWorkerRegistered(0, "a#0", {}, a);
  hot_->OnWorkerRegistered(1, "b#1", {}, b);
  HotModels::Outcome out;
  std::thread t = RegisterAside(&out);
  WaitForLoad(a.get());
  WaitForLoad(b.get());
  hot_->OnModelLoaded(0, Loaded("checkpoint: tensor conv1.weight has shape [8] not [16]"));
  hot_->OnWorkerGone(1);  // the other one dies while loading
  t.join();
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status.message()),
              HasSubstr("a#0: checkpoint: tensor conv1.weight has shape [8] not [16]"));
  EXPECT_THAT(std::string(out.status.message()), HasSubstr("b#1: the worker went away"));
  EXPECT_FALSE(out.visible);
  EXPECT_FALSE(hot_->Registered("emu"));
  EXPECT_TRUE(added_.empty());
}

TEST_F(HotModelsTest, NoWorkerYetWaitsForTheFirstToJoinAndLoadIt) {
  HotModels::Outcome out;
  std::thread call = RegisterAside(&out, Seconds(30));
  while (!hot_->Registered("emu")) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto a = std::make_shared<RecordingConnection>();
  hot_->OnWorkerRegistered(0, "a#0", {}, a);
  ASSERT_EQ(a->sent().size(), 1u);
  hot_->OnModelLoaded(0, Loaded());
  call.join();
  EXPECT_TRUE(out.status.ok()) << out.status;
  EXPECT_TRUE(out.visible);
  ASSERT_EQ(out.workers.size(), 1u);
  EXPECT_EQ(out.workers[0].worker, "a#0");
  EXPECT_TRUE(out.workers[0].ready);
}

TEST_F(HotModelsTest, NoWorkerWithinTheTimeoutLeavesItRegisteredAndTheFirstToJoinMakesItVisible) {
  HotModels::Outcome out = hot_->Register(entry_, ModelDigest{"p", "c"}, "emu", 1, Millis(20));
  EXPECT_TRUE(out.status.ok()) << out.status;
  EXPECT_FALSE(out.visible);
  EXPECT_TRUE(hot_->Registered("emu"));
  EXPECT_EQ(hot_->Register(entry_, ModelDigest{"p", "c"}, "emu", 1, Seconds(1)).status.code(),
            absl::StatusCode::kAlreadyExists);
  auto a = std::make_shared<RecordingConnection>();
  hot_->OnWorkerRegistered(0, "a#0", {}, a);
  ASSERT_EQ(a->sent().size(), 1u);
  hot_->OnModelLoaded(0, Loaded());
  EXPECT_THAT(added_, ::testing::ElementsAre("emu as emu v1"));
}

TEST_F(HotModelsTest, ASecondVersionIsSentUnderItsInternalNameAndShutdownEndsAWait) {
  auto a = std::make_shared<RecordingConnection>();
  hot_->OnWorkerRegistered(0, "a#0", {}, a);
  HotModels::Outcome out;
  std::thread t([&] { out = hot_->Register(entry_, ModelDigest{"p", "c"}, "emu@2", 2, Seconds(30)); });
  WaitForLoad(a.get());
  const std::vector<v1::RouterMessage> sent = a->sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].load_model().model(), "emu");
  EXPECT_EQ(sent[0].load_model().serve_as(), "emu@2");
  hot_->Shutdown();
  t.join();
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(out.visible);
}

TEST_F(HotModelsTest, AProfileWithoutLatenciesServesWithTheFirstReadyWorkersMeasurement) {
  for (auto& s : entry_.profile.subnets) s.latency.clear();
  entry_.profile.latencies_measured = false;
  auto a = std::make_shared<RecordingConnection>();
  auto b = std::make_shared<RecordingConnection>();
  hot_->OnWorkerRegistered(0, "a#0", {}, a);
  hot_->OnWorkerRegistered(1, "b#1", {}, b);
  HotModels::Outcome out;
  std::thread t = RegisterAside(&out);
  WaitForLoad(a.get());
  WaitForLoad(b.get());
  // a reports ready but measured nothing: not usable.
  hot_->OnModelLoaded(0, Loaded());
  // b measured every subnet at every batch size (a noisy dip included).
  v1::ModelLoaded measured = Loaded();
  const size_t batches = entry_.profile.batch_sizes.size();
  for (const auto& s : entry_.profile.subnets) {
    auto* m = measured.add_measured();
    m->set_subnet_id(s.id);
    for (size_t i = 0; i < batches; ++i) m->add_latency_us(1000.0 * (s.id + 1) * (i + 1));
  }
  measured.mutable_measured(0)->set_latency_us(1, 500.0);  // below batch 1's 1000
  hot_->OnModelLoaded(1, measured);
  t.join();
  EXPECT_TRUE(out.status.ok()) << out.status;
  EXPECT_TRUE(out.visible);
  ASSERT_EQ(out.workers.size(), 2u);
  EXPECT_FALSE(out.workers[0].ready);
  EXPECT_THAT(out.workers[0].error, HasSubstr("measured none"));
  EXPECT_TRUE(out.workers[1].ready);
  ASSERT_EQ(added_profiles_.size(), 1u);
  const ModelProfile& served = added_profiles_[0];
  EXPECT_TRUE(served.latencies_measured);
  const int first = served.SubnetIndex(measured.measured(0).subnet_id());
  ASSERT_GE(first, 0);
  ASSERT_EQ(served.subnets[first].latency.size(), batches);
  EXPECT_EQ(served.subnets[first].latency[0], Micros(1000.0 * (served.subnets[first].id + 1)));
  EXPECT_EQ(served.subnets[first].latency[1], served.subnets[first].latency[0]);  // raised
  EXPECT_EQ(served.subnets.back().latency.back(),
            Micros(1000.0 * (served.subnets.back().id + 1) * batches));
  EXPECT_THAT(attached_, ::testing::ElementsAre("1:emu"));
}

}  // namespace
}  // namespace superserve
