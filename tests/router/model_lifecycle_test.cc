// ModelLifecycle's states and transitions, driven event by event: a fake
// serving side records what the lifecycle asks of it and holds the core's
// drained event; a recording worker connection stands for a worker's stream.
// No test sleeps: every wait ends on an event the test delivers.
#include "router/model_lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/notification.h"
#include "router/repository_poller.h"
#include "tests/router/engine_test_util.h"
#include "tests/test_util/router_fakes.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;
using LifecycleState = ModelLifecycle::State;
using testing::RecordingConnection;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

ModelProfile NamedProfile(const std::string& name) {
  ModelProfile p;
  p.model = name;
  return p;
}

class ModelLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lifecycle_ = std::make_unique<ModelLifecycle>(ModelLifecycle::Serving{
        [this](const ModelProfile& p, const ModelDigest*) {
          Record(absl::StrCat("add ", p.model));
          std::lock_guard<std::mutex> lock(mu_);
          served_.insert(p.model);
          return absl::OkStatus();
        },
        [this](const std::string& model, std::function<void()> on_drained) {
          bool served;
          {
            std::lock_guard<std::mutex> lock(mu_);
            served = served_.count(model) > 0;
          }
          if (!served) {
            if (on_close_unserved_) on_close_unserved_();
            return absl::NotFoundError(model);
          }
          Record(absl::StrCat("close ", model));
          if (drained_at_close_) {
            on_drained();  // nothing queued: the core reports it at once
          } else {
            on_drained_ = std::move(on_drained);
            closed_.Notify();
          }
          return absl::OkStatus();
        },
        [this](const std::string& model) {
          Record(absl::StrCat("remove ", model));
          std::lock_guard<std::mutex> lock(mu_);
          served_.erase(model);
          return absl::OkStatus();
        },
        [this](int32_t worker, const std::string& model) {
          Record(absl::StrCat("attach ", worker, " ", model));
          if (drain_at_attach_) on_drained_();  // the attach answered the last query
          return absl::OkStatus();
        }});
  }
  void Record(std::string call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(call));
  }
  std::vector<std::string> Calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::set<std::string> Served() {
    std::lock_guard<std::mutex> lock(mu_);
    return served_;
  }
  // The emulated package as `version` of emu, in a folder of its own.
  std::string EmuPackage(int version) {
    const fs::path dir = fs::path(::testing::TempDir()) /
                         absl::StrCat("lifecycle-", getpid(), "-v", version) / "emu";
    fs::create_directories(dir);
    const fs::path src = fs::path(testing::EmulatedRepo()) / "emu";
    fs::copy_file(src / "profile.json", dir / "profile.json", fs::copy_options::overwrite_existing);
    std::ifstream in(src / "manifest.json");
    std::stringstream manifest;
    manifest << in.rdbuf();
    std::ofstream(dir / "manifest.json") << absl::StrReplaceAll(
        manifest.str(), {{"\"version\": 1", absl::StrCat("\"version\": ", version)}});
    return dir.string();
  }
  static v1::ModelLoaded Loaded(const std::string& model) {
    v1::ModelLoaded m;
    m.set_model(model);
    m.set_load_us(1000);
    return m;
  }
  static std::vector<std::string> Kinds(RecordingConnection* c) {
    std::vector<std::string> out;
    for (const auto& m : c->sent()) {
      out.push_back(m.has_load_model()     ? absl::StrCat("load ", m.load_model().model(), " as ",
                                                          m.load_model().serve_as())
                    : m.has_unload_model() ? absl::StrCat("unload ", m.unload_model().model())
                                           : "other");
    }
    return out;
  }

  std::unique_ptr<ModelLifecycle> lifecycle_;
  std::mutex mu_;
  std::vector<std::string> calls_;
  std::set<std::string> served_;  // by the core
  bool drained_at_close_ = false;
  bool drain_at_attach_ = false;
  std::function<void()> on_close_unserved_;  // an event that comes as close says NOT_FOUND
  std::function<void()> on_drained_;
  absl::Notification closed_;
};

