// Router benchmarks on real processes (127.0.0.1, ports chosen at run time):
//
// `router-overhead`: closed-loop, one query at a time, alternating between the
//   full path (client -> router Infer -> worker -> router -> client) and a
//   direct worker call (this process plays the router's part of the stream:
//   Batch down, BatchResult up) to a second worker of the same kind. The
//   difference of the latency percentiles is what the router adds: the client
//   RPC, queueing, the policy decision and the answer. Then, as many calls of
//   grpc.health.v1.Health/Check on the same router process (a trivial unary
//   callback handler) measure what one unary gRPC round trip through that
//   server costs on this machine: the floor under the router path. A third
//   path in the same loop sends the same input through the Open Inference
//   Protocol's ModelInfer (blocking stub, as the native unary call): its
//   added latency over the native unary path is reported as a ratio.
// `router-throughput`: one router, 16 emulated workers (one process,
//   --instances=16) and this process as the open-loop load generator, all on
//   this machine; searches the highest Poisson rate served with >= 0.999 SLO
//   attainment. Each trial also reads the router process's CPU time (user +
//   system, /proc/<pid>/stat) before and after it: the router's CPU per
//   query served is that difference over the trial's OK answers, reported per
//   transport at its highest passing rate. Then each transport is offered
//   1.5x and 2x its peak (--throughput_past_peak): goodput there over the
//   peak (target >= 0.9: the excess refused at once, not queued to die),
//   with how late the load generator itself sent (p99), so that a saturated
//   client is not mistaken for the router. The load generator sends over
//   --throughput_connections connections, one sending thread each, after a
//   warm-up trial that is not counted.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/benchmark_registry.h"
#include "bench/benchmarks/grpc/emulated_fleet.h"
#include "bench/harness/local_cluster.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "common/model_profile.h"
#include "common/process_cpu.h"
#include "common/subprocess.h"
#include "common/tensor_codec.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"
#include "superserve/v1/worker.grpc.pb.h"

ABSL_FLAG(int32_t, overhead_queries, 2000, "router-overhead: queries per path.");
ABSL_FLAG(double, throughput_trial_s, 3.0, "router-throughput: seconds per rate trial.");
ABSL_FLAG(double, throughput_slo_ms, 100, "router-throughput: query SLO, ms.");
ABSL_FLAG(double, throughput_start_qps, 4000, "router-throughput: first rate tried.");
ABSL_FLAG(double, throughput_max_qps, 64000, "router-throughput: highest rate tried.");
ABSL_FLAG(int32_t, throughput_workers, 16, "router-throughput: emulated workers.");
ABSL_FLAG(std::string, throughput_past_peak, "1.5,2",
          "router-throughput: after the search, offer these multiples of each transport's "
          "peak and report the goodput there against the peak (empty: none).");
ABSL_FLAG(int32_t, throughput_connections, 2,
          "router-throughput: client connections, each with its own sending thread (rows "
          "dealt round-robin). One unary connection saturated the load generator before "
          "the router.");
ABSL_FLAG(std::string, bench_policy, "slackfit", "Policy the benchmark router runs.");
ABSL_FLAG(std::string, router_cpus, "",
          "The benchmark router's --cpus (empty = not pinned, the router's default).");
ABSL_FLAG(std::string, throughput_transports, "unary,stream",
          "router-throughput: client transports to measure, in this order (unary: one "
          "Infer call per query; stream: one InferStream). max_qps is the best of them.");

