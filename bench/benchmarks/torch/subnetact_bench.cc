// SubNetAct microbenchmarks (SuperServe §3, Fig. 5), each against its
// baseline in the same run:
//   actuation: OfaResNet::Actuate (in-place switch) vs loading an extracted
//              subnet from disk (ImageNet-size OFA-ResNet50).
//   overhead:  actuated supernet forward vs the extracted dense subnet, same
//              input, interleaved (Fashion-MNIST size, 1 intra-op thread).
//   memory:    one supernet serving 500 subnets vs six extracted subnets
//              spanning the size (accuracy) range (ImageNet size).
#include <algorithm>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

#include <torch/torch.h>

#include "bench/benchmark_registry.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "models/ofa_resnet.h"

namespace superserve::bench {
namespace {


using models::OfaResNet;
using models::OfaResNetConfig;

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), std::string(s.ToString()).c_str());
  return 1;
}

// `count` slots: the smallest and largest subnets plus count-2 sampled ones.
std::vector<ControlTuple> SlotArchitectures(const OfaResNetConfig& c, int count, uint64_t seed) {
  std::vector<ControlTuple> archs = *models::SampleArchitectures(c, count - 2, seed);
  archs.push_back(models::SmallestArchitecture(c));
  archs.push_back(models::LargestArchitecture(c));
  for (size_t i = 0; i < archs.size(); ++i) archs[i].subnet_id = static_cast<int32_t>(i);
  return archs;
}

// Slot ids sorted by subnet parameter count (ascending).
std::vector<int> SlotsBySize(const OfaResNetConfig& c, const std::vector<ControlTuple>& archs) {
  std::vector<int> order(archs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return models::SubnetParameterCount(c, archs[a]) < models::SubnetParameterCount(c, archs[b]);
  });
  return order;
}

int RunActuation(const BenchmarkArgs& args) {
  const OfaResNetConfig c = OfaResNetConfig::ImageNetResNet50();
  auto model = OfaResNet::Create(c, 1);
  if (!model.ok()) return Fail("create", model.status());
  std::vector<ControlTuple> archs = SlotArchitectures(c, 500, 1);
  if (auto s = (*model)->SetSlots(archs); !s.ok()) return Fail("slots", s);
  (*model)->Eval();
  // The baseline: a median-size subnet, extracted and stored on disk.
  const int median = SlotsBySize(c, archs)[archs.size() / 2];
  auto extracted = (*model)->Extract(archs[median]);
  if (!extracted.ok()) return Fail("extract", extracted.status());
  const std::string path = "/tmp/superserve_actuation_" + std::to_string(getpid()) + ".pt";
  if (auto s = (*extracted)->Save(path); !s.ok()) return Fail("save", s);
  extracted->reset();

  constexpr int kRounds = 10, kActuationsPerRound = 2000;
  std::vector<double> actuation_us, load_ms;
  uint64_t lcg = 12345;
  int failures = 0;
  for (int r = 0; r < kRounds; ++r) {  // interleaved: each round measures both
    for (int i = 0; i < kActuationsPerRound; ++i) {
      lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
      const ControlTuple& t = archs[(lcg >> 33) % archs.size()];
      Nanos t0 = RealClock::Get()->Now();
      absl::Status s = (*model)->Actuate(t);
      Nanos t1 = RealClock::Get()->Now();
      failures += s.ok() ? 0 : 1;
      actuation_us.push_back(ToMicros(t1 - t0));
    }
    Nanos t0 = RealClock::Get()->Now();
    auto loaded = models::ExtractedSubnet::Load(path);
    Nanos t1 = RealClock::Get()->Now();
    if (!loaded.ok()) return Fail("load", loaded.status());
    load_ms.push_back(ToMillis(t1 - t0));
  }
  std::remove(path.c_str());
  const double p50 = Percentile(actuation_us, 0.5), p99 = Percentile(actuation_us, 0.99);
  const double load_p50 = Percentile(load_ms, 0.5);
  const double speedup = load_p50 * 1000.0 / p50;
  std::printf("actuation (500 slots, ImageNet OFA-ResNet50): p50 %.2f us, p99 %.2f us; load of "
              "extracted median subnet from disk: p50 %.1f ms; speedup %.0fx\n",
              p50, p99, load_p50, speedup);
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", "actuation")
                            .Add("actuation_us_p50", p50)
                            .Add("actuation_us_p99", p99)
                            .Add("load_ms_p50", load_p50)
                            .Add("speedup", speedup)
                            .Add("slots", static_cast<int64_t>(archs.size()))
                            .Add("actuations", static_cast<int64_t>(actuation_us.size()))
                            .Add("loads", static_cast<int64_t>(load_ms.size()))
                            .ToString()
                            .c_str());
  }
  return failures == 0 ? 0 : 1;
}

