// A straggler with real processes (issue 15, slow worker): a router and two
// emulated workers on 127.0.0.1, one of them at 3x its profiled time
// (superserve-worker --slowdown=3). The same Poisson load runs twice: with
// per-worker latency estimates (the router's default) and without
// (--per_worker_speed=false).
//
// Asserted: the mechanism, as the router exports it. With per-worker
// estimates the straggler's superserve_worker_slowdown is well above 1 and
// the normal worker's is 1; without them both stay 1; every query gets one
// terminal answer. The profile is the emulated one at 10x its latencies
// (10-120 ms), so that a loaded host's late wake-ups (a few ms) cannot pass
// for a straggler or hide one. What the straggler then serves (lighter
// batches, faster subnets) and the attainment of both runs are printed for
// docs/faults.md, not asserted: on shared cores they move with the host's
// load. The comparison of attainment is asserted on the simulated clock
// (tests/serving/slow_worker_test.cc), where it is deterministic.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/harness/local_cluster.h"
#include "common/model_profile.h"
#include "common/model_repository.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

using testing::BinDir;
using testing::EmulatedRepo;
using testing::MakeWorkDir;
using testing::PoissonTrace;

LabelledRequests Inputs(int n) {
  LabelledRequests in;
  for (int i = 0; i < n; ++i) {
    auto req = std::make_shared<v1::InferRequest>();
    req->set_model("emu");
    EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 1.0f * i / n)),
                 req->mutable_input());
    in.requests.push_back(std::move(req));
    in.labels.push_back(i % 10);
  }
  return in;
}

struct PerWorker {
  int queries = 0;
  double batch_sum = 0;
  double profiled_ms_sum = 0;  // profiled latency of the tuple that served each query
  double accuracy_sum = 0;
};

struct Outcome {
  double attainment = 0;
  double mean_accuracy = 0;
  PerWorker normal, straggler;
  // superserve_worker_slowdown at the end of the run; -1: not exported.
  double normal_slowdown = -1, straggler_slowdown = -1;
};

constexpr int kLatencyScale = 10;

// The emulated model at kLatencyScale times its profiled latencies.
std::string SlowRepo() {
  const std::string repo = MakeWorkDir();
  std::filesystem::create_directory(repo + "/emu");
  std::filesystem::copy_file(EmulatedRepo() + "/emu/manifest.json", repo + "/emu/manifest.json");
  auto p = ModelProfile::LoadFile(EmulatedRepo() + "/emu/profile.json");
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return repo;
  for (SubnetProfile& subnet : p->subnets) {
    for (Nanos& l : subnet.latency) l *= kLatencyScale;
  }
  EXPECT_TRUE(p->SaveFile(repo + "/emu/profile.json").ok());
  return repo;
}

// The value of `metric{worker="<name>..."}` in a Prometheus text page (the
// router names a worker by its --name and a registration number); -1: absent.
double WorkerGauge(const std::string& page, const std::string& metric, const std::string& name) {
  const std::string key = absl::StrCat(metric, "{worker=\"", name);
  const size_t at = page.find(key);
  if (at == std::string::npos) return -1;
  const size_t value = page.find("} ", at);
  const size_t end = page.find('\n', at);
  double v = -1;
  if (value == std::string::npos || value > end ||
      !absl::SimpleAtod(page.substr(value + 2, end - value - 2), &v)) {
    return -1;
  }
  return v;
}