namespace superserve::bench::router_benchmarks {
namespace {

std::vector<std::string> RouterCpuFlags() {
  const std::string cpus = absl::GetFlag(FLAGS_router_cpus);
  if (cpus.empty()) return {};
  return {"--cpus=" + cpus};
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// The "direct worker call" baseline: a WorkerLink server with exactly one
// worker, to which Call() sends one Batch and waits for its BatchResult.
class DirectLink final : public v1::WorkerLink::CallbackService {
 public:
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage>* Connect(
      grpc::CallbackServerContext*) override {
    return new Stream(this);
  }
  bool WaitForWorker(Nanos timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::nanoseconds(timeout), [&] { return ready_; });
  }
  // One batch round trip; false when the stream is gone.
  bool Call(const v1::RouterMessage& batch) {
    std::unique_lock<std::mutex> lock(mu_);
    // gRPC allows one write in flight: the previous one may still be
    // completing after its result arrived.
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return !writing_ || stream_ == nullptr; });
    if (stream_ == nullptr || writing_) return false;
    got_result_ = false;
    writing_ = true;
    out_ = batch;
    stream_->StartWrite(&out_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return got_result_ || stream_ == nullptr; });
    return got_result_;
  }
  void Close() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return !writing_ || stream_ == nullptr; });
    if (stream_ != nullptr && !finished_) {
      finished_ = true;
      stream_->Finish(grpc::Status::OK);
    }
  }

 private:
  class Stream final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage> {
   public:
    explicit Stream(DirectLink* link) : link_(link) { StartRead(&in_); }
    void OnReadDone(bool ok) override {
      std::lock_guard<std::mutex> lock(link_->mu_);
      if (!ok) {
        if (!link_->finished_) {
          link_->finished_ = true;
          Finish(grpc::Status::OK);
        }
        link_->cv_.notify_all();
        return;
      }
      if (in_.has_register_()) {
        link_->stream_ = this;
        link_->writing_ = true;
        ack_.mutable_ack()->set_assigned_id("direct");
        ack_.mutable_ack()->set_heartbeat_interval_ms(1000);
        StartWrite(&ack_);
      } else if (in_.has_result()) {
        link_->got_result_ = true;
        link_->cv_.notify_all();
      }
      StartRead(&in_);
    }
    void OnWriteDone(bool ok) override {
      std::lock_guard<std::mutex> lock(link_->mu_);
      link_->writing_ = false;
      link_->ready_ = true;
      link_->cv_.notify_all();
    }
    void OnDone() override {
      {
        std::lock_guard<std::mutex> lock(link_->mu_);
        link_->stream_ = nullptr;
        link_->cv_.notify_all();
      }
      delete this;
    }

   private:
    DirectLink* link_;
    v1::WorkerMessage in_;
    v1::RouterMessage ack_;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  Stream* stream_ = nullptr;
  bool ready_ = false;
  bool got_result_ = false;
  bool writing_ = false;  // a StartWrite has not completed yet
  bool finished_ = false;
  v1::RouterMessage out_;
};

