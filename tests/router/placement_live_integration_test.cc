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
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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

// A router and one emulated worker whose 1 MiB budget holds one of the two
// models; returns once the worker is registered (logs under `dir`).
std::unique_ptr<LocalCluster> StartBudgetedCluster(const std::string& dir) {
  LocalClusterOptions o;
  o.bin_dir = BinDir();
  o.model_repo = TwoModelRepo();
  o.work_dir = dir;
  o.workers = 0;
  o.emulate = true;
  auto cluster = LocalCluster::Start(o);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return nullptr;
  EXPECT_TRUE((*cluster)->AddWorker({"--name=budgeted", "--memory_budget_mb=1"}).ok());
  // The models have no worker until one is loaded: wait for the worker.
  bool alive = false;
  for (int i = 0; i < 400 && !alive; ++i) {
    alive = absl::StrContains((*cluster)->ScrapeMetrics().value_or(""),
                              "superserve_workers_alive 1");
    if (!alive) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(alive) << "see " << dir;
  return alive ? *std::move(cluster) : nullptr;
}

v1::InferRequest QueryFor(const std::string& model) {
  v1::InferRequest req;
  req.set_model(model);
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)),
               req.mutable_input());
  return req;
}

TEST(PlacementLive, ABudgetedWorkerLoadsAndUnloadsAsQueriesAlternate) {
  const std::string dir = MakeWorkDir();
  std::unique_ptr<LocalCluster> cluster = StartBudgetedCluster(dir);
  ASSERT_NE(cluster, nullptr);
  InferenceClient client(cluster->router_address());
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  constexpr int kQueries = 12;
  int ok = 0;
  for (int i = 0; i < kQueries; ++i) {
    const v1::InferRequest req = QueryFor(i % 2 == 0 ? "ma" : "mb");
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

// Both models' queries at once: while one model's batch runs (or its
// queries wait) the worker has no room for the other, whose queries wait
// for room instead of failing UNAVAILABLE.
TEST(PlacementLive, QueriesForAModelWithNoRoomNowWaitForIt) {
  const std::string dir = MakeWorkDir();
  std::unique_ptr<LocalCluster> cluster = StartBudgetedCluster(dir);
  ASSERT_NE(cluster, nullptr);
  InferenceClient client(cluster->router_address());
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  constexpr int kQueries = 16;
  absl::Mutex mu;
  std::vector<absl::Status> answers;
  for (int i = 0; i < kQueries; ++i) {
    auto req = std::make_shared<const v1::InferRequest>(QueryFor(i % 2 == 0 ? "ma" : "mb"));
    // Deadlines far beyond the 16 loads and batches this takes.
    client.InferAsync(req, Seconds(20), [&](InferenceClient::Result r) {
      absl::MutexLock lock(&mu);
      answers.push_back(r.status);
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() { return answers.size() == static_cast<size_t>(kQueries); };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(60)))
        << answers.size() << " answered; see " << dir;
    for (const absl::Status& st : answers) EXPECT_TRUE(st.ok()) << st << "; see " << dir;
  }
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
