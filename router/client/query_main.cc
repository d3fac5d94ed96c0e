// superserve-query: sends Fashion-MNIST test images to a router, one unary
// Infer call each with a deadline, and prints what came back. The shortest
// path from a running router to a first answer.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/idx_reader.h"
#include "common/clock.h"
#include "common/init.h"
#include "common/time.h"
#include "router/client/inference_client.h"
#include "router/client/load_generator.h"

ABSL_FLAG(std::string, router, "127.0.0.1:8500", "Router address host:port.");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CA to verify the router's TLS certificate (docs/security.md); empty = plaintext.");
ABSL_FLAG(std::string, model, "fmnist", "Model name to query (its folder name in the repository).");
ABSL_FLAG(std::string, application, "", "Application tag sent with every query (optional).");
ABSL_FLAG(uint32_t, version, 0,
          "Pin this version of the model (its manifest's `version`); 0 = the current one. A "
          "version the router does not serve is INVALID_ARGUMENT.");
ABSL_FLAG(int64_t, image, 0, "Index of the first Fashion-MNIST test image to send (0-9999).");
ABSL_FLAG(int64_t, count, 1, "How many consecutive test images to send, one call each.");
ABSL_FLAG(double, timeout_ms, 100, "Each query's deadline (the gRPC deadline), ms.");
ABSL_FLAG(std::string, input_shape, "1,28,28", "Per-sample input shape the model expects.");
ABSL_FLAG(std::string, dataset_dir, superserve::kFashionMnistDir,
          "Directory with Debian's dataset-fashion-mnist files.");

int main(int argc, char** argv) {
  using namespace superserve;
  InitMain(argc, argv,
           "superserve-query [--router HOST:PORT] [--model NAME] [--version V] [--image I] "
           "[--count N] [--timeout_ms MS]\n\n"
           "Sends Fashion-MNIST test images (pixels/255, the model's own normalisation is applied\n"
           "by the worker) to the router, one Inference.Infer call per image with the given\n"
           "deadline, and prints per image the label, the prediction, what served it (a\n"
           "supernet's subnet, or the exit an early-exit model's query left at), its profiled\n"
           "accuracy, the batch it ran in and the time queued and executing.\n"
           "Exit code: 0 when every call was answered OK, 1 otherwise (the status is printed).");
  const int64_t first = absl::GetFlag(FLAGS_image);
  const int64_t count = absl::GetFlag(FLAGS_count);
  if (first < 0 || count < 1) {
    std::fprintf(stderr, "superserve-query: --image must be >= 0 and --count >= 1\n");
    return 2;
  }
  // NaN, infinite or past int64 nanoseconds, the deadline's conversion is UB.
  constexpr double kMaxTimeoutMs = ToMillis(kMaxQueryTimeout);
  const double timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  if (!(timeout_ms > 0 && timeout_ms <= kMaxTimeoutMs)) {  // (false for NaN)
    std::fprintf(stderr,
                 "superserve-query: --timeout_ms must be in (0, %.0f] (a day: the router's bound "
                 "on a deadline), got %g\n",
                 kMaxTimeoutMs, timeout_ms);
    return 2;
  }
  std::vector<int64_t> shape;
  for (auto part : absl::StrSplit(absl::GetFlag(FLAGS_input_shape), ',')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d <= 0) {
      std::fprintf(stderr, "superserve-query: bad --input_shape '%s'\n",
                   absl::GetFlag(FLAGS_input_shape).c_str());
      return 2;
    }
    shape.push_back(d);
  }
  auto images = LoadFashionMnist("t10k", absl::GetFlag(FLAGS_dataset_dir));
  if (!images.ok()) {
    std::fprintf(stderr, "superserve-query: %s\n", images.status().ToString().c_str());
    return 2;
  }
  // Checked without forming first + count: near INT64_MAX the sum overflowed
  // (UB; in practice it went negative), the check passed, nothing was sent
  // and the exit status said every call was answered.
  const int64_t test_set = images->images.num_items();
  if (first >= test_set || count > test_set - first) {
    std::fprintf(stderr,
                 "superserve-query: the test set has %lld images (--image 0-%lld); --image %lld "
                 "--count %lld runs past it\n",
                 static_cast<long long>(test_set), static_cast<long long>(test_set - 1),
                 static_cast<long long>(first), static_cast<long long>(count));
    return 2;
  }
  auto inputs = MakeImageRequests(*images, absl::GetFlag(FLAGS_model), shape, 0.f, 1.f,
                                  first + count);
  if (!inputs.ok()) {
    std::fprintf(stderr, "superserve-query: %s\n", inputs.status().ToString().c_str());
    return 2;
  }
  auto credentials = MakeChannelCredentials({absl::GetFlag(FLAGS_tls_ca_file), "", ""});
  if (!credentials.ok()) {
    std::fprintf(stderr, "superserve-query: %s\n", credentials.status().ToString().c_str());
    return 2;
  }
  InferenceClient client(absl::GetFlag(FLAGS_router), Transport::kUnary, *credentials);
  const Nanos timeout = Millis(timeout_ms);
  int failed = 0;
  std::printf("%-6s %-5s %-9s %-10s %-11s %-5s %-9s %-9s %s\n", "image", "label", "predicted",
              "served_by", "accuracy_%", "batch", "queue_us", "exec_us", "latency_ms");
  for (int64_t i = first; i < first + count; ++i) {
    v1::InferRequest request = *inputs->requests[i];
    if (!absl::GetFlag(FLAGS_application).empty()) {
      request.set_application(absl::GetFlag(FLAGS_application));
    }
    request.set_model_version(absl::GetFlag(FLAGS_version));
    const Nanos start = RealClock::Get()->Now();
    auto response = client.Infer(request, timeout);
    const double latency_ms = (RealClock::Get()->Now() - start) / 1e6;
    if (!response.ok()) {
      ++failed;
      std::printf("%-6lld %-5d failed after %.2f ms: %s\n", static_cast<long long>(i),
                  inputs->labels[i], latency_ms, response.status().ToString().c_str());
      continue;
    }
    // A supernet answers from a subnet, an early-exit model from an exit.
    const std::string served_by =
        response->served_by().exit() > 0
            ? absl::StrCat("exit ", response->served_by().exit())
            : absl::StrCat("subnet ", response->served_by().subnet_id());
    std::printf("%-6lld %-5d %-9d %-10s %-11.2f %-5d %-9lld %-9lld %.2f\n",
                static_cast<long long>(i), inputs->labels[i], ArgMax(response->output()),
                served_by.c_str(), response->served_by().accuracy(),
                response->batch_size(), static_cast<long long>(response->queue_us()),
                static_cast<long long>(response->exec_us()), latency_ms);
  }
  return failed == 0 ? 0 : 1;
}