int MeasureRouterOverhead(const BenchmarkArgs& args, const std::string& work) {
  // Tiny emulated latencies (subnet 0 at batch 1: 20 us) so that execution
  // noise does not hide the router's share.
  auto written = WriteEmulatedRepo(work + "/repo", RouterBenchModel(0.02));
  if (!written.ok()) {
    std::fprintf(stderr, "router-overhead: %s\n", std::string(written.status().message()).c_str());
    return 1;
  }
  const std::string repo = *written;
  LocalClusterOptions o;
  o.bin_dir = SelfDir();
  o.model_repo = repo;
  o.work_dir = work;
  o.policy = absl::GetFlag(FLAGS_bench_policy);
  o.workers = 1;
  o.emulate = true;
  o.router_flags = RouterCpuFlags();
  auto cluster = LocalCluster::Start(o);
  if (!cluster.ok()) {
    std::fprintf(stderr, "router-overhead: %s\n", std::string(cluster.status().message()).c_str());
    return 1;
  }
  DirectLink direct;
  grpc::ServerBuilder builder;
  int direct_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &direct_port);
  builder.RegisterService(&direct);
  auto server = builder.BuildAndStart();
  auto direct_worker =
      Subprocess::Start({SelfDir() + "/superserve-worker", absl::StrCat("--router=127.0.0.1:", direct_port),
                         "--model_repo=" + repo, "--emulate", "--name=direct"},
                        work + "/direct-worker.log");
  if (!direct_worker.ok() || !direct.WaitForWorker(Seconds(20))) {
    std::fprintf(stderr, "router-overhead: direct worker did not connect\n");
    return 1;
  }
  InferenceClient client((*cluster)->router_address());
  client.WaitForConnected(Seconds(5));
  InferenceClient stream_client((*cluster)->router_address(), Transport::kStream);
  stream_client.WaitForConnected(Seconds(5));
  // One query at a time over the client's InferStream, waited for here.
  auto stream_infer = [&](std::shared_ptr<const v1::InferRequest> request) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false, ok = false;
    stream_client.InferAsync(std::move(request), Millis(1000), [&](InferenceClient::Result r) {
      std::lock_guard<std::mutex> lock(mu);
      ok = r.status.ok();
      done = true;
      cv.notify_one();
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return ok;
  };
  LabelledRequests inputs = BenchInputs(16);
  // The same inputs as OIP requests: [1, 1, 28, 28] FP32, raw contents, on a
  // channel configured as the native client's (no transparent retries), so
  // that the difference is the router's OIP adapter and the message shapes.
  grpc::ChannelArguments oip_args;
  oip_args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto oip_channel = grpc::CreateCustomChannel((*cluster)->router_address(),
                                               grpc::InsecureChannelCredentials(), oip_args);
  auto oip_stub = inference::GRPCInferenceService::NewStub(oip_channel);
  std::vector<inference::ModelInferRequest> oip_inputs;
  for (const auto& req : inputs.requests) {
    inference::ModelInferRequest r;
    r.set_model_name("bench");
    auto* in = r.add_inputs();
    in->set_name("input");
    in->set_datatype("FP32");
    in->add_shape(1);
    for (int64_t d : req->input().shape()) in->add_shape(d);
    r.add_raw_input_contents(req->input().data());
    oip_inputs.push_back(std::move(r));
  }
  auto oip_infer = [&](const inference::ModelInferRequest& request) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    inference::ModelInferResponse response;
    return oip_stub->ModelInfer(&ctx, request, &response).ok() &&
           response.raw_output_contents_size() == 1;
  };
  v1::RouterMessage batch;
  batch.mutable_batch()->set_model("bench");
  batch.mutable_batch()->mutable_control()->set_subnet_id(0);
  auto* q = batch.mutable_batch()->add_queries();
  *q->mutable_input() = inputs.requests[0]->input();

  // The floor: an empty unary call to the router's health service, on its
  // own channel, completed on this thread (as the blocking stub does).
  grpc::ChannelArguments health_args;
  health_args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto health_channel = grpc::CreateCustomChannel((*cluster)->router_address(),
                                                  grpc::InsecureChannelCredentials(), health_args);
  grpc::GenericStub health_stub(health_channel);
  grpc::CompletionQueue health_cq;
  grpc::ByteBuffer health_request;  // an empty HealthCheckRequest: the server's overall status
  {
    grpc::Slice empty("");
    health_request = grpc::ByteBuffer(&empty, 1);
  }
  auto health_check = [&]() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    grpc::ByteBuffer response;
    grpc::Status status;
    auto call = health_stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", health_request,
                                             &health_cq);
    call->StartCall();
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    return health_cq.Next(&tag, &ok) && ok && status.ok();
  };

  const int n = absl::GetFlag(FLAGS_overhead_queries);
  std::vector<double> via_router, via_stream, via_direct, via_health, via_oip;
  int failures = 0;
  const Clock* clock = RealClock::Get();
  for (int i = 0; i < n + 100; ++i) {  // the first 100 of each warm up
    // The native unary and the OIP call swap places every other round
    // (native, direct, stream, OIP / OIP, direct, stream, native) so that
    // each follows the same mix of calls: a call right after another call
    // to the router finds its threads warmer.
    const bool oip_first = i % 2 == 1;
    absl::StatusOr<v1::InferResponse> r;
    bool oip_ok = false;
    Nanos oip_time = 0, unary_time = 0;
    auto run_unary = [&] {
      Nanos t = clock->Now();
      r = client.Infer(*inputs.requests[i % inputs.requests.size()], Millis(1000));
      unary_time = clock->Now() - t;
    };
    auto run_oip = [&] {
      Nanos t = clock->Now();
      oip_ok = oip_infer(oip_inputs[i % oip_inputs.size()]);
      oip_time = clock->Now() - t;
    };
    if (oip_first) {
      run_oip();
    } else {
      run_unary();
    }
    Nanos t1 = clock->Now();
    batch.mutable_batch()->set_batch_id(i + 1);
    q->set_query_id(i + 1);
    bool ok = direct.Call(batch);
    Nanos t2 = clock->Now();
    bool stream_ok = stream_infer(inputs.requests[i % inputs.requests.size()]);
    Nanos t3 = clock->Now();
    if (oip_first) {
      run_unary();
    } else {
      run_oip();
    }
    if (!r.ok() || !ok || !stream_ok || !oip_ok) {
      ++failures;
      continue;
    }
    if (i < 100) continue;
    via_router.push_back(ToMicros(unary_time));
    via_direct.push_back(ToMicros(t2 - t1));
    via_stream.push_back(ToMicros(t3 - t2));
    via_oip.push_back(ToMicros(oip_time));
  }
  // The floor in a phase of its own, so that the alternating loop above is
  // not perturbed (an extra call to the router between rounds keeps its
  // threads warm).
  for (int i = 0; i < n + 100; ++i) {
    Nanos t0 = clock->Now();
    bool ok = health_check();
    Nanos t1 = clock->Now();
    if (!ok) {
      ++failures;
      continue;
    }
    if (i >= 100) via_health.push_back(ToMicros(t1 - t0));
  }
  health_cq.Shutdown();
  {
    void* tag;
    bool ok;
    while (health_cq.Next(&tag, &ok)) {
    }
  }
  direct.Close();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  direct_worker->Stop();
  (*cluster)->Stop();
  const double r50 = Percentile(via_router, 0.5), r99 = Percentile(via_router, 0.99);
  const double d50 = Percentile(via_direct, 0.5), d99 = Percentile(via_direct, 0.99);
  const double s50 = Percentile(via_stream, 0.5), s99 = Percentile(via_stream, 0.99);
  const double h50 = Percentile(via_health, 0.5);
  const double o50 = Percentile(via_oip, 0.5), o99 = Percentile(via_oip, 0.99);
  // What the OIP adapter adds on top of the native unary path: its added
  // latency (over the direct worker call) relative to the native one's.
  const double oip_added_ratio = (r50 - d50) > 0 ? (o50 - d50) / (r50 - d50) : -1;
  std::printf("router path p50 %.0f us p99 %.0f us (unary Infer), p50 %.0f us p99 %.0f us "
              "(InferStream); direct worker call p50 %.0f us p99 %.0f us; unary health check on "
              "the router p50 %.0f us; OIP ModelInfer p50 %.0f us p99 %.0f us (added latency "
              "%.2fx the native unary path's, p50); %d failures\n",
              r50, r99, s50, s99, d50, d99, h50, o50, o99, oip_added_ratio, failures);
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", "router-overhead")
                            .Add("router_cpus", absl::GetFlag(FLAGS_router_cpus))
                            .Add("queries", static_cast<int64_t>(via_router.size()))
                            .Add("router_us_p50", r50)
                            .Add("router_us_p99", r99)
                            .Add("direct_us_p50", d50)
                            .Add("direct_us_p99", d99)
                            .Add("added_us_p50", r50 - d50)
                            .Add("added_us_p99", r99 - d99)
                            .Add("router_stream_us_p50", s50)
                            .Add("router_stream_us_p99", s99)
                            .Add("added_stream_us_p50", s50 - d50)
                            .Add("added_stream_us_p99", s99 - d99)
                            .Add("unary_floor_us_p50", h50)
                            .Add("oip_us_p50", o50)
                            .Add("oip_us_p99", o99)
                            .Add("added_oip_us_p50", o50 - d50)
                            .Add("added_oip_us_p99", o99 - d99)
                            .Add("oip_vs_unary_added_ratio_p50", oip_added_ratio)
                            .Add("oip_vs_unary_ratio_p50", r50 > 0 ? o50 / r50 : -1)
                            .Add("failures", failures)
                            .ToString()
                            .c_str());
  }
  return failures == 0 ? 0 : 1;
}

