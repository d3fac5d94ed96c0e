// superserve-loadgen: open-loop replay of a trace CSV against a router.
#include <cstdio>

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
ABSL_FLAG(std::string, trace, "", "Trace CSV (header with arrival_us; optional slo_us, application).");
ABSL_FLAG(std::string, model, "", "Model name to query.");
ABSL_FLAG(double, slo_ms, 100, "Deadline of queries whose trace row has no slo_us, ms.");
ABSL_FLAG(std::string, input_shape, "1,28,28", "Per-sample input shape the model expects.");
ABSL_FLAG(double, input_mean, 0, "Extra client-side transform: inputs are (pixel/255 - mean) / std. Leave at 0/1: the worker applies the model's own normalisation from its profile.");
ABSL_FLAG(double, input_std, 1, "Extra client-side transform: inputs are (pixel/255 - mean) / std. Leave at 0/1: the worker applies the model's own normalisation from its profile.");
ABSL_FLAG(std::string, dataset_dir, superserve::kFashionMnistDir,
          "Fashion-MNIST directory; inputs and labels come from its t10k (test) split.");
ABSL_FLAG(int64_t, max_queries, 0, "Replay only the first N rows (0 = all).");
ABSL_FLAG(double, time_scale, 1.0, "Multiply arrival times by this (0.5 = twice the rate).");
ABSL_FLAG(std::string, out_csv, "", "Write one row per query here.");
ABSL_FLAG(bool, progress, true, "Show a progress bar on stderr.");
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
           "\"p50_ms\",\"p99_ms\",\"throughput_qps\"}");
  if (absl::GetFlag(FLAGS_trace).empty() || absl::GetFlag(FLAGS_model).empty()) {
    std::fprintf(stderr, "superserve-loadgen: --trace and --model are required (see --help)\n");
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
  auto trace = ReadTraceCsv(absl::GetFlag(FLAGS_trace));
  if (!trace.ok()) {
    SS_LOG(ERROR) << trace.status().message();
    return 1;
  }
  auto images = LoadFashionMnist("t10k", absl::GetFlag(FLAGS_dataset_dir));
  if (!images.ok()) {
    SS_LOG(ERROR) << images.status().message();
    return 1;
  }
  auto inputs = MakeImageRequests(*images, absl::GetFlag(FLAGS_model), shape,
                                  static_cast<float>(absl::GetFlag(FLAGS_input_mean)),
                                  static_cast<float>(absl::GetFlag(FLAGS_input_std)));
  if (!inputs.ok()) {
    SS_LOG(ERROR) << inputs.status().message();
    return 1;
  }
  auto credentials = MakeChannelCredentials({absl::GetFlag(FLAGS_tls_ca_file),
                                             absl::GetFlag(FLAGS_tls_client_cert_file),
                                             absl::GetFlag(FLAGS_tls_client_key_file)});
  if (!credentials.ok()) {
    SS_LOG(ERROR) << credentials.status().message();
    return 2;
  }
  InferenceClient client(absl::GetFlag(FLAGS_router), *transport, *credentials);
  if (!client.WaitForConnected(Seconds(10))) {
    SS_LOG(ERROR) << "cannot connect to router " << absl::GetFlag(FLAGS_router);
    return 1;
  }
  ReplayOptions opts;
  opts.default_slo = Millis(absl::GetFlag(FLAGS_slo_ms));
  opts.max_queries = absl::GetFlag(FLAGS_max_queries);
  opts.time_scale = absl::GetFlag(FLAGS_time_scale);
  opts.progress = absl::GetFlag(FLAGS_progress);
  auto records = ReplayTrace(client, *trace, *inputs, opts);
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
  std::printf("%s\n", Summarize(*records).ToJson().c_str());
  return 0;
}
