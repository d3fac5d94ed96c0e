// superserve-bench registration: how long a model registered at run time
// takes to answer, against a worker that loads the same package at start-up
// (the baseline, same run), while another model keeps serving (issue 17).
//
// One router, one torch worker, the bundled models/fmnist (run from the
// source tree, or set SUPERSERVE_SOURCE_DIR):
//   cold_start_ms: a worker process started with the package in its
//     repository, from its start until the first successful answer;
//   register_to_first_answer_ms: Admin.RegisterModel of a copy of the
//     package under another name (the running worker loads it over its
//     stream) until its first successful answer;
//   failed_queries_other_models: fmnist queries (Poisson, throughout the
//     registration) not answered OK within their SLO's deadline.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "bench/benchmark_registry.h"
#include "bench/benchmarks/grpc/emulated_fleet.h"
#include "bench/harness/local_cluster.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "superserve/v1/admin.grpc.pb.h"

ABSL_FLAG(double, registration_qps, 20,
          "registration: fmnist queries per second while the copy registers.");
ABSL_FLAG(double, registration_slo_ms, 500, "registration: SLO of those queries, ms.");

namespace superserve::bench::registration_bench {
namespace {

namespace fs = std::filesystem;

constexpr char kName[] = "registration";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// models/fmnist as `name` under `repo` (the model's name follows the folder).
absl::Status CopyPackage(const std::string& source, const std::string& repo,
                         const std::string& name) {
  std::error_code ec;
  const std::string dir = repo + "/" + name;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  fs::copy_file(source + "/checkpoint.pt", dir + "/checkpoint.pt", ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot copy ", source, "/checkpoint.pt"));
  std::ofstream(dir + "/profile.json") << absl::StrReplaceAll(
      ReadAll(source + "/profile.json"), {{"\"model\": \"fmnist\"", "\"model\": \"" + name + "\""}});
  std::ofstream(dir + "/manifest.json") << absl::StrReplaceAll(
      ReadAll(source + "/manifest.json"), {{"\"name\": \"fmnist\"", "\"name\": \"" + name + "\""}});
  return absl::OkStatus();
}

v1::InferRequest Query(const std::string& model) {
  v1::InferRequest req;
  req.set_model(model);
  EncodeTensor(MakeFloatTensor({1, 28, 28}, std::vector<float>(28 * 28, 0.25f)),
               req.mutable_input());
  return req;
}

// Milliseconds from `start` until `model` answers OK (polled), or < 0.
double UntilFirstAnswer(InferenceClient& client, const std::string& model, Nanos start,
                        Nanos give_up) {
  const v1::InferRequest req = Query(model);
  RealClock* clock = RealClock::Get();
  while (clock->Now() - start < give_up) {
    if (client.Infer(req, Millis(2000)).ok()) return ToMillis(clock->Now() - start);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

int Run(const std::string& work, const BenchmarkArgs& args) {
  const char* env = std::getenv("SUPERSERVE_SOURCE_DIR");
  const std::string source =
      (env != nullptr ? std::string(env) : fs::current_path().string()) + "/models/fmnist";
  if (!fs::exists(source + "/checkpoint.pt")) {
    std::fprintf(stderr, "%s: no %s/checkpoint.pt (run from the source tree)\n", kName,
                 source.c_str());
    return 1;
  }
  if (auto s = CopyPackage(source, work + "/repo", "fmnist"); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, std::string(s.message()).c_str());
    return 1;
  }
  LocalClusterOptions o;
  o.bin_dir = SelfDir();
  o.model_repo = work + "/repo";
  o.work_dir = work;
  o.workers = 0;
  o.worker_flags = {"--threads=1"};
  auto cluster = LocalCluster::Start(o);
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, std::string(cluster.status().message()).c_str());
    return 1;
  }
  InferenceClient client((*cluster)->router_address());
  client.WaitForConnected(Seconds(5));
  RealClock* clock = RealClock::Get();

  // Baseline: a worker that loads the package at start-up.
  const Nanos cold_start = clock->Now();
  if (auto w = (*cluster)->AddWorker(); !w.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, std::string(w.status().message()).c_str());
    return 1;
  }
  const double cold_ms = UntilFirstAnswer(client, "fmnist", cold_start, Seconds(120));
  if (cold_ms < 0) {
    std::fprintf(stderr, "%s: the worker never answered (logs in %s)\n", kName, work.c_str());
    return 1;
  }
  std::printf("cold start: worker process start to first answer %.0f ms\n", cold_ms);