Outcome RunOnce(bool per_worker_speed, const std::string& repo, const ModelProfile& profile) {
  Outcome out;
  const std::string dir = MakeWorkDir();
  LocalClusterOptions o;
  o.bin_dir = BinDir();
  o.model_repo = repo;
  o.work_dir = dir;
  o.workers = 0;
  o.emulate = true;
  // Eager dispatch: at this load the default's pacing lets the normal worker
  // serve alone (load-proportional, docs/scheduling.md), and the straggler
  // must take batches for its estimates to be compared.
  o.router_flags = {absl::StrCat("--per_worker_speed=", per_worker_speed ? "true" : "false"),
                    "--ratefit_pace=0"};
  auto cluster = LocalCluster::Start(o);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return out;
  EXPECT_TRUE((*cluster)->AddWorker({"--name=normal"}).ok());
  EXPECT_TRUE((*cluster)->AddWorker({"--name=straggler", "--slowdown=3"}).ok());
  EXPECT_TRUE((*cluster)->WaitForWorkers(2, Seconds(20)).ok()) << "see " << dir;
  InferenceClient client((*cluster)->router_address());
  EXPECT_TRUE(client.WaitForConnected(Seconds(5)));
  ReplayOptions ro;
  ro.default_slo = Millis(25 * kLatencyScale);
  ro.progress = false;
  constexpr int kQueries = 2400;
  auto records = ReplayTrace(client, PoissonTrace(kQueries, 400, 9), Inputs(20), ro);
  EXPECT_TRUE(records.ok()) << records.status();
  if (!records.ok()) return out;
  int ok = 0;
  double acc = 0;
  for (const QueryRecord& r : *records) {
    EXPECT_TRUE(r.answered);
    if (r.in_slo) {
      ++ok;
      acc += r.accuracy;
    }
    if (r.code != absl::StatusCode::kOk) continue;
    PerWorker& w = absl::StartsWith(r.worker, "straggler") ? out.straggler : out.normal;
    w.queries++;
    w.batch_sum += r.batch_size;
    w.accuracy_sum += r.accuracy;
    const int s = profile.SubnetIndex(r.subnet_id);
    int b = 0;
    while (b + 1 < static_cast<int>(profile.batch_sizes.size()) &&
           profile.batch_sizes[b] < r.batch_size) {
      ++b;
    }
    if (s >= 0) w.profiled_ms_sum += ToMillis(profile.subnets[s].latency[b]);
  }
  out.attainment = static_cast<double>(ok) / kQueries;
  out.mean_accuracy = ok > 0 ? acc / ok : 0;
  // The gauges are refreshed every 500 ms of a tick; the trace ran 6 s.
  auto page = (*cluster)->ScrapeMetrics();
  EXPECT_TRUE(page.ok()) << page.status();
  if (page.ok()) {
    out.normal_slowdown = WorkerGauge(*page, "superserve_worker_slowdown", "normal");
    out.straggler_slowdown = WorkerGauge(*page, "superserve_worker_slowdown", "straggler");
  }
  return out;
}

void Print(const char* label, const Outcome& o) {
  auto line = [](const PerWorker& w) {
    const double n = std::max(1, w.queries);
    return absl::StrCat(w.queries, " queries, mean batch ", w.batch_sum / n, ", mean profiled ",
                        w.profiled_ms_sum / n, " ms, mean accuracy ", w.accuracy_sum / n);
  };
  std::printf(
      "%s: attainment %.4f, mean accuracy %.2f\n  normal:    %s, slowdown %.2f\n  straggler: %s, "
      "slowdown %.2f\n",
      label, o.attainment, o.mean_accuracy, line(o.normal).c_str(), o.normal_slowdown,
      line(o.straggler).c_str(), o.straggler_slowdown);
}

TEST(SlowWorkerIntegration, TheRouterMeasuresTheStragglerAsSlowerOnlyWithPerWorkerEstimates) {
  const std::string repo = SlowRepo();
  auto models = LoadModelRepository(repo);
  ASSERT_TRUE(models.ok() && !models->empty()) << (models.ok() ? "empty" : models.status().ToString());
  const ModelProfile& profile = models->front().profile;
  const Outcome on = RunOnce(true, repo, profile);
  const Outcome off = RunOnce(false, repo, profile);
  Print("per-worker estimates", on);
  Print("shared estimates    ", off);
  ASSERT_GT(on.straggler.queries, 0) << "the straggler served nothing: no speed to measure";
  // The normal worker is the fleet's reference (the lower median): exactly 1.
  EXPECT_EQ(on.normal_slowdown, 1.0);
  // 3x in truth; 1.5 leaves room for late wake-ups on a loaded host, and is
  // past the deadband (1.25) below which a worker counts as normal.
  EXPECT_GE(on.straggler_slowdown, 1.5);
  // Off: nobody is measured, everyone is planned with the profile.
  EXPECT_EQ(off.normal_slowdown, 1.0);
  EXPECT_EQ(off.straggler_slowdown, 1.0);
  // Every query got exactly one terminal answer (checked per record above).
}

}  // namespace
}  // namespace superserve
