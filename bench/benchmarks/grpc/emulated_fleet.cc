#include "bench/benchmarks/grpc/emulated_fleet.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "absl/status/status.h"
#include "common/tensor_codec.h"

namespace superserve::bench {

namespace fs = std::filesystem;

std::string SelfDir() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).parent_path().string();
}

int InScratchDir(const char* benchmark, const std::function<int(const std::string&)>& run) {
  std::string dir = (fs::temp_directory_path() / "superserve-bench-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "%s: cannot create a scratch directory under %s\n", benchmark,
                 fs::temp_directory_path().c_str());
    return 1;
  }
  const int rc = run(dir);
  // Kept when it holds something to read: a usage error (refused before
  // anything ran) used to leave an empty folder behind on every call.
  std::error_code ec;
  if (rc == 0 || fs::is_empty(dir, ec)) {
    fs::remove_all(dir, ec);
  } else {
    std::fprintf(stderr, "%s: logs kept in %s\n", benchmark, dir.c_str());
  }
  return rc;
}

ModelProfile MakeEmulatedProfile(const EmulatedModel& m) {
  ModelProfile p;
  p.model = m.model;
  p.family = "emulated";
  p.batch_sizes = m.batch_sizes;
  p.input_shape = {1, 28, 28};
  p.num_classes = 10;
  p.measured_on = "synthetic (benchmark)";
  for (size_t i = 0; i < m.accuracy.size(); ++i) {
    SubnetProfile s;
    s.id = static_cast<int>(i);
    s.accuracy = m.accuracy[i];
    s.control.subnet_id = static_cast<int>(i);
    for (double f : m.batch_factor) s.latency.push_back(Micros(m.base_us[i] * f * m.scale));
    p.subnets.push_back(s);
  }
  return p;
}

EmulatedModel RouterBenchModel(double scale) {
  EmulatedModel m;
  m.batch_sizes = {1, 2, 4, 8, 16, 32, 64};
  m.accuracy = {80, 85, 88, 90};
  m.base_us = {1000, 1500, 2000, 3000};
  m.batch_factor = {1, 1.1, 1.3, 1.7, 2.5, 4, 7};
  m.scale = scale;
  return m;
}

absl::StatusOr<std::string> WriteEmulatedRepo(const std::string& repo, const EmulatedModel& m) {
  std::error_code ec;
  fs::create_directories(repo + "/" + m.model, ec);
  if (ec) return absl::InternalError("cannot create " + repo + "/" + m.model + ": " + ec.message());
  if (auto s = MakeEmulatedProfile(m).SaveFile(repo + "/" + m.model + "/profile.json"); !s.ok()) {
    return s;
  }
  return repo;
}

LabelledRequests BenchInputs(int n, const std::string& model) {
  LabelledRequests in;
  for (int i = 0; i < n; ++i) {
    std::vector<float> v(28 * 28, static_cast<float>(i) / n);
    auto req = std::make_shared<v1::InferRequest>();
    req->set_model(model);
    EncodeTensor(MakeFloatTensor({1, 28, 28}, v), req->mutable_input());
    in.requests.push_back(std::move(req));
    in.labels.push_back(i % 10);
  }
  return in;
}

std::vector<TraceArrival> PoissonTrace(double qps, double seconds, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(qps);
  std::vector<TraceArrival> trace(static_cast<size_t>(qps * seconds));
  double t = 0;
  for (auto& a : trace) {
    t += gap(rng);
    a.arrival = static_cast<Nanos>(t * 1e9);
  }
  return trace;
}

double CpuPerQuery(const char* benchmark, const absl::StatusOr<Nanos>& before,
                   const absl::StatusOr<Nanos>& after, int64_t served) {
  if (!before.ok() || !after.ok()) {
    const absl::Status& s = before.ok() ? after.status() : before.status();
    std::fprintf(stderr, "%s: CPU time: %s\n", benchmark, std::string(s.message()).c_str());
    return -1;
  }
  if (served <= 0) return -1;
  return ToMicros(*after - *before) / static_cast<double>(served);
}

std::string CpuText(double us_per_query) {
  if (us_per_query < 0) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f us", us_per_query);
  return text;
}

}  // namespace superserve::bench