  // fmnist under load while a copy registers.
  if (auto s = CopyPackage(source, work + "/packages", "fmnist-hot"); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, std::string(s.message()).c_str());
    return 1;
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> sent{0}, failed{0};
  const Nanos slo = Micros(absl::GetFlag(FLAGS_registration_slo_ms) * 1000);
  std::thread load([&] {
    InferenceClient c((*cluster)->router_address());
    const v1::InferRequest req = Query("fmnist");
    std::mt19937_64 rng(7);
    std::exponential_distribution<double> gap(absl::GetFlag(FLAGS_registration_qps));
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
      ++sent;
      if (!c.Infer(req, slo).ok()) ++failed;
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto admin = v1::Admin::NewStub(
      grpc::CreateChannel((*cluster)->router_address(), grpc::InsecureChannelCredentials()));
  const Nanos reg_start = clock->Now();
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + (*cluster)->admin_token());
  v1::RegisterModelRequest req;
  req.set_path(work + "/packages/fmnist-hot");
  req.set_timeout_ms(120000);
  v1::RegisterModelResponse resp;
  const grpc::Status st = admin->RegisterModel(&ctx, req, &resp);
  const double visible_ms = ToMillis(clock->Now() - reg_start);
  const double hot_ms = st.ok() ? UntilFirstAnswer(client, "fmnist-hot", reg_start, Seconds(120))
                                : -1;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop = true;
  load.join();
  if (!st.ok() || hot_ms < 0) {
    std::fprintf(stderr, "%s: registration failed: %s (logs in %s)\n", kName,
                 st.error_message().c_str(), work.c_str());
    return 1;
  }
  const int64_t worker_load_ms = resp.workers_size() > 0 ? resp.workers(0).load_ms() : -1;
  std::printf("hot registration: visible after %.0f ms (the worker loaded it in %lld ms), first "
              "answer after %.0f ms; fmnist queries meanwhile: %lld sent, %lld failed\n",
              visible_ms, static_cast<long long>(worker_load_ms), hot_ms,
              static_cast<long long>(sent.load()), static_cast<long long>(failed.load()));
  std::printf("register-to-first-answer / cold start = %.2f (target: register-to-first-answer "
              "<= 5000 ms: %s)\n",
              hot_ms / cold_ms, hot_ms <= 5000 ? "met" : "missed");
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", kName)
                            .Add("register_to_first_answer_ms", hot_ms)
                            .Add("visible_ms", visible_ms)
                            .Add("worker_load_ms", worker_load_ms)
                            .Add("cold_start_ms", cold_ms)
                            .Add("ratio_register_to_cold_start", hot_ms / cold_ms)
                            .Add("other_model_queries", sent.load())
                            .Add("failed_queries_other_models", failed.load())
                            .Add("target_met", hot_ms <= 5000 && failed.load() == 0)
                            .ToString()
                            .c_str());
  }
  return 0;
}

RegisterBenchmark kRegistration(
    kName,
    "a model registered at run time on a running torch worker: register-to-first-answer vs a "
    "worker's cold start with the same package, and failed queries of another model meanwhile "
    "(run from the source tree)",
    [](const BenchmarkArgs& args) {
      // Usage errors before anything starts: a zero or NaN rate is not an
      // exponential distribution's (its gaps were infinite or undefined).
      const double qps = absl::GetFlag(FLAGS_registration_qps);
      const double slo_ms = absl::GetFlag(FLAGS_registration_slo_ms);
      if (!(qps > 0 && qps <= 1e6) || !(slo_ms > 0 && slo_ms <= 3600e3)) {
        std::fprintf(stderr, "%s: need --registration_qps in (0, 1e6] and --registration_slo_ms "
                             "in (0, 3.6e6]\n", kName);
        return 2;
      }
      return InScratchDir(kName, [&](const std::string& dir) { return Run(dir, args); });
    });

}  // namespace
}  // namespace superserve::bench::registration_bench