struct Trial {
  std::string transport;
  double qps = 0;
  double past_peak = 0;  // the multiple of the peak offered; 0 = a search trial
  ReplaySummary summary;
  int64_t served = 0;                   // answers with status OK
  double router_cpu_us_per_query = -1;  // < 0: not measured (see the trial's line)
  // The load generator's own lateness: how long after its trace time each
  // query was sent (p99). A client that cannot keep up sends late, and the
  // trial then measures the client as much as the router.
  double client_late_ms_p99 = 0;
  int64_t refused = 0;           // answered, not OK (DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ...)
  double refusal_ms_p99 = 0;     // how long those answers took
  int64_t unanswered = 0;
  // Queries the router's core accepted during the trial (its metrics; -1:
  // not read): far fewer than were sent means they died before the core,
  // in the client or in gRPC.
  int64_t router_accepted = -1;
};

// The same trial's figures that the summary leaves out.
void AddClientFigures(const std::vector<TraceArrival>& trace,
                      const std::vector<QueryRecord>& records, Trial* t) {
  std::vector<double> late, refusal;
  for (size_t i = 0; i < records.size() && i < trace.size(); ++i) {
    const QueryRecord& r = records[i];
    late.push_back(ToMillis(std::max<Nanos>(0, r.sent - trace[i].arrival)));
    if (!r.answered) {
      ++t->unanswered;
    } else if (r.code != absl::StatusCode::kOk) {
      ++t->refused;
      refusal.push_back(ToMillis(r.latency));
    }
  }
  t->client_late_ms_p99 = late.empty() ? 0 : Percentile(late, 0.99);
  t->refusal_ms_p99 = refusal.empty() ? 0 : Percentile(refusal, 0.99);
}

