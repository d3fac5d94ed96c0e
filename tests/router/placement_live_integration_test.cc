// Placement with real processes (issue 43, docs/engine.md "Placement"): a
// router and one emulated worker whose --memory_budget_mb holds one of two
// models (each profile states 700 KiB and a 20 ms load). Queries alternating
// between the models make the worker load and unload them on the router's
// LoadModel / UnloadModel; every query gets one answer, OK or
// DEADLINE_EXCEEDED with a reason, and none reaches the worker before its
// model (the worker would answer it NOT_FOUND, "model ... is not loaded").
// A model hot-registered on such a worker (and a second version of it) is
// stored there and loaded, evicted and loaded again the same way.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
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
#include "superserve/v1/admin.grpc.pb.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

using testing::BinDir;
using testing::EmulatedRepo;
using testing::MakeWorkDir;
using testing::ReadAll;

constexpr int64_t kFootprint = 700 << 10;

// <dir>/<name>/: the emulated model as `name`, manifest version `version`,
// stating kFootprint bytes and a 20 ms load.
void WriteEmulatedPackage(const std::string& dir, const std::string& name, int version) {
  std::filesystem::create_directories(dir + "/" + name);
  std::string manifest = ReadAll(EmulatedRepo() + "/emu/manifest.json");
  manifest.replace(manifest.find("\"emu\""), 5, "\"" + name + "\"");
  manifest.replace(manifest.find("\"version\": 1"), 12, absl::StrCat("\"version\": ", version));
  std::ofstream(dir + "/" + name + "/manifest.json") << manifest;
  auto p = ModelProfile::LoadFile(EmulatedRepo() + "/emu/profile.json");
  ASSERT_TRUE(p.ok()) << p.status();
  p->model = name;
  p->memory_bytes = kFootprint;
  p->load_time = Millis(20);
  EXPECT_TRUE(p->SaveFile(dir + "/" + name + "/profile.json").ok());
}

// Models "ma" and "mb".
std::string TwoModelRepo() {
  const std::string repo = MakeWorkDir();
  for (const std::string name : {"ma", "mb"}) WriteEmulatedPackage(repo, name, 1);
  return repo;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Lines of `text` holding both `a` and `b`.
int CountLines(const std::string& text, const std::string& a, const std::string& b) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (absl::StrContains(line, a) && absl::StrContains(line, b)) ++n;
  }
  return n;
}

// A router serving `repo` and one emulated worker whose 1 MiB budget holds
// one model; returns once the worker is registered (logs under `dir`).
std::unique_ptr<LocalCluster> StartBudgetedCluster(const std::string& dir,
                                                   const std::string& repo) {
  LocalClusterOptions o;
  o.bin_dir = BinDir();
  o.model_repo = repo;
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

// A query for `model` (`version` 0: the current one).
v1::InferRequest QueryFor(const std::string& model, uint32_t version = 0) {
  v1::InferRequest req;
  req.set_model(model);
  req.set_model_version(version);
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)),
               req.mutable_input());
  return req;
}

TEST(PlacementLive, ABudgetedWorkerLoadsAndUnloadsAsQueriesAlternate) {
  const std::string dir = MakeWorkDir();
  std::unique_ptr<LocalCluster> cluster = StartBudgetedCluster(dir, TwoModelRepo());
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

// Issue 43 with hot registration: the worker's budget holds one model; "ma"
// is in its repository, "mb" is registered at run time (Admin.RegisterModel)
// and later its version 2 ("mb@2"). The worker stores each package and the
// router loads it on demand; queries alternating between the models make it
// evict the hot model and load it again from the stored package. Before the
// fix the hot model was loaded outside the budget and placement's load of
// it failed ("not in this worker's repository": queries UNAVAILABLE).
TEST(PlacementLive, AHotRegisteredModelIsStoredEvictedAndLoadedAgainWithinTheBudget) {
  const std::string dir = MakeWorkDir();
  const std::string repo = MakeWorkDir();
  WriteEmulatedPackage(repo, "ma", 1);
  const std::string v1_dir = MakeWorkDir(), v2_dir = MakeWorkDir();
  WriteEmulatedPackage(v1_dir, "mb", 1);
  WriteEmulatedPackage(v2_dir, "mb", 2);
  std::unique_ptr<LocalCluster> cluster = StartBudgetedCluster(dir, repo);
  ASSERT_NE(cluster, nullptr);
  auto admin = v1::Admin::NewStub(
      grpc::CreateChannel(cluster->router_address(), grpc::InsecureChannelCredentials()));
  auto register_package = [&](const std::string& path) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + cluster->admin_token());
    v1::RegisterModelRequest req;
    req.set_path(path);
    req.set_timeout_ms(20000);
    v1::RegisterModelResponse resp;
    grpc::Status s = admin->RegisterModel(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(resp.visible()) << resp.DebugString();
  };
  InferenceClient client(cluster->router_address());
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  int answered = 0, ok = 0;
  // `version` 0: the current one.
  auto query = [&](const std::string& model, uint32_t version) {
    auto r = client.Infer(QueryFor(model, version), Seconds(10));  // far beyond a load and a batch
    ++answered;
    if (r.ok()) {
      ++ok;
      return;
    }
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
        << model << " v" << version << ": " << r.status();
    EXPECT_FALSE(r.status().message().empty());
    EXPECT_FALSE(absl::StrContains(r.status().message(), "repository")) << r.status();
  };
  query("ma", 0);  // "ma" resident when "mb" is registered
  register_package(v1_dir + "/mb");
  for (int i = 0; i < 8; ++i) query(i % 2 == 0 ? "mb" : "ma", 0);
  register_package(v2_dir + "/mb");
  // ma, mb (current: mb@2), mb version 1 (mb), in turn.
  for (int i = 0; i < 9; ++i) query(i % 3 == 0 ? "ma" : "mb", i % 3 == 2 ? 1 : 0);
  EXPECT_EQ(answered, 18);
  const std::string log = ReadAll(dir + "/worker0.log");
  EXPECT_EQ(CountLines(log, "model mb stored", "hot registration"), 1) << log;
  EXPECT_EQ(CountLines(log, "model mb@2 stored", "hot registration"), 1) << log;
  // Loaded by placement, within the budget, evicted, and loaded again.
  EXPECT_GE(CountLines(log, "model mb loaded in", "(placement)"), 2) << log;
  EXPECT_GE(Count(log, "model mb unloaded"), 1) << log;
  EXPECT_GE(CountLines(log, "model mb@2 loaded in", "(placement)"), 2) << log;
  EXPECT_EQ(Count(log, "(hot registration)"), 0) << "loaded outside the budget:\n" << log;
  EXPECT_FALSE(absl::StrContains(log, "not in this worker's repository")) << log;
  EXPECT_FALSE(absl::StrContains(log, "not loaded:")) << "a load failed:\n" << log;
  EXPECT_FALSE(absl::StrContains(log, "is not loaded")) << log;
  if (ok == answered) {
    // Every mb and mb@2 query after the first needed a load (the budget
    // holds one model).
    EXPECT_GE(CountLines(log, "model mb loaded in", "(placement)"), 4) << log;
  }
}

// Both models' queries at once: while one model's batch runs (or its
// queries wait) the worker has no room for the other, whose queries wait
// for room instead of failing UNAVAILABLE.
TEST(PlacementLive, QueriesForAModelWithNoRoomNowWaitForIt) {
  const std::string dir = MakeWorkDir();
  std::unique_ptr<LocalCluster> cluster = StartBudgetedCluster(dir, TwoModelRepo());
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
