// superserve-loadgen: open-loop replay of a trace CSV against a router.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/idx_reader.h"
#include "common/init.h"
#include "common/logging.h"
#include "router/client/load_generator.h"

ABSL_FLAG(std::string, router, "127.0.0.1:8500", "Router address host:port.");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CA to verify the router's TLS certificate (its --tls_cert_file); empty = "
          "plaintext.");
ABSL_FLAG(std::string, tls_client_cert_file, "",
          "PEM client certificate, for a router with --tls_client_ca_file (mutual TLS).");
ABSL_FLAG(std::string, tls_client_key_file, "", "PEM key of --tls_client_cert_file.");
ABSL_FLAG(std::string, trace, "",
          "Trace CSV (header with arrival_us; optional slo_us, application, model).");
ABSL_FLAG(std::string, model, "",
          "Model to query for rows without a `model` column value (required unless every row "
          "names its model).");
ABSL_FLAG(int64_t, inputs_per_application, 2000,
          "Rows tagged with an application of common/image_applications.h (easy, hard, noisy) "
          "send that application's inputs: the first N test images of its classes, with its "
          "noise. Other rows send the test set in order.");
ABSL_FLAG(double, slo_ms, 100,
          "Deadline of queries whose trace row has no slo_us, ms: in (0, 86400000] (a day, the "
          "router's bound on a deadline).");
ABSL_FLAG(std::string, input_shape, "1,28,28", "Per-sample input shape the model expects.");
ABSL_FLAG(double, input_mean, 0, "Extra client-side transform: inputs are (pixel/255 - mean) / std. Leave at 0/1: the worker applies the model's own normalisation from its profile.");
ABSL_FLAG(double, input_std, 1, "Extra client-side transform: inputs are (pixel/255 - mean) / std. Leave at 0/1: the worker applies the model's own normalisation from its profile.");
ABSL_FLAG(std::string, dataset_dir, superserve::kFashionMnistDir,
          "Fashion-MNIST directory; inputs and labels come from its t10k (test) split.");
ABSL_FLAG(int64_t, max_queries, 0, "Replay only the first N rows (0 = all).");
ABSL_FLAG(double, time_scale, 1.0,
          "Multiply arrival times by this (0.5 = twice the rate; 0 = every query at once). "
          "Finite, >= 0.");
ABSL_FLAG(std::string, out_csv, "", "Write one row per query here.");
ABSL_FLAG(bool, progress, true, "Show a progress bar on stderr.");
ABSL_FLAG(int32_t, senders, 1,
          "Sending threads, each with its own connection to the router; row i goes through "
          "sender i % N, still at its own arrival time. One sender issues some tens of "
          "thousands of queries per second; raise it for rates beyond that.");
ABSL_FLAG(std::string, transport, "unary",
          "unary: one Inference.Infer call per query (deadline = gRPC deadline); stream: all "
          "queries over one Inference.InferStream (per-query timeout and tag; far less gRPC "
          "work per query).");