int MeasureRouterThroughput(const BenchmarkArgs& args,
                            const std::vector<std::pair<std::string, Transport>>& transports,
                            const std::string& work);

// --throughput_past_peak as numbers, each in (1, 100]; nullopt if one is not.
std::optional<std::vector<double>> PastPeakMultiples() {
  std::vector<double> out;
  for (absl::string_view m : absl::StrSplit(absl::GetFlag(FLAGS_throughput_past_peak), ',',
                                            absl::SkipEmpty())) {
    double x = 0;
    if (!absl::SimpleAtod(m, &x) || !(x > 1 && x <= 100)) return std::nullopt;
    out.push_back(x);
  }
  return out;
}

int RunRouterThroughput(const BenchmarkArgs& args) {
  // Usage errors before anything starts: a NaN --throughput_trial_s aborted
  // (std::length_error sizing the trace), and no bound held the rest.
  const double trial_s = absl::GetFlag(FLAGS_throughput_trial_s);
  const double slo_ms = absl::GetFlag(FLAGS_throughput_slo_ms);
  const double start = absl::GetFlag(FLAGS_throughput_start_qps);
  const double max = absl::GetFlag(FLAGS_throughput_max_qps);
  const int32_t workers = absl::GetFlag(FLAGS_throughput_workers);
  if (!(trial_s > 0 && trial_s <= 3600) || !(slo_ms > 0 && slo_ms <= 3600e3) ||
      !(start > 0 && start <= max && max <= 1e7) || workers < 1 || workers > 4096 ||
      absl::GetFlag(FLAGS_throughput_connections) < 1 ||
      absl::GetFlag(FLAGS_throughput_connections) > 64) {
    std::fprintf(stderr,
                 "router-throughput: need --throughput_trial_s in (0, 3600], --throughput_slo_ms "
                 "in (0, 3.6e6], 0 < --throughput_start_qps <= --throughput_max_qps <= 1e7, "
                 "--throughput_workers in [1, 4096], --throughput_connections in [1, 64]\n");
    return 2;
  }
  if (!PastPeakMultiples().has_value()) {
    std::fprintf(stderr,
                 "router-throughput: --throughput_past_peak needs a comma-separated list of "
                 "multiples in (1, 100], got \"%s\"\n",
                 absl::GetFlag(FLAGS_throughput_past_peak).c_str());
    return 2;
  }
  std::vector<std::pair<std::string, Transport>> transports;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_throughput_transports), ',')) {
    auto t = ParseTransport(std::string(name));
    if (!t.ok()) {
      std::fprintf(stderr, "router-throughput: --throughput_transports: %s\n",
                   std::string(t.status().message()).c_str());
      return 2;
    }
    transports.emplace_back(std::string(name), *t);
  }
  return InScratchDir("router-throughput", [&](const std::string& work) {
    return MeasureRouterThroughput(args, transports, work);
  });
}