// Source -> validate -> load on workers -> serve: a registration with no
// worker yet stands (loading); the first worker to join is sent the package
// and its ModelLoaded serves it. A higher version loads beside it under
// "emu@2" and becomes current on its first ready worker (the switch).
TEST_F(ModelLifecycleTest, ARegistrationServesOnTheFirstReadyWorkerAndAHigherVersionSwitches) {
  HotModels::Outcome out = lifecycle_->Register(EmuPackage(1), "emu", /*timeout=*/0);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_FALSE(out.visible);
  EXPECT_EQ(lifecycle_->StateOf("emu"), LifecycleState::kLoading);
  auto worker = std::make_shared<RecordingConnection>();
  lifecycle_->OnWorkerRegistered(7, "w#7", {}, worker);
  EXPECT_THAT(Kinds(worker.get()), ElementsAre("load emu as "));
  lifecycle_->OnModelLoaded(7, Loaded("emu"));
  EXPECT_EQ(lifecycle_->StateOf("emu"), LifecycleState::kServing);
  EXPECT_THAT(Calls(), ElementsAre("attach 7 emu", "add emu"));
  EXPECT_EQ(lifecycle_->versions().Current("emu"), 1u);

  EXPECT_EQ(lifecycle_->Register(EmuPackage(1), "emu", 0).status.code(),
            absl::StatusCode::kAlreadyExists)
      << "the served version again";
  EXPECT_EQ(lifecycle_->Register(EmuPackage(2), "other", 0).status.code(),
            absl::StatusCode::kInvalidArgument)
      << "a name that is not the package's";
  out = lifecycle_->Register(EmuPackage(2), "emu", 0);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(lifecycle_->StateOf("emu@2"), LifecycleState::kLoading);
  EXPECT_EQ(lifecycle_->versions().Current("emu"), 1u) << "v1 serves until v2 is loaded";
  lifecycle_->OnModelLoaded(7, Loaded("emu@2"));
  EXPECT_EQ(lifecycle_->StateOf("emu@2"), LifecycleState::kServing);
  EXPECT_EQ(lifecycle_->versions().Current("emu"), 2u);
  EXPECT_EQ(*lifecycle_->versions().Resolve("emu", 1), "emu") << "v1 stays pinnable";
}

// Serve -> drain -> unload, on the core's drained event: the unregister
// waits (with a 60 s timeout) until the event comes, then removes the model
// and has every worker free it.
TEST_F(ModelLifecycleTest, UnregisterWaitsForTheDrainedEventThenRemovesAndUnloads) {
  auto worker = std::make_shared<RecordingConnection>();
  lifecycle_->OnWorkerRegistered(0, "w#0", {"emu"}, worker);
  ASSERT_TRUE(lifecycle_->AddServing(NamedProfile("emu"), nullptr, 1).ok());
  EXPECT_EQ(lifecycle_->StateOf("emu"), LifecycleState::kServing);
  absl::Status unregistered = absl::UnknownError("not returned");
  std::thread t([&] { unregistered = lifecycle_->Unregister("emu", 0, Seconds(60)); });
  closed_.WaitForNotification();
  EXPECT_EQ(lifecycle_->StateOf("emu"), LifecycleState::kDraining);
  EXPECT_THAT(Calls(), ElementsAre("add emu", "close emu")) << "nothing removed before the event";
  on_drained_();  // the core: the last query of emu is answered
  t.join();
  EXPECT_TRUE(unregistered.ok()) << unregistered;
  EXPECT_THAT(Calls(), ElementsAre("add emu", "close emu", "remove emu"));
  EXPECT_THAT(Kinds(worker.get()), ElementsAre("unload emu"));
  EXPECT_EQ(lifecycle_->StateOf("emu"), std::nullopt);
  EXPECT_EQ(lifecycle_->versions().Current("emu"), 0u);
  EXPECT_EQ(lifecycle_->Unregister("emu", 0, 0).code(), absl::StatusCode::kNotFound);
}

// A drain that runs out of time removes the model anyway (what is left is
// the core's to answer UNAVAILABLE); the event that comes later does
// nothing. A model with nothing queued is drained at its close.
TEST_F(ModelLifecycleTest, ATimedOutDrainRemovesOnceAndAnIdleModelDrainsAtItsClose) {
  ASSERT_TRUE(lifecycle_->AddServing(NamedProfile("a"), nullptr, 0).ok());
  ASSERT_TRUE(lifecycle_->AddServing(NamedProfile("b"), nullptr, 0).ok());
  EXPECT_TRUE(lifecycle_->Unregister("a", 0, /*timeout=*/0).ok());
  EXPECT_THAT(Calls(), ElementsAre("add a", "add b", "close a", "remove a"));
  on_drained_();  // late
  EXPECT_EQ(Calls().size(), 4u) << "removed once";
  EXPECT_EQ(lifecycle_->StateOf("a"), std::nullopt);
  drained_at_close_ = true;
  EXPECT_TRUE(lifecycle_->Unregister("b", 0, Seconds(60)).ok());
  EXPECT_THAT(Calls(), ElementsAre("add a", "add b", "close a", "remove a", "close b", "remove b"));
}