int RunOverhead(const BenchmarkArgs& args) {
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  const OfaResNetConfig c = OfaResNetConfig::FashionMnist();
  auto model = OfaResNet::Create(c, 2);
  if (!model.ok()) return Fail("create", model.status());
  std::vector<ControlTuple> archs = SlotArchitectures(c, 101, 2);
  if (auto s = (*model)->SetSlots(archs); !s.ok()) return Fail("slots", s);
  std::vector<int> by_size = SlotsBySize(c, archs);
  struct Subnet {
    const char* name;
    int slot;
  };
  const std::vector<Subnet> subnets = {{"smallest", by_size.front()},
                                       {"median", by_size[by_size.size() / 2]},
                                       {"largest", by_size.back()}};
  for (const Subnet& s : subnets) {  // realistic statistics (no denormals, no blow-ups)
    (void)(*model)->BeginCalibration(s.slot);
    (*model)->Forward(torch::randn({32, 1, 28, 28}));
    if (auto st = (*model)->FinishCalibration(); !st.ok()) return Fail("calibrate", st);
  }
  (*model)->Eval();

  JsonWriter json;
  json.Add("benchmark", "overhead").Add("intra_op_threads", static_cast<int64_t>(1));
  std::vector<JsonWriter> cases;
  double worst = 0;
  for (const Subnet& s : subnets) {
    auto extracted = (*model)->Extract(archs[s.slot]);
    if (!extracted.ok()) return Fail("extract", extracted.status());
    if (auto st = (*model)->Actuate(archs[s.slot]); !st.ok()) return Fail("actuate", st);
    for (int64_t batch : {1, 16}) {
      torch::Tensor x = torch::randn({batch, 1, 28, 28});
      const int iters = batch == 1 ? 20 : 4;
      for (int w = 0; w < 5; ++w) {
        (*model)->Forward(x);
        (*extracted)->Forward(x);
      }
      std::vector<double> actuated_us, dense_us;
      auto time = [&](auto&& fn) {
        Nanos t0 = RealClock::Get()->Now();
        for (int i = 0; i < iters; ++i) fn();
        return ToMicros(RealClock::Get()->Now() - t0) / iters;
      };
      for (int r = 0; r < 30; ++r) {  // interleaved, alternating which goes first
        auto run_actuated = [&] { actuated_us.push_back(time([&] { (*model)->Forward(x); })); };
        auto run_dense = [&] { dense_us.push_back(time([&] { (*extracted)->Forward(x); })); };
        if (r % 2 == 0) {
          run_actuated();
          run_dense();
        } else {
          run_dense();
          run_actuated();
        }
      }
      const double a = Percentile(actuated_us, 0.5), d = Percentile(dense_us, 0.5);
      const double ratio = a / d;
      worst = std::max(worst, ratio);
      std::printf("%-8s batch %2lld: actuated %8.1f us, extracted %8.1f us, ratio %.3f\n", s.name,
                  static_cast<long long>(batch), a, d, ratio);
      cases.push_back(JsonWriter()
                          .Add("subnet", s.name)
                          .Add("batch", batch)
                          .Add("actuated_us_p50", a)
                          .Add("extracted_us_p50", d)
                          .Add("ratio", ratio));
      json.Add(std::string("ratio_") + s.name + "_b" + std::to_string(batch), ratio);
    }
  }
  std::printf("worst ratio %.3f\n", worst);
  json.Add("worst_ratio", worst).AddArray("cases", cases);
  if (args.json) std::printf("%s\n", json.ToString().c_str());
  return 0;
}

int RunMemory(const BenchmarkArgs& args) {
  torch::NoGradGuard no_grad;
  const OfaResNetConfig c = OfaResNetConfig::ImageNetResNet50();
  auto model = OfaResNet::Create(c, 3);
  if (!model.ok()) return Fail("create", model.status());
  std::vector<ControlTuple> archs = SlotArchitectures(c, 500, 3);
  if (auto s = (*model)->SetSlots(archs); !s.ok()) return Fail("slots", s);
  const double mb = 1024.0 * 1024.0;
  const double supernet = (*model)->ResidentBytes() / mb;
  const double stats = (*model)->StatisticsBytes() / mb;
  // Six subnets spanning the range: smallest, largest, and the slots at the
  // 20/40/60/80th percentiles of parameter count among the 500.
  std::vector<int> by_size = SlotsBySize(c, archs);
  std::vector<int> six = {by_size.front()};
  for (double q : {0.2, 0.4, 0.6, 0.8}) six.push_back(by_size[static_cast<size_t>(q * 499)]);
  six.push_back(by_size.back());
  double separate = 0;
  std::vector<double> each;
  for (int slot : six) {
    auto e = (*model)->Extract(archs[slot]);
    if (!e.ok()) return Fail("extract", e.status());
    each.push_back((*e)->ResidentBytes() / mb);
    separate += each.back();
  }
  const double ratio = separate / supernet;
  std::printf("supernet with 500 slots: %.1f MB (weights+affine %.1f MB, statistics %.1f MB)\n",
              supernet, supernet - stats, stats);
  std::printf("six extracted subnets: %.1f MB (", separate);
  for (double e : each) std::printf(" %.1f", e);
  std::printf(" ); ratio %.2f\n", ratio);
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", "memory")
                            .Add("supernet_mb", supernet)
                            .Add("supernet_weights_mb", supernet - stats)
                            .Add("supernet_statistics_mb", stats)
                            .Add("separate_mb", separate)
                            .AddArray("separate_each_mb", each)
                            .Add("ratio", ratio)
                            .Add("slots", static_cast<int64_t>(archs.size()))
                            .ToString()
                            .c_str());
  }
  return 0;
}

RegisterBenchmark reg_actuation(
    "actuation", "SubNetAct in-place Actuate vs loading an extracted subnet from disk (ImageNet)",
    RunActuation);
RegisterBenchmark reg_overhead(
    "overhead", "actuated supernet forward vs extracted dense subnet (Fashion-MNIST, 1 thread)",
    RunOverhead);
RegisterBenchmark reg_memory(
    "memory", "one supernet with 500 subnet slots vs six extracted subnets (ImageNet)", RunMemory);

}  // namespace
}  // namespace superserve::bench
