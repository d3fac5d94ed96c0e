// superserve-worker's flag checks (runs the binary; every case fails before
// any model is loaded or any router dialled, in well under a second).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "common/model_profile.h"
#include "tests/cli_run.h"

namespace superserve {
namespace {

using testing::RunTool;

// Flags that used to be accepted and then misbehave: --threads=1000000
// started tens of thousands of threads and hung deaf to SIGTERM; 0 and
// negative counts were silently 1; --instances=10^8 tried as many links; a
// NaN, infinite or huge --connect_timeout_s overflowed into "wait forever";
// an infinite --slowdown was accepted.
TEST(WorkerCli, OutOfRangeFlagsAreRefusedNamingTheFlag) {
  const std::string repo = std::string("--model_repo=") + SUPERSERVE_TEST_SOURCE_DIR + "/models" +
                           " --router=127.0.0.1:1 --connect_timeout_s=0.1 --reconnect=false ";
  struct Case {
    std::string flags;
    std::string named;
  };
  for (const Case& c : {
           Case{"--threads=1000000", "--threads=1000000 must be in [1, 1024]"},
           Case{"--threads=0", "--threads=0 must be in [1, 1024]"},
           Case{"--threads=-3", "--threads=-3 must be in [1, 1024]"},
           Case{"--emulate --instances=100000000", "--instances=100000000 must be in [1, 4096]"},
           Case{"--emulate --instances=0", "--instances=0 must be in [1, 4096]"},
           Case{"--connect_timeout_s=nan", "--connect_timeout_s=nan must be a finite"},
           Case{"--connect_timeout_s=inf", "--connect_timeout_s=inf must be a finite"},
           Case{"--connect_timeout_s=1e300", "--connect_timeout_s=1e+300 must be a finite"},
           Case{"--emulate --slowdown=inf", "--slowdown=inf must be in (0, 1000]"},
           Case{"--emulate --slowdown=nan", "--slowdown=nan must be in (0, 1000]"},
           Case{"--emulate --slowdown=0", "--slowdown=0 must be in (0, 1000]"},
           Case{"--memory_budget_mb=-1", "--memory_budget_mb=-1 must be in [0, 1073741824]"},
           // Read until memory ran out (std::bad_alloc, SIGABRT); a FIFO blocked.
           Case{"--tls_ca_file=/dev/zero", "cannot read --tls_ca_file /dev/zero: "},
       }) {
    auto r = RunTool("superserve-worker", repo + c.flags);
    EXPECT_EQ(r.status, 2) << c.flags << "\n" << r.out;
    EXPECT_NE(r.out.find(c.named), std::string::npos) << c.flags << "\n" << r.out;
    EXPECT_EQ(r.out.find("loaded "), std::string::npos) << c.flags << ": checked before loading";
  }
}

// --models=fmnist,fmnsit loaded fmnist and said nothing about the typo;
// --measure_profiles_to a folder that cannot be created failed only after
// every subnet had been measured (minutes).
TEST(WorkerCli, UnknownModelNamesAndUnwritableMeasureFoldersAreRefusedFirst) {
  const std::string repo = std::string("--model_repo=") + SUPERSERVE_TEST_SOURCE_DIR + "/models" +
                           " --router=127.0.0.1:1 --connect_timeout_s=0.1 --reconnect=false ";
  auto r = RunTool("superserve-worker", repo + "--models=fmnist,fmnsit");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--models: fmnsit is not in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(it holds: fmnist"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("loaded fmnist"), std::string::npos) << r.out;

  r = RunTool("superserve-worker",
              repo + "--models=fmnist --measure_profiles_to=/proc/superserve-no-such-dir/out");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--measure_profiles_to /proc/superserve-no-such-dir/out: cannot create"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("loaded fmnist"), std::string::npos) << r.out;
}

// --measure_profiles_to measured and wrote only the subnets loading had kept
// as choices: on the bundled model, whose CPU figures leave 69 of its 100
// slots dominated, a GPU measurement came back with 31 subnets. The bundled
// model here with one batch size (so the measuring takes a second).
TEST(WorkerCli, MeasureProfilesMeasuresAndWritesEverySlotTheDominatedOnesToo) {
  namespace fs = std::filesystem;
  std::string tmpl = ::testing::TempDir() + "superserve-measure-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path root(tmpl);
  const fs::path pkg = root / "repo" / "fmnist";
  fs::create_directories(pkg);
  const fs::path src = fs::path(SUPERSERVE_TEST_SOURCE_DIR) / "models" / "fmnist";
  fs::copy(src / "manifest.json", pkg / "manifest.json");
  fs::copy(src / "checkpoint.pt", pkg / "checkpoint.pt");
  std::stringstream in;
  in << std::ifstream(src / "profile.json").rdbuf();
  // Batch sizes [1]; each latency list cut to its batch-1 figure.
  std::string json = std::regex_replace(in.str(), std::regex(R"("batch_sizes":\s*\[[^\]]*\])"),
                                        R"("batch_sizes": [1])");
  json = std::regex_replace(json, std::regex(R"(("latency_us":\s*\[[^,\]]*)[^\]]*\])"), "$1]");
  std::ofstream(pkg / "profile.json") << json;
  auto before = ModelProfile::LoadFile((pkg / "profile.json").string());
  ASSERT_TRUE(before.ok()) << before.status();
  const size_t slots = before->EverySubnet().size();
  ASSERT_EQ(slots, 100u);
  ASSERT_FALSE(before->left_out.empty()) << "the case needs a slot left out as dominated";

  auto r = RunTool("superserve-worker", "--model_repo=" + (root / "repo").string() +
                                            " --models=fmnist --threads=1 --measure_profiles_to=" +
                                            (root / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  auto after = ModelProfile::LoadFile((root / "out" / "fmnist" / "profile.json").string());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->EverySubnet().size(), slots) << r.out;
  EXPECT_EQ(after->batch_sizes, std::vector<int32_t>{1});
  EXPECT_NE(r.out.find("measured fmnist on cpu: 100 subnets ("), std::string::npos) << r.out;
  fs::remove_all(root);
}

TEST(WorkerCli, DeviceNamesThisBuildCannotServeAreRefusedWithAMessage) {
  const std::string repo = std::string("--model_repo=") + SUPERSERVE_TEST_SOURCE_DIR + "/models" +
                           " --models=fmnist --router=127.0.0.1:1 --connect_timeout_s=0.1 ";
  for (const std::string device : {"gpu", "", "cuda:-1", "mps"}) {
    auto r = RunTool("superserve-worker", repo + "--device=" + device);
    EXPECT_EQ(r.status, 1) << device << "\n" << r.out;
    EXPECT_NE(r.out.find("device \"" + device + "\""), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace superserve