// Unregistering a version that is still loading on the workers unloads it
// without a drain; the served one is left alone.
TEST_F(ModelLifecycleTest, AVersionStillLoadingIsUnloadedWithoutADrain) {
  ASSERT_TRUE(lifecycle_->AddServing(NamedProfile("emu"), nullptr, 1).ok());
  auto worker = std::make_shared<RecordingConnection>();
  lifecycle_->OnWorkerRegistered(0, "w#0", {"emu"}, worker);
  ASSERT_TRUE(lifecycle_->Register(EmuPackage(3), "emu", 0).status.ok());
  EXPECT_EQ(lifecycle_->StateOf("emu@3"), LifecycleState::kLoading);
  EXPECT_TRUE(lifecycle_->Unregister("emu", 3, Seconds(60)).ok());
  EXPECT_EQ(lifecycle_->StateOf("emu@3"), std::nullopt);
  EXPECT_EQ(lifecycle_->StateOf("emu"), LifecycleState::kServing);
  EXPECT_THAT(Calls(), ElementsAre("add emu")) << "nothing closed";
  EXPECT_THAT(Kinds(worker.get()), ElementsAre("load emu as emu@3", "unload emu@3"));
}

// A model's unregister decides the fate of every version under one lock: a
// version still loading when it starts is never served, whichever worker
// event comes during the drain (here: the worker loads emu@2 while emu v1
// drains); before, emu@2 became served and current, so "emu" was visible
// again once its unregister returned.
TEST_F(ModelLifecycleTest, AVersionThatLoadsDuringItsModelsUnregisterIsNotServed) {
  auto worker = std::make_shared<RecordingConnection>();
  lifecycle_->OnWorkerRegistered(0, "w#0", {"emu"}, worker);
  ASSERT_TRUE(lifecycle_->AddServing(NamedProfile("emu"), nullptr, 1).ok());
  ASSERT_TRUE(lifecycle_->Register(EmuPackage(2), "emu", 0).status.ok());
  EXPECT_EQ(lifecycle_->StateOf("emu@2"), LifecycleState::kLoading);
  absl::Status unregistered = absl::UnknownError("not returned");
  std::thread t([&] { unregistered = lifecycle_->Unregister("emu", 0, Seconds(60)); });
  closed_.WaitForNotification();
  lifecycle_->OnModelLoaded(0, Loaded("emu@2"));  // the worker's answer, during the drain
  on_drained_();
  t.join();
  EXPECT_TRUE(unregistered.ok()) << unregistered;
  EXPECT_THAT(Served(), IsEmpty());
  EXPECT_EQ(lifecycle_->StateOf("emu@2"), std::nullopt);
  EXPECT_EQ(lifecycle_->versions().Current("emu"), 0u);
  EXPECT_THAT(Kinds(worker.get()), UnorderedElementsAre("load emu as emu@2", "unload emu@2",
                                                        "unload emu"));
}

// The same for a first version still loading under the model's own name:
// its load, reported as the unregister looks at it, is not served.
TEST_F(ModelLifecycleTest, AFirstVersionThatLoadsAsItIsUnregisteredIsNotServed) {
  auto worker = std::make_shared<RecordingConnection>();
  lifecycle_->OnWorkerRegistered(7, "w#7", {}, worker);
  ASSERT_TRUE(lifecycle_->Register(EmuPackage(1), "emu", 0).status.ok());
  on_close_unserved_ = [&] { lifecycle_->OnModelLoaded(7, Loaded("emu")); };
  EXPECT_TRUE(lifecycle_->Unregister("emu", 0, Seconds(60)).ok());
  EXPECT_THAT(Served(), IsEmpty());
  EXPECT_EQ(lifecycle_->StateOf("emu"), std::nullopt);
  EXPECT_EQ(lifecycle_->versions().Current("emu"), 0u);
}

