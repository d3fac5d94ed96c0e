#include "router/repository_poller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The emulated test package as model `name` at `version` in `repo`.
void WritePackage(const fs::path& repo, const std::string& name, int version) {
  const fs::path src = fs::path(testing::EmulatedRepo()) / "emu";
  const fs::path dir = repo / name;
  fs::create_directories(dir);
  std::ofstream(dir / "profile.json") << absl::StrReplaceAll(
      ReadAll(src / "profile.json"), {{"\"model\": \"emu\"", "\"model\": \"" + name + "\""}});
  std::ofstream(dir / "manifest.json") << absl::StrReplaceAll(
      ReadAll(src / "manifest.json"), {{"\"name\": \"emu\"", "\"name\": \"" + name + "\""},
                                       {"\"version\": 1", absl::StrCat("\"version\": ", version)}});
}

class RepositoryPollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::path(::testing::TempDir()) /
            absl::StrCat("poll-", ::testing::UnitTest::GetInstance()->random_seed(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(repo_);
    fs::create_directories(repo_);
    poller_ = std::make_unique<RepositoryPoller>(
        repo_.string(),
        RepositoryPoller::Actions{
            [this](const std::string& dir, const std::string& name) {
              calls_.push_back("register " + name);
              EXPECT_EQ(fs::path(dir).filename().string(), name);
              return register_result_;
            },
            [this](const std::string& name) {
              calls_.push_back("unregister " + name);
              return absl::OkStatus();
            }});
  }
  void TearDown() override { fs::remove_all(repo_); }

  fs::path repo_;
  std::unique_ptr<RepositoryPoller> poller_;
  std::vector<std::string> calls_;
  absl::Status register_result_ = absl::OkStatus();
};

TEST_F(RepositoryPollerTest, RegistersNewPackagesAndUnregistersRemovedOnesOnce) {
  WritePackage(repo_, "a", 1);
  auto served = LoadModelRepository(repo_.string());
  ASSERT_TRUE(served.ok()) << served.status();
  poller_->Adopt(*served);
  EXPECT_THAT(poller_->PollOnce(), IsEmpty());  // the start-up state, unchanged
  WritePackage(repo_, "b", 1);
  EXPECT_THAT(poller_->PollOnce(), ElementsAre("registered b"));
  EXPECT_THAT(poller_->PollOnce(), IsEmpty());
  fs::remove_all(repo_ / "a");
  EXPECT_THAT(poller_->PollOnce(), ElementsAre("unregistered a"));
  EXPECT_THAT(poller_->PollOnce(), IsEmpty());
  EXPECT_THAT(calls_, ElementsAre("register b", "unregister a"));
}

// The poller decides nothing: a changed package goes to the lifecycle, whose
// refusal (here: not a higher version) is logged once, and whose next change
// is tried again (ModelLifecycleTest.ThePollerAndAnAdminRegisterTakeOneVersionDecision).
TEST_F(RepositoryPollerTest, AChangedPackageIsRegisteredAndARefusalLoggedOnce) {
  WritePackage(repo_, "a", 1);
  EXPECT_THAT(poller_->PollOnce(), ElementsAre("registered a"));
  register_result_ = absl::AlreadyExistsError("model a version 1 is serving");
  std::ofstream(repo_ / "a" / "notes.txt") << "retrained";
  EXPECT_THAT(poller_->PollOnce(),
              ElementsAre("a: model a version 1 is serving (not registered)"));
  EXPECT_THAT(poller_->PollOnce(), IsEmpty());
  register_result_ = absl::OkStatus();
  WritePackage(repo_, "a", 2);
  EXPECT_THAT(poller_->PollOnce(), ElementsAre("registered a"));
  EXPECT_THAT(calls_, ElementsAre("register a", "register a", "register a"));
}

TEST_F(RepositoryPollerTest, BrokenOrRefusedPackagesAreReportedOnceAndRetriedWhenTheyChange) {
  WritePackage(repo_, "bad", 1);
  register_result_ = absl::InvalidArgumentError("model package bad: unknown kind");
  auto lines = poller_->PollOnce();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("bad: model package"));
  EXPECT_THAT(lines[0], HasSubstr("not registered"));
  EXPECT_THAT(poller_->PollOnce(), IsEmpty());  // not repeated
  // Changed, but every worker refuses it: reported once, kept unregistered.
  register_result_ = absl::FailedPreconditionError("no worker loaded model bad");
  std::ofstream(repo_ / "bad" / "notes.txt") << "fixed";
  lines = poller_->PollOnce();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("no worker loaded model bad"));
  EXPECT_THAT(poller_->PollOnce(), IsEmpty());
  // Its folder going away unregisters nothing: it never served.
  fs::remove_all(repo_ / "bad");
  EXPECT_THAT(poller_->PollOnce(), IsEmpty());
  EXPECT_THAT(calls_, ElementsAre("register bad", "register bad"));
}

TEST_F(RepositoryPollerTest, AnUnreadableRepositoryUnregistersNothing) {
  WritePackage(repo_, "a", 1);
  EXPECT_THAT(poller_->PollOnce(), ElementsAre("registered a"));
  fs::remove_all(repo_);
  auto lines = poller_->PollOnce();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("cannot scan"));
  EXPECT_THAT(calls_, ElementsAre("register a"));
}

TEST_F(RepositoryPollerTest, TheThreadPollsUntilStopped) {
  poller_->Start(Millis(5));
  WritePackage(repo_, "late", 1);
  // 20 polls' worth; calls_ is the poller thread's until Stop() joins it.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  poller_->Stop();
  EXPECT_THAT(calls_, ElementsAre("register late"));
}

}  // namespace
}  // namespace superserve
