// Symphony live (issue 19, item 7): superserve-router with --policy symphony
// serves three models on four emulated worker instances. At low load the
// deferred batches run on the lowest ids and the other instances stay idle;
// near the peak every instance is used; both with attainment >= 0.999.
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
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"
#include "router/client/local_cluster.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

constexpr int kModels = 3;
constexpr int kInstances = 4;

// ℓ(b) = 50 + 10·b ms at b = 1..32 (powers of two, as profiles on disk
// are): a strong batching effect; with SLO 400 ms the staggered batch for
// four workers is 16 (1.25 · ℓ(16) = 262 ms), a peak of ~300 q/s.
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
  double attainment = 0;
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
  for (const auto& r : *records) {
    EXPECT_TRUE(r.answered);
    ++codes[static_cast<int>(r.code)];
    if (r.code != absl::StatusCode::kOk) continue;
    p.workers.insert(r.worker);
    ++ok;
    batched += r.batch_size;
    if (!r.in_slo) ++late;
  }
  ReplaySummary s = Summarize(*records);
  p.summary = absl::StrCat(s.ToJson(), " late ", late, " mean batch ",
                           ok ? static_cast<double>(batched) / ok : 0.0, " codes");
  for (const auto& [code, n] : codes) absl::StrAppend(&p.summary, " ", code, ":", n);
  p.attainment = s.slo_attainment;
  p.queries = s.queries;
  return p;
}

TEST(SymphonyLive, IdleInstancesStayIdleAtLowLoadAndAllServeNearThePeak) {
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
  o.router_flags = {"--overhead_quantile=0.95", "--initial_overhead_us=20000"};
  auto cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  InferenceClient client((*cluster)->router_address(), Transport::kUnary);
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));

  // ~7 % of the peak: one instance has room for all of it.
  Phase low = Replay(client, 120, 20, 11);
  EXPECT_EQ(low.queries, 120);
  EXPECT_GE(low.attainment, 0.999) << low.summary;
  EXPECT_LE(low.workers.size(), 2u) << "deferred batches go to the lowest free ids";

  // ~70 % of the peak: every instance is needed.
  Phase high = Replay(client, 1200, 210, 12);
  EXPECT_EQ(high.queries, 1200);
  EXPECT_GE(high.attainment, 0.999) << high.summary;
  EXPECT_EQ(high.workers.size(), static_cast<size_t>(kInstances));
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