// The poller reports what it sees on disk; whether a version may load is
// the lifecycle's decision, the one an admin register gets. Before, the
// poller kept its own: once the admin had unregistered emu, its changed
// files at the same version were refused as "still version 5".
TEST_F(ModelLifecycleTest, ThePollerAndAnAdminRegisterTakeOneVersionDecision) {
  const fs::path dir = EmuPackage(5);
  RepositoryPoller poller(dir.parent_path().string(),
                          RepositoryPoller::Actions{
                              [&](const std::string& d, const std::string& name) {
                                return lifecycle_->Register(d, name, 0).status;
                              },
                              [&](const std::string& name) {
                                return lifecycle_->Unregister(name, 0, Seconds(60));
                              }});
  EXPECT_THAT(poller.PollOnce(), ElementsAre(HasSubstr("registered emu")));
  EXPECT_EQ(lifecycle_->StateOf("emu"), LifecycleState::kLoading);
  const absl::Status admin = lifecycle_->Register(dir.string(), "emu", 0).status;
  EXPECT_EQ(admin.code(), absl::StatusCode::kAlreadyExists);
  std::ofstream(dir / "notes.txt") << "retrained";
  EXPECT_THAT(poller.PollOnce(), ElementsAre(HasSubstr(admin.message())));
  ASSERT_TRUE(lifecycle_->Unregister("emu", 0, Seconds(60)).ok());
  std::ofstream(dir / "notes.txt") << "retrained again";
  EXPECT_THAT(poller.PollOnce(), ElementsAre(HasSubstr("registered emu")));
  EXPECT_EQ(lifecycle_->StateOf("emu"), LifecycleState::kLoading);
}

// The decision itself: a version loads when it is newer than every version
// of the name held here, serving, loading or draining; the first one is
// served under the model's own name, later ones beside it.
TEST_F(ModelLifecycleTest, AVersionLoadsOnlyWhenNewerThanEveryVersionHeld) {
  EXPECT_EQ(*lifecycle_->DecideVersion("emu", 1), "emu");
  ASSERT_TRUE(lifecycle_->AddServing(NamedProfile("emu"), nullptr, 1).ok());
  EXPECT_EQ(lifecycle_->DecideVersion("emu", 1).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*lifecycle_->DecideVersion("emu", 2), "emu@2");
  ASSERT_TRUE(lifecycle_->Register(EmuPackage(2), "emu", 0).status.ok());
  EXPECT_EQ(lifecycle_->DecideVersion("emu", 2).status().code(), absl::StatusCode::kAlreadyExists)
      << "loading";
  EXPECT_EQ(*lifecycle_->DecideVersion("emu", 3), "emu@3");
  std::thread t([&] { EXPECT_TRUE(lifecycle_->Unregister("emu", 0, Seconds(60)).ok()); });
  closed_.WaitForNotification();
  EXPECT_THAT(lifecycle_->DecideVersion("emu", 1).status().message(), HasSubstr("draining"));
  on_drained_();
  t.join();
  EXPECT_EQ(*lifecycle_->DecideVersion("emu", 1), "emu") << "gone";
}

// The core may report a drain from within any call into it, here the
// attach of a worker that loaded the model late (HotModels calls it under
// its lock): the event only decides, and the unregister's thread removes and
// unloads. Before, the event's thread did, taking HotModels' lock again (a
// deadlock).
TEST_F(ModelLifecycleTest, ADrainReportedFromWithinAWorkersAttachIsActedOnByTheUnregister) {
  auto w0 = std::make_shared<RecordingConnection>();
  lifecycle_->OnWorkerRegistered(0, "w#0", {}, w0);
  ASSERT_TRUE(lifecycle_->Register(EmuPackage(1), "emu", 0).status.ok());
  lifecycle_->OnModelLoaded(0, Loaded("emu"));
  ASSERT_EQ(lifecycle_->StateOf("emu"), LifecycleState::kServing);
  absl::Status unregistered = absl::UnknownError("not returned");
  std::thread t([&] { unregistered = lifecycle_->Unregister("emu", 0, Seconds(60)); });
  closed_.WaitForNotification();
  drain_at_attach_ = true;
  auto w1 = std::make_shared<RecordingConnection>();
  lifecycle_->OnWorkerRegistered(1, "w#1", {}, w1);  // sent the package: still registered
  lifecycle_->OnModelLoaded(1, Loaded("emu"));
  t.join();
  EXPECT_TRUE(unregistered.ok()) << unregistered;
  EXPECT_THAT(Served(), IsEmpty());
  EXPECT_EQ(lifecycle_->StateOf("emu"), std::nullopt);
  EXPECT_THAT(Kinds(w1.get()), ElementsAre("load emu as ", "unload emu"));
}

}  // namespace
}  // namespace superserve