int main(int argc, char** argv) {
  using namespace superserve;
  InitMain(argc, argv,
           "superserve-loadgen --router HOST:PORT --trace T.csv --model NAME [flags]\n\n"
           "Replays the trace in real time (open loop) with Fashion-MNIST test inputs, records\n"
           "per query status, latency, serving subnet, profiled accuracy and correctness, and\n"
           "prints a JSON summary as the last line:\n"
           "{\"queries\",\"ok\",\"slo_attainment\",\"mean_accuracy\",\"measured_accuracy\","
           "\"p50_ms\",\"p99_ms\",\"throughput_qps\"}\n\n"
           "The trace's `model` and `application` columns mix models and applications (a row's\n"
           "model defaults to --model); a mixed trace first prints one JSON line per (model,\n"
           "application) with its own slo_attainment.");
  if (absl::GetFlag(FLAGS_trace).empty()) {
    std::fprintf(stderr, "superserve-loadgen: --trace is required (see --help)\n");
    return 2;
  }
  auto transport = ParseTransport(absl::GetFlag(FLAGS_transport));
  if (!transport.ok()) {
    std::fprintf(stderr, "superserve-loadgen: --transport: %s\n",
                 std::string(transport.status().message()).c_str());
    return 2;
  }
  std::vector<int64_t> shape;
  for (auto part : absl::StrSplit(absl::GetFlag(FLAGS_input_shape), ',')) {
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d <= 0) {
      std::fprintf(stderr, "superserve-loadgen: bad --input_shape\n");
      return 2;
    }
    shape.push_back(d);
  }
  // Checked before anything waits on them: a NaN or infinite scale made the
  // replay wait for ever, and an SLO past int64 nanoseconds (1e15 ms) wrapped
  // negative, so that every OK answer was reported out of its SLO.
  constexpr double kMaxSloMs = ToMillis(kMaxQueryTimeout);
  const double slo_ms = absl::GetFlag(FLAGS_slo_ms);
  if (!(slo_ms > 0 && slo_ms <= kMaxSloMs)) {  // (false for NaN)
    std::fprintf(stderr,
                 "superserve-loadgen: --slo_ms must be in (0, %.0f] (a day: the router's bound on "
                 "a deadline), got %g\n",
                 kMaxSloMs, slo_ms);
    return 2;
  }
  const double time_scale = absl::GetFlag(FLAGS_time_scale);
  if (!std::isfinite(time_scale) || time_scale < 0) {
    std::fprintf(stderr, "superserve-loadgen: --time_scale must be a finite number >= 0, got %g\n",
                 time_scale);
    return 2;
  }
  auto trace = ReadTraceCsv(absl::GetFlag(FLAGS_trace));
  if (!trace.ok()) {
    SS_LOG(ERROR) << trace.status().message();
    return 1;
  }
  // The last row replayed arrives last (the reader checks the order): scaled,
  // it must stay within int64 nanoseconds too.
  if (const int64_t max_queries = absl::GetFlag(FLAGS_max_queries); !trace->empty()) {
    const size_t last =
        max_queries > 0 ? std::min<size_t>(trace->size(), max_queries) - 1 : trace->size() - 1;
    const double scaled_us = ToMicros((*trace)[last].arrival) * time_scale;
    if (scaled_us > kMaxTraceArrivalUs) {
      std::fprintf(stderr,
                   "superserve-loadgen: --time_scale %g puts the trace's last arrival (%g us) at "
                   "%g us, past %g us (int64 nanoseconds)\n",
                   time_scale, ToMicros((*trace)[last].arrival), scaled_us, kMaxTraceArrivalUs);
      return 2;
    }
  }
  auto images = LoadFashionMnist("t10k", absl::GetFlag(FLAGS_dataset_dir));
  if (!images.ok()) {
    SS_LOG(ERROR) << images.status().message();
    return 1;
  }
  // One input set per (model, application) of the trace; a model column
  // value wins over --model.
  std::map<std::pair<std::string, std::string>, LabelledRequests> input_sets;
  bool mixed = false;
  for (TraceArrival& a : *trace) {
    if (a.model.empty()) a.model = absl::GetFlag(FLAGS_model);
    if (a.model.empty()) {
      std::fprintf(stderr, "superserve-loadgen: a trace row names no model and --model is empty\n");
      return 2;
    }
    const ImageApplication* app =
        FindImageApplication(FashionMnistApplications(), a.application);
    auto key = std::make_pair(a.model, app != nullptr ? app->name : std::string());
    if (input_sets.count(key) > 0) continue;
    auto inputs =
        app != nullptr
            ? MakeApplicationRequests(*images, a.model, shape, *app,
                                      absl::GetFlag(FLAGS_inputs_per_application))
            : MakeImageRequests(*images, a.model, shape,
                                static_cast<float>(absl::GetFlag(FLAGS_input_mean)),
                                static_cast<float>(absl::GetFlag(FLAGS_input_std)));
    if (!inputs.ok()) {
      SS_LOG(ERROR) << inputs.status().message();
      return 1;
    }
    input_sets.emplace(key, *std::move(inputs));
    mixed = mixed || input_sets.size() > 1;
  }
  auto inputs_for = [&input_sets](const TraceArrival& a) -> const LabelledRequests* {
    const ImageApplication* app = FindImageApplication(FashionMnistApplications(), a.application);
    auto it = input_sets.find({a.model, app != nullptr ? app->name : std::string()});
    return it == input_sets.end() ? nullptr : &it->second;
  };
  auto credentials = MakeChannelCredentials({absl::GetFlag(FLAGS_tls_ca_file),
                                             absl::GetFlag(FLAGS_tls_client_cert_file),
                                             absl::GetFlag(FLAGS_tls_client_key_file)});
  if (!credentials.ok()) {
    SS_LOG(ERROR) << credentials.status().message();
    return 2;
  }
  const int senders = absl::GetFlag(FLAGS_senders);
  if (senders < 1 || senders > 64) {
    SS_LOG(ERROR) << "--senders must be within 1..64, got " << senders;
    return 2;
  }
  std::vector<std::unique_ptr<InferenceClient>> clients;
  std::vector<InferenceClient*> client_ptrs;
  for (int s = 0; s < senders; ++s) {
    clients.push_back(std::make_unique<InferenceClient>(absl::GetFlag(FLAGS_router), *transport,
                                                        *credentials, /*connection=*/s));
    client_ptrs.push_back(clients.back().get());
    if (!clients.back()->WaitForConnected(Seconds(10))) {
      SS_LOG(ERROR) << "cannot connect to router " << absl::GetFlag(FLAGS_router);
      return 1;
    }
  }
  ReplayOptions opts;
  opts.default_slo = Millis(slo_ms);
  opts.max_queries = absl::GetFlag(FLAGS_max_queries);
  opts.time_scale = time_scale;
  opts.progress = absl::GetFlag(FLAGS_progress);
  auto records = ReplayTrace(absl::MakeConstSpan(client_ptrs), *trace, inputs_for, opts);
  if (!records.ok()) {
    SS_LOG(ERROR) << records.status().message();
    return 1;
  }
  if (const auto path = absl::GetFlag(FLAGS_out_csv); !path.empty()) {
    if (auto s = WriteRecordsCsv(path, *records); !s.ok()) {
      SS_LOG(ERROR) << s.message();
      return 1;
    }
  }
  // A mixed trace: one line per (model, application) before the overall one.
  if (mixed) {
    for (const std::string& line : SummarizeGroupsJson(*records)) std::printf("%s\n", line.c_str());
  }
  std::printf("%s\n", Summarize(*records).ToJson().c_str());
  return 0;
}
