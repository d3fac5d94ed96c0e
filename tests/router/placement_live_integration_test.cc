// Placement with real processes (issue 43, docs/engine.md "Placement"): a
// router and one emulated worker whose --memory_budget_mb holds one of two
// models (each profile states 700 KiB and a 20 ms load). Queries alternating
// between the models make the worker load and unload them on the router's
// LoadModel / UnloadModel; every query gets one answer, OK or
// DEADLINE_EXCEEDED with a reason, and none reaches the worker before its
// model (the worker would answer it NOT_FOUND, "model ... is not loaded").
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/harness/local_cluster.h"
#include "common/subprocess.h"
#include "common/model_profile.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

using testing::BinDir;
using testing::EmulatedRepo;
using testing::MakeWorkDir;
using testing::ReadAll;

constexpr int64_t kFootprint = 700 << 10;

// Models "ma" and "mb": the emulated model, each stating kFootprint bytes
// and a 20 ms load.
std::string TwoModelRepo() {
  namespace fs = std::filesystem;
  const std::string repo = MakeWorkDir();
  for (const std::string name : {"ma", "mb"}) {
    fs::create_directory(repo + "/" + name);
    std::string manifest = ReadAll(EmulatedRepo() + "/emu/manifest.json");
    manifest.replace(manifest.find("\"emu\""), 5, "\"" + name + "\"");
    std::ofstream(repo + "/" + name + "/manifest.json") << manifest;
    auto p = ModelProfile::LoadFile(EmulatedRepo() + "/emu/profile.json");
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) continue;
    p->model = name;
    p->memory_bytes = kFootprint;
    p->load_time = Millis(20);
    EXPECT_TRUE(p->SaveFile(repo + "/" + name + "/profile.json").ok());
  }
  return repo;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PlacementLive, ABudgetedWorkerLoadsAndUnloadsAsQueriesAlternate) {
  const std::string dir = MakeWorkDir();
  LocalClusterOptions o;
  o.bin_dir = BinDir();
  o.model_repo = TwoModelRepo();
  o.work_dir = dir;
  o.workers = 0;
  o.emulate = true;
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->AddWorker({"--name=budgeted", "--memory_budget_mb=1"}).ok());
  // The models have no worker until one is loaded: wait for the worker.
  bool alive = false;
  for (int i = 0; i < 400 && !alive; ++i) {
    alive = absl::StrContains((*cluster)->ScrapeMetrics().value_or(""),
                              "superserve_workers_alive 1");
    if (!alive) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(alive) << "see " << dir;
  InferenceClient client((*cluster)->router_address());
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  constexpr int kQueries = 12;
  int ok = 0;
  for (int i = 0; i < kQueries; ++i) {
    v1::InferRequest req;
    req.set_model(i % 2 == 0 ? "ma" : "mb");
    EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)),
                 req.mutable_input());
    // A deadline far beyond a load and a batch (tens of ms): a late answer
    // would take a host stalled for seconds.
    auto r = client.Infer(req, Seconds(10));
    if (r.ok()) {
      ++ok;
      EXPECT_TRUE(absl::StartsWith(r->served_by().worker(), "budgeted")) << r->served_by().worker();
      continue;
    }
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
        << "query " << i << ": " << r.status();
    EXPECT_FALSE(r.status().message().empty());
    EXPECT_FALSE(absl::StrContains(r.status().message(), "not loaded")) << r.status();
  }
  const std::string worker_log = ReadAll(dir + "/worker0.log");
  if (ok == kQueries) {
    // Each answer came from a load, and two models never fit at once.
    EXPECT_GE(Count(worker_log, "(placement)"), kQueries) << worker_log;
    EXPECT_GE(Count(worker_log, " unloaded"), kQueries - 1) << worker_log;
  }
  // The footprint the worker measured (its profile's, emulated) and reported.
  EXPECT_TRUE(absl::StrContains(worker_log, absl::StrCat(kFootprint, " bytes (placement)")))
      << worker_log;
  EXPECT_FALSE(absl::StrContains(worker_log, "is not loaded")) << worker_log;
  EXPECT_FALSE(absl::StrContains(worker_log, "not loaded:")) << "a load failed:\n" << worker_log;
}

TEST(PlacementLive, WorkerHelpListsTheMemoryBudget) {
  const std::string log = MakeWorkDir() + "/help.txt";
  auto p = Subprocess::Start({BinDir() + "/superserve-worker", "--help"}, log);
  ASSERT_TRUE(p.ok());
  auto st = p->Wait(Seconds(10));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  auto text = WaitForFile(log, Seconds(1));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(absl::StrContains(*text, "--memory_budget_mb")) << *text;
}

}  // namespace
}  // namespace superserve
