// superserve-nas's and superserve-early-exit's flag checks (runs the
// binaries; every case is refused before the data set is read, in well under
// a second), and calibrate/eval on the bundled model's dominated slots.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/model_profile.h"
#include "tests/cli_run.h"

namespace superserve {
namespace {

using testing::RunTool;

struct Case {
  std::string args;
  std::string named;
};

void ExpectRefused(const std::string& tool, const Case& c) {
  auto r = RunTool(tool, c.args);
  EXPECT_EQ(r.status, 2) << tool << " " << c.args << "\n" << r.out;
  EXPECT_NE(r.out.find(c.named), std::string::npos) << tool << " " << c.args << "\n" << r.out;
}

// Each used to be accepted: --samples=0 died of SIGFPE, an --output_dir that
// cannot be created aborted after the training, --threads=100000 hung, and a
// missing or unwritable --output was noticed after minutes of profiling.
TEST(EarlyExitCli, FlagsOutOfRangeAndUnwritableOutputsAreRefusedFirst) {
  const std::string ck = std::string("--checkpoint=") + SUPERSERVE_TEST_SOURCE_DIR +
                         "/models/dynamic/fmnist-exit/checkpoint.pt ";
  for (const Case& c : {
           Case{"profile " + ck + "--samples=0 --output=/proc/superserve-ss/x.json", "--samples=0 must be in"},
           Case{"profile " + ck + "--samples=-5 --output=/proc/superserve-ss/x.json", "--samples=-5 must be in"},
           Case{"profile " + ck + "--batches=0 --output=/proc/superserve-ss/x.json", "--batches=0 must be in"},
           Case{"profile " + ck, "profile needs --output"},
           Case{"profile " + ck + "--output=/nonexistent-ss/dir/p.json",
                "--output /nonexistent-ss/dir/p.json: folder /nonexistent-ss/dir does not exist"},
           Case{"build --output_dir=/proc/superserve-ss", "--output_dir /proc/superserve-ss: cannot create"},
           Case{"build --threads=100000 --output_dir=/proc/superserve-ss", "--threads=100000 must be in [1, 1024]"},
           Case{"build --threshold=nan --output_dir=/proc/superserve-ss", "--threshold=nan must be in (0, 1]"},
           Case{"build --learning_rate=inf --output_dir=/proc/superserve-ss", "--learning_rate=inf must be a finite"},
           Case{"eval", "eval needs --checkpoint"},
           Case{"profile " + ck + "--exit_thresholds=0.6,1.5 --output=/tmp/ss-never.json",
                "--exit_thresholds: \"1.5\" must be a number in (0, 1]"},
           Case{"build --exit_thresholds=0.6,x --output_dir=/proc/superserve-ss",
                "--exit_thresholds: \"x\" must be a number in (0, 1]"},
       }) {
    ExpectRefused("superserve-early-exit", c);
  }
}

// Each used to be accepted: calibrate --calibration_images=-1 aborted on an
// uncaught c10::Error, NaN/infinite training rates trained into NaN weights,
// --threads=100000 hung, an unwritable --checkpoint was found after training.
TEST(NasCli, FlagsOutOfRangeAndUnwritableOutputsAreRefusedFirst) {
  const std::string src = SUPERSERVE_TEST_SOURCE_DIR;
  const std::string ck = "--checkpoint=" + src + "/models/fmnist/checkpoint.pt ";
  const std::string pr = "--profile=" + src + "/models/fmnist/profile.json ";
  for (const Case& c : {
           Case{"probe --threads=100000", "--threads=100000 must be in [1, 1024]"},
           Case{"calibrate " + ck + pr + "--calibration_images=-1 --output=/proc/superserve-ss/c.pt",
                "--calibration_images=-1 must be in"},
           Case{"search " + ck + "--search_calibration_images=0 --output_dir=/proc/superserve-ss",
                "--search_calibration_images=0 must be in"},
           Case{"train --weight_decay=nan --checkpoint=/proc/superserve-ss/n.pt", "--weight_decay=nan must be a finite"},
           Case{"train --warmup_epochs=-1 --checkpoint=/proc/superserve-ss/n.pt", "--warmup_epochs=-1 must be a finite"},
           Case{"train --learning_rate=inf --checkpoint=/proc/superserve-ss/n.pt", "--learning_rate=inf must be a finite"},
           Case{"train --batch_size=0 --checkpoint=/proc/superserve-ss/n.pt", "--batch_size=0 must be in"},
           Case{"train --checkpoint=/nonexistent-ss/n.pt",
                "--checkpoint /nonexistent-ss/n.pt: folder /nonexistent-ss does not exist"},
           Case{"train --checkpoint=/tmp", "--checkpoint /tmp: is a directory"},
           Case{"search " + ck + "--output_dir=/proc/superserve-ss", "--output_dir /proc/superserve-ss"},
           Case{"reprofile " + ck + pr + "--repeats=0", "--repeats=0 must be in"},
           Case{"reprofile " + ck + pr + "--output=/nonexistent-ss/p.json", "does not exist"},
       }) {
    ExpectRefused("superserve-nas", c);
  }
  // --previous_candidates=/dev/zero was read as one endless line.
  auto r = RunTool("superserve-nas", "search " + ck +
                                         "--previous_candidates=/dev/zero --output_dir=" +
                                         ::testing::TempDir() + "/nas_cli_test_search");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("/dev/zero: is a character device"), std::string::npos) << r.out;
  std::filesystem::remove_all(::testing::TempDir() + "/nas_cli_test_search");
}

// A checkpoint that is a FIFO blocked LibTorch's reader (and the tool)
// forever; every model loader now refuses what is not a regular file.
TEST(NasCli, ACheckpointThatIsAFifoIsRefusedNotWaitedOn) {
  const std::string fifo =
      ::testing::TempDir() + "/nas_cli_test_" + std::to_string(getpid()) + ".fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string pr =
      std::string(" --profile=") + SUPERSERVE_TEST_SOURCE_DIR + "/models/fmnist/profile.json";
  for (const auto& [tool, args] : std::vector<std::pair<std::string, std::string>>{
           {"superserve-nas", "eval --subnet=0 --checkpoint=" + fifo + pr},
           {"superserve-early-exit", "eval --checkpoint=" + fifo},
       }) {
    auto r = RunTool(tool, args);
    EXPECT_NE(r.status, 0) << tool << "\n" << r.out;
    EXPECT_NE(r.status, 124) << tool << ": waited on the FIFO";
    EXPECT_NE(r.out.find(fifo + ": is a FIFO"), std::string::npos) << tool << "\n" << r.out;
  }
  std::remove(fifo.c_str());
}

// The bundled profile has dominated subnets, which loading leaves out of the
// serving choices; their checkpoint slots are still there. calibrate used to
// refuse the profile ("slots need ids 0..30 in order") and eval said such a
// subnet "is not in the profile".
TEST(NasCli, CalibrateAndEvalAddressEverySlotADominatedOneToo) {
  const std::string src = SUPERSERVE_TEST_SOURCE_DIR;
  auto profile = ModelProfile::LoadFile(src + "/models/fmnist/profile.json");
  ASSERT_TRUE(profile.ok()) << profile.status();
  ASSERT_FALSE(profile->left_out.empty());
  const size_t every = profile->EverySubnet().size();
  const std::string out =
      ::testing::TempDir() + "/nas_cli_calibrated_" + std::to_string(getpid()) + ".pt";
  const std::string ck = " --checkpoint=" + src + "/models/fmnist/checkpoint.pt";
  const std::string pr = " --profile=" + src + "/models/fmnist/profile.json";
  auto calibrated = RunTool("superserve-nas", "calibrate" + ck + pr +
                                                  " --calibration_images=32 --json --output=" + out);
  ASSERT_EQ(calibrated.status, 0) << calibrated.out;
  EXPECT_NE(calibrated.out.find("\"slots\":" + std::to_string(every)), std::string::npos)
      << calibrated.out;
  const int dominated = profile->left_out.front().id;
  auto evaluated = RunTool("superserve-nas", "eval" + ck + pr + " --json --subnet=" +
                                                 std::to_string(dominated));
  EXPECT_EQ(evaluated.status, 0) << evaluated.out;
  EXPECT_NE(evaluated.out.find("\"matches_profile\":true"), std::string::npos) << evaluated.out;
  std::remove(out.c_str());
}

}  // namespace
}  // namespace superserve