int MeasureRouterThroughput(const BenchmarkArgs& args,
                            const std::vector<std::pair<std::string, Transport>>& transports,
                            const std::string& work) {
  auto written = WriteEmulatedRepo(work + "/repo", RouterBenchModel(1.0));
  if (!written.ok()) {
    std::fprintf(stderr, "router-throughput: %s\n", std::string(written.status().message()).c_str());
    return 1;
  }
  const std::string repo = *written;
  const int workers = absl::GetFlag(FLAGS_throughput_workers);
  LocalClusterOptions o;
  o.bin_dir = SelfDir();
  o.model_repo = repo;
  o.work_dir = work;
  o.policy = absl::GetFlag(FLAGS_bench_policy);
  o.workers = 1;
  o.instances_per_worker = workers;
  o.emulate = true;
  o.router_flags = RouterCpuFlags();
  o.router_flags.push_back("--log_level=warning");
  auto cluster = LocalCluster::Start(o);
  if (!cluster.ok()) {
    std::fprintf(stderr, "router-throughput: %s\n", std::string(cluster.status().message()).c_str());
    return 1;
  }
  LabelledRequests inputs = BenchInputs(64);
  const double trial_s = absl::GetFlag(FLAGS_throughput_trial_s);
  const Nanos slo = Millis(absl::GetFlag(FLAGS_throughput_slo_ms));
  std::vector<Trial> trials;
  // One open-loop Poisson trial at `qps`; past_peak: the multiple of the peak
  // it is (0: a search trial, < 0: the warm-up).
  using Clients = std::vector<std::unique_ptr<InferenceClient>>;
  auto run_trial = [&](const std::string& name, Clients& clients, double qps,
                     double past_peak) {
    const std::vector<TraceArrival> trace = PoissonTrace(qps, trial_s, static_cast<uint64_t>(qps));
    ReplayOptions ro;
    ro.default_slo = slo;
    ro.progress = false;
    const pid_t router_pid = (*cluster)->router().pid();
    const absl::StatusOr<Nanos> cpu_before = ProcessCpuTime(router_pid);
    const auto totals_before = (*cluster)->ScrapeRouterTotals();
    std::vector<InferenceClient*> senders;
    for (auto& c : clients) senders.push_back(c.get());
    auto records = ReplayTrace(absl::MakeConstSpan(senders), trace,
                               [&inputs](const TraceArrival&) { return &inputs; }, ro);
    const absl::StatusOr<Nanos> cpu_after = ProcessCpuTime(router_pid);
    const auto totals_after = (*cluster)->ScrapeRouterTotals();
    Trial tr;
    tr.transport = name;
    tr.qps = qps;
    tr.past_peak = past_peak;
    if (records.ok()) {
      tr.summary = Summarize(*records);
      for (const auto& r : *records) tr.served += r.code == absl::StatusCode::kOk ? 1 : 0;
      AddClientFigures(trace, *records, &tr);
    }
    if (totals_before.ok() && totals_after.ok()) {
      tr.router_accepted = totals_after->accepted - totals_before->accepted;
    }
    tr.router_cpu_us_per_query = CpuPerQuery("router-throughput", cpu_before, cpu_after, tr.served);
    std::printf(
        "  %s%s, %.0f qps offered: attainment %.4f, served %.0f qps in time, p50 %.2f ms, p99 "
        "%.2f ms, router CPU %s/query; %lld refused (p99 %.1f ms), %lld unanswered; the router's "
        "core accepted %lld; client sent p99 %.2f ms late\n",
        name.c_str(), past_peak < 0 ? " (warm-up, not counted)" : "", qps, tr.summary.slo_attainment, tr.summary.throughput_qps,
        tr.summary.p50_ms, tr.summary.p99_ms, CpuText(tr.router_cpu_us_per_query).c_str(),
        static_cast<long long>(tr.refused), tr.refusal_ms_p99,
        static_cast<long long>(tr.unanswered), static_cast<long long>(tr.router_accepted),
        tr.client_late_ms_p99);
    std::fflush(stdout);
    trials.push_back(tr);
    // Let queues drain between trials.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return tr;
  };
  // The highest rate (within 10 %) this client sustains at >= 0.999;
  // `capped`: it passed up to --throughput_max_qps (the peak is not measured).
  bool capped = false;
  auto find_max = [&](const std::string& name, Clients& client) {
    auto run = [&](double qps) {
      return run_trial(name, client, qps, 0).summary.slo_attainment >= 0.999;
    };
    // Double until a rate fails, then bisect between the last pass and the fail.
    double lo = 0, hi = 0;
    for (double qps = absl::GetFlag(FLAGS_throughput_start_qps);
         qps <= absl::GetFlag(FLAGS_throughput_max_qps); qps *= 2) {
      if (run(qps)) {
        lo = qps;
      } else {
        hi = qps;
        break;
      }
    }
    capped = hi == 0 && lo > 0;
    if (hi == 0) hi = lo;  // never failed up to the cap
    while (lo > 0 && hi > lo * 1.1) {
      double mid = (lo + hi) / 2;
      if (run(mid)) lo = mid;
      else hi = mid;
    }
    if (lo == 0) {  // even the first rate failed: bisect downwards
      hi = absl::GetFlag(FLAGS_throughput_start_qps);
      for (double qps = hi / 2; qps >= 250; qps /= 2) {
        if (run(qps)) {
          lo = qps;
          break;
        }
      }
    }
    return lo;
  };
  const std::vector<double> past_peak = PastPeakMultiples().value_or(std::vector<double>{});
  std::vector<std::pair<std::string, double>> maxima;
  std::vector<std::string> capped_transports;  // whose peak is the cap
  // Per transport: the router's CPU per query in the last passing trial at
  // its max rate (< 0 when none passed or it was not measured).
  std::vector<double> cpu_at_max;
  double best = 0;
  for (const auto& [name, transport] : transports) {
    Clients client;
    for (int c = 1; c <= absl::GetFlag(FLAGS_throughput_connections); ++c) {
      client.push_back(std::make_unique<InferenceClient>((*cluster)->router_address(), transport,
                                                         nullptr, c));
      client.back()->WaitForConnected(Seconds(5));
    }
    // A warm-up trial, not counted: the first trial on a fresh connection
    // failed at rates that later ones passed (unary 4,000 q/s: 0.54, then
    // 1.000), so the search settled at half the peak.
    run_trial(name, client, absl::GetFlag(FLAGS_throughput_start_qps), -1);
    trials.pop_back();
    const double lo = find_max(name, client);
    // Past the peak: goodput should stay near it (the excess refused at once,
    // not queued to die); the client's lateness says whether the load
    // generator, not the router, ran out first.
    for (double m : lo > 0 ? past_peak : std::vector<double>{}) {
      const Trial t = run_trial(name, client, lo * m, m);
      std::printf("router-throughput: %s at %.2gx the peak: goodput %.0f qps = %.3f of the peak%s%s\n",
                  name.c_str(), m, t.summary.throughput_qps, t.summary.throughput_qps / lo,
                  capped ? " (the peak is the --throughput_max_qps cap, not measured)" : "",
                  t.client_late_ms_p99 > 0.1 * ToMillis(slo)
                      ? " (the load generator sent late by more than 10 % of the SLO: it, not "
                        "only the router, was saturated)"
                      : "");
    }
    double cpu = -1;
    for (const auto& t : trials) {
      if (t.transport == name && t.qps == lo && t.summary.slo_attainment >= 0.999) {
        cpu = t.router_cpu_us_per_query;
      }
    }
    std::printf(
        "router-throughput: %s: max %.0f qps at >= 0.999 attainment (%d emulated workers, "
        "SLO %.0f ms, policy %s); router CPU %s per query served at that rate\n",
        name.c_str(), lo, workers, ToMillis(slo), absl::GetFlag(FLAGS_bench_policy).c_str(),
        CpuText(cpu).c_str());
    maxima.emplace_back(name, lo);
    if (capped) capped_transports.push_back(name);
    cpu_at_max.push_back(cpu);
    best = std::max(best, lo);
  }
  (*cluster)->Stop();
  if (args.json) {
    std::vector<JsonWriter> rows;
    for (const auto& t : trials) {
      JsonWriter row;
      row.Add("transport", t.transport)
          .Add("offered_qps", t.qps)
          .Add("past_peak", t.past_peak)
          .Add("slo_attainment", t.summary.slo_attainment)
          .Add("served_qps", t.summary.throughput_qps)
          .Add("p99_ms", t.summary.p99_ms)
          .Add("served", t.served)
          .Add("refused", t.refused)
          .Add("refusal_ms_p99", t.refusal_ms_p99)
          .Add("unanswered", t.unanswered)
          .Add("router_accepted", t.router_accepted)
          .Add("client_late_ms_p99", t.client_late_ms_p99);
      if (t.router_cpu_us_per_query >= 0) {
        row.Add("router_cpu_us_per_query", t.router_cpu_us_per_query);
      }
      rows.push_back(std::move(row));
    }
    JsonWriter out;
    out.Add("benchmark", "router-throughput")
        .Add("router_cpus", absl::GetFlag(FLAGS_router_cpus))
        .Add("connections", absl::GetFlag(FLAGS_throughput_connections))
        .Add("max_qps", best);
    for (const auto& [name, lo] : maxima) out.Add("max_qps_" + name, lo);
    // Goodput past the peak over the peak, per transport and multiple
    // (target >= 0.9), with the client's lateness there beside it.
    for (const auto& [name, lo] : maxima) {
      for (const auto& t : trials) {
        if (t.transport != name || t.past_peak == 0 || lo <= 0) continue;
        std::string at = absl::StrFormat("%gx_%s", t.past_peak, name);
        std::replace(at.begin(), at.end(), '.', '_');  // 1.5x -> 1_5x: a plain key
        if (std::find(capped_transports.begin(), capped_transports.end(), name) !=
            capped_transports.end()) {
          continue;  // not past a measured peak
        }
        out.Add("goodput_ratio_" + at, t.summary.throughput_qps / lo)
            .Add("client_late_ms_p99_" + at, t.client_late_ms_p99);
      }
    }
    // The baseline of the same run: the first transport (unary by default).
    if (maxima.size() > 1 && maxima.front().second > 0) {
      out.Add("ratio_vs_" + maxima.front().first, best / maxima.front().second);
    }
    // The router's CPU time per query served, at each transport's max rate;
    // left out where it was not measured.
    for (size_t i = 0; i < maxima.size(); ++i) {
      if (cpu_at_max[i] >= 0) out.Add("router_cpu_us_per_query_" + maxima[i].first, cpu_at_max[i]);
    }
    for (size_t i = 1; i < maxima.size(); ++i) {
      if (cpu_at_max[0] > 0 && cpu_at_max[i] >= 0) {
        out.Add("router_cpu_ratio_" + maxima[i].first + "_vs_" + maxima.front().first,
                cpu_at_max[i] / cpu_at_max[0]);
      }
    }
    std::printf("%s\n", out.Add("workers", workers)
                            .Add("slo_ms", ToMillis(slo))
                            .Add("trial_s", trial_s)
                            .AddArray("trials", rows)
                            .ToString()
                            .c_str());
  }
  return 0;
}

RegisterBenchmark reg_overhead("router-overhead",
                               "p50/p99 latency through the router vs a direct worker call "
                               "(router + emulated workers as processes)",
                               [](const BenchmarkArgs& args) {
                                 // 0 queries used to report p50 0 us and exit 0.
                                 const int n = absl::GetFlag(FLAGS_overhead_queries);
                                 if (n < 1 || n > 10000000) {
                                   std::fprintf(stderr, "router-overhead: need --overhead_queries "
                                                        "in [1, 1e7]\n");
                                   return 2;
                                 }
                                 return InScratchDir("router-overhead", [&](const std::string& w) {
                                   return MeasureRouterOverhead(args, w);
                                 });
                               });
RegisterBenchmark reg_throughput("router-throughput",
                                 "highest Poisson rate one router serves at >= 0.999 attainment "
                                 "with 16 emulated workers on this machine",
                                 RunRouterThroughput);

}  // namespace
}  // namespace superserve::bench::router_benchmarks
