// Symphony live (issue 19, item 7): superserve-router with --policy symphony
// serves three models on eight emulated worker instances. At low load the
// deferred batches run on the lowest ids and most instances stay idle; at
// high load every instance is used. Every query is served or refused as late;
// how many in time is printed, not asserted (under real time it measures the
// host, not the policy).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/harness/local_cluster.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

constexpr int kModels = 3;
constexpr int kInstances = 8;

// ℓ(b) = 50 + 10·b ms at b = 1..32 (powers of two, as profiles on disk
// are): a strong batching effect; with SLO 400 ms each instance runs
// batches of 16 in 210 ms, a peak of ~610 q/s for eight.
std::string WriteRepo() {
  const std::string repo = testing::MakeWorkDir() + "/repo";
  for (int m = 0; m < kModels; ++m) {
    const std::string dir = absl::StrCat(repo, "/lin", m);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/profile.json") << absl::StrCat(
        R"json({"model": "lin)json", m, R"json(", "family": "emulated", "batchSizes": [1, 2, 4, 8, 16, 32],
  "inputShape": ["1", "28", "28"], "numClasses": 10,
  "measuredOn": "synthetic linear profile (Symphony live test)",
  "subnets": [{"id": 0, "accuracy": 80.0, "control": {"subnetId": 0, "depths": [0, 0]},
               "latencyUs": [60000, 70000, 90000, 130000, 210000, 370000]}]})json");
  }
  return repo;
}

LabelledRequests Inputs() {
  LabelledRequests in;
  for (int i = 0; i < 3 * kModels; ++i) {  // round robin over the models
    auto req = std::make_shared<v1::InferRequest>();
    req->set_model(absl::StrCat("lin", i % kModels));
    EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.5f)),
                 req->mutable_input());
    in.requests.push_back(std::move(req));
    in.labels.push_back(0);
  }
  return in;
}

struct Phase {
  std::string summary;  // codes, batch sizes, latencies: what the failure message shows
  std::set<std::string> workers;
  int64_t queries = 0;
};

Phase Replay(InferenceClient& client, int n, double qps, uint32_t seed) {
  ReplayOptions ro;
  ro.default_slo = Millis(400);
  ro.progress = false;
  auto records = ReplayTrace(client, testing::PoissonTrace(n, qps, seed), Inputs(), ro);
  EXPECT_TRUE(records.ok()) << records.status();
  Phase p;
  if (!records.ok()) return p;
  std::map<int, int> codes;
  int64_t late = 0, batched = 0, ok = 0;
  std::string late_rows;
  for (const auto& r : *records) {
    EXPECT_TRUE(r.answered);
    // Served or refused as late; how many in time is the host's speed.
    EXPECT_TRUE(r.code == absl::StatusCode::kOk || r.code == absl::StatusCode::kDeadlineExceeded)
        << absl::StatusCodeToString(r.code);
    ++codes[static_cast<int>(r.code)];
    if (r.code != absl::StatusCode::kOk) continue;
    p.workers.insert(r.worker);
    ++ok;
    batched += r.batch_size;
    if (!r.in_slo) {
      ++late;
      absl::StrAppend(&late_rows, " [sent ", r.sent / 1000000, " ms, latency ",
                      r.latency / 1000000, " ms, queue ", r.queue_us / 1000, " ms, exec ",
                      r.exec_us / 1000, " ms, batch ", r.batch_size, ", ", r.worker, "]");
    }
  }
  ReplaySummary s = Summarize(*records);
  p.summary = absl::StrCat(s.ToJson(), " late ", late, late_rows, " mean batch ",
                           ok ? static_cast<double>(batched) / ok : 0.0, " codes");
  for (const auto& [code, n] : codes) absl::StrAppend(&p.summary, " ", code, ":", n);
  p.queries = s.queries;
  return p;
}

TEST(SymphonyLive, IdleInstancesStayIdleAtLowLoadAndAllServeAtHighLoad) {
  LocalClusterOptions o;
  o.bin_dir = testing::BinDir();
  o.model_repo = WriteRepo();
  o.work_dir = testing::MakeWorkDir();
  o.policy = "symphony";
  o.workers = 1;
  o.instances_per_worker = kInstances;
  o.emulate = true;
  o.startup_timeout = Seconds(20);
  // Deferral dispatches at the last feasible moment, so the dispatch
  // overhead it plans for is a high percentile of the measured one (on
  // shared cores the median leaves the tail late), and it starts from a
  // pessimistic guess until telemetry arrives.
  o.router_flags = {"--overhead_quantile=0.99", "--initial_overhead_us=20000"};
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  InferenceClient client((*cluster)->router_address(), Transport::kUnary);
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));

  // ~3 % of the peak (~610 q/s: eight instances at batch 16): each model's
  // deferred batch runs alone, so at most one instance per model is busy at a
  // time and, taking the lowest free id, the same few instances serve it all.
  Phase low = Replay(client, 120, 20, 11);
  EXPECT_EQ(low.queries, 120);
  EXPECT_LE(low.workers.size(), static_cast<size_t>(kModels))
      << "deferred batches go to the lowest free ids; " << kInstances - kModels
      << " of " << kInstances << " instances should stay idle";

  // ~65 % of the peak: every instance is needed.
  Phase high = Replay(client, 2400, 400, 12);
  EXPECT_EQ(high.queries, 2400);
  EXPECT_EQ(high.workers.size(), static_cast<size_t>(kInstances)) << high.summary;
  if (getenv("SYMPHONY_LIVE_DEBUG") != nullptr) {
    auto metrics = (*cluster)->ScrapeMetrics();
    if (metrics.ok()) {
      for (absl::string_view line : absl::StrSplit(*metrics, '\n')) {
        if (absl::StrContains(line, "queries_total") || absl::StrContains(line, "batch_size_sum") ||
            absl::StrContains(line, "batch_size_count")) {
          printf("%s\n", std::string(line).c_str());
        }
      }
    }
  }
}

}  // namespace
}  // namespace superserve
