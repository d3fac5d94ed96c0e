// A straggler with real processes (issue 15, slow worker): a router and two
// emulated workers on 127.0.0.1, one of them at 3x its profiled time
// (superserve-worker --slowdown=3). The same Poisson load runs twice: with
// per-worker latency estimates (the router's default) and without
// (--per_worker_speed=false). With them the straggler's batches are lighter
// (smaller batches, faster subnets: less profiled time per batch) than the
// normal worker's (asserted); the attainment of both runs is printed for
// docs/faults.md.
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/harness/local_cluster.h"
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
};

Outcome RunOnce(bool per_worker_speed, const ModelProfile& profile) {
  Outcome out;
  const std::string dir = MakeWorkDir();
  LocalClusterOptions o;
  o.bin_dir = BinDir();
  o.model_repo = EmulatedRepo();
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
  ro.default_slo = Millis(25);
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
  return out;
}

void Print(const char* label, const Outcome& o) {
  auto line = [](const PerWorker& w) {
    const double n = std::max(1, w.queries);
    return absl::StrCat(w.queries, " queries, mean batch ", w.batch_sum / n, ", mean profiled ",
                        w.profiled_ms_sum / n, " ms, mean accuracy ", w.accuracy_sum / n);
  };
  std::printf("%s: attainment %.4f, mean accuracy %.2f\n  normal:    %s\n  straggler: %s\n", label,
              o.attainment, o.mean_accuracy, line(o.normal).c_str(), line(o.straggler).c_str());
}

TEST(SlowWorkerIntegration, TheStragglerGetsLighterBatchesWithPerWorkerEstimates) {
  auto repo = LoadModelRepository(EmulatedRepo());
  ASSERT_TRUE(repo.ok() && !repo->empty());
  const ModelProfile& profile = repo->front().profile;
  const Outcome on = RunOnce(true, profile);
  const Outcome off = RunOnce(false, profile);
  Print("per-worker estimates", on);
  Print("shared estimates    ", off);
  ASSERT_GT(on.straggler.queries, 0) << "the straggler served nothing";
  ASSERT_GT(on.normal.queries, 0);
  const double straggler_ms = on.straggler.profiled_ms_sum / on.straggler.queries;
  const double normal_ms = on.normal.profiled_ms_sum / on.normal.queries;
  // (a) Lighter work for the straggler: per query it served, the tuple's
  // profiled time is below the normal worker's.
  EXPECT_LT(straggler_ms, normal_ms);
  // (b) Attainment on vs off is printed, not asserted here: with a 25 ms
  // real-time SLO on 2 shared cores both move with the machine's load (at a
  // load average of 8-13, on: 1.00, 1.00, 1.00, 0.98; off: 1.00, 0.91,
  // 1.00, 1.00; docs/faults.md). The comparison is asserted on the simulated
  // clock (tests/serving/slow_worker_test.cc), where it is deterministic.
  // Every query got exactly one terminal answer (checked per record above).
}

}  // namespace
}  // namespace superserve
