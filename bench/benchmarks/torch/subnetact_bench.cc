// SubNetAct microbenchmarks (SuperServe §3, Fig. 5), each against its
// baseline in the same run:
//   actuation: OfaResNet::Actuate (in-place switch) vs loading an extracted
//              subnet from disk (ImageNet-size OFA-ResNet50) onto --device.
//   overhead:  actuated supernet forward vs the extracted dense subnet, same
//              input, interleaved (Fashion-MNIST size, 1 intra-op thread),
//              on --device (a GPU's times include the synchronisation).
//   memory:    one supernet serving 500 subnets vs six extracted subnets
//              spanning the size (accuracy) range (ImageNet size).
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "bench/benchmark_registry.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "models/device.h"
#include "models/ofa_resnet.h"

ABSL_FLAG(std::string, device, "cpu",
          "actuation, overhead: where the supernet and the extracted subnet run (cpu, cuda, "
          "cuda:N; cuda needs a CUDA LibTorch build, docs/gpu.md).");

namespace superserve::bench::subnetact_bench {
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
  const std::string device = absl::GetFlag(FLAGS_device);
  if (auto s = models::CheckDevice(device); !s.ok()) return Fail("--device", s);
  const OfaResNetConfig c = OfaResNetConfig::ImageNetResNet50();
  auto model = OfaResNet::Create(c, 1);
  if (!model.ok()) return Fail("create", model.status());
  std::vector<ControlTuple> archs = SlotArchitectures(c, 500, 1);
  if (auto s = (*model)->SetSlots(archs); !s.ok()) return Fail("slots", s);
  (*model)->Eval();
  if (auto s = (*model)->MoveTo(device); !s.ok()) return Fail("move", s);
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
    // The baseline's switch: read the subnet and put it where it runs.
    Nanos t0 = RealClock::Get()->Now();
    auto loaded = models::ExtractedSubnet::Load(path);
    if (!loaded.ok()) return Fail("load", loaded.status());
    if (auto s = (*loaded)->MoveTo(device); !s.ok()) return Fail("move", s);
    models::SynchronizeDevice(device);
    Nanos t1 = RealClock::Get()->Now();
    load_ms.push_back(ToMillis(t1 - t0));
  }
  std::remove(path.c_str());
  const double p50 = Percentile(actuation_us, 0.5), p99 = Percentile(actuation_us, 0.99);
  const double load_p50 = Percentile(load_ms, 0.5);
  const double speedup = load_p50 * 1000.0 / p50;
  std::printf(
      "actuation (500 slots, ImageNet OFA-ResNet50, %s): p50 %.2f us, p99 %.2f us; load of "
      "extracted median subnet from disk onto %s: p50 %.1f ms; speedup %.0fx\n",
      device.c_str(), p50, p99, device.c_str(), load_p50, speedup);
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", "actuation")
                            .Add("device", device)
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
  const std::string device = absl::GetFlag(FLAGS_device);
  if (auto s = models::CheckDevice(device); !s.ok()) return Fail("--device", s);
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
  if (auto s = (*model)->MoveTo(device); !s.ok()) return Fail("move", s);

  JsonWriter json;
  json.Add("benchmark", "overhead").Add("device", device).Add("intra_op_threads",
                                                             static_cast<int64_t>(1));
  std::vector<JsonWriter> cases;
  double worst = 0;
  for (const Subnet& s : subnets) {
    auto extracted = (*model)->Extract(archs[s.slot]);
    if (!extracted.ok()) return Fail("extract", extracted.status());
    if (auto st = (*extracted)->MoveTo(device); !st.ok()) return Fail("move", st);
    if (auto st = (*model)->Actuate(archs[s.slot]); !st.ok()) return Fail("actuate", st);
    for (int64_t batch : {1, 16}) {
      torch::Tensor x = torch::randn({batch, 1, 28, 28}).to(c10::Device(device));
      const int iters = batch == 1 ? 20 : 4;
      {  // both sides must compute the same function, or the timing means nothing
        torch::Tensor a = (*model)->Forward(x), d = (*extracted)->Forward(x);
        const double scale = std::max(1.0, d.abs().max().item<double>());
        if (!torch::allclose(a, d, 1e-4, 1e-5 * scale)) {
          std::fprintf(stderr, "overhead: actuated and extracted %s subnets disagree\n", s.name);
          return 1;
        }
      }
      for (int w = 0; w < 5; ++w) {
        (*model)->Forward(x);
        (*extracted)->Forward(x);
      }
      std::vector<double> actuated_us, dense_us, paired;
      auto time = [&](auto&& fn) {
        Nanos t0 = RealClock::Get()->Now();
        for (int i = 0; i < iters; ++i) fn();
        models::SynchronizeDevice(device);
        return ToMicros(RealClock::Get()->Now() - t0) / iters;
      };
      for (int r = 0; r < 40; ++r) {  // interleaved, alternating which goes first
        double a = 0, d = 0;
        if (r % 2 == 0) {
          a = time([&] { (*model)->Forward(x); });
          d = time([&] { (*extracted)->Forward(x); });
        } else {
          d = time([&] { (*extracted)->Forward(x); });
          a = time([&] { (*model)->Forward(x); });
        }
        actuated_us.push_back(a);
        dense_us.push_back(d);
        paired.push_back(a / d);
      }
      // The median of per-round ratios: each round's two timings share the
      // machine's load at that moment, which the shared box changes a lot.
      const double a = Percentile(actuated_us, 0.5), d = Percentile(dense_us, 0.5);
      const double ratio = Percentile(paired, 0.5);
      worst = std::max(worst, ratio);
      std::printf(
          "%-8s batch %2lld: actuated %8.1f us, extracted %8.1f us (p50), paired ratio "
          "p50 %.3f [p25 %.3f, p75 %.3f]\n",
          s.name, static_cast<long long>(batch), a, d, ratio, Percentile(paired, 0.25),
          Percentile(paired, 0.75));
      cases.push_back(JsonWriter()
                          .Add("subnet", s.name)
                          .Add("batch", batch)
                          .Add("actuated_us_p50", a)
                          .Add("extracted_us_p50", d)
                          .Add("ratio", ratio)
                          .Add("ratio_p25", Percentile(paired, 0.25))
                          .Add("ratio_p75", Percentile(paired, 0.75)));
      json.Add(std::string("ratio_") + s.name + "_b" + std::to_string(batch), ratio);
    }
  }
  std::printf("worst ratio %.3f\n", worst);
  json.Add("worst_ratio", worst).AddArray("cases", cases);
  if (args.json) std::printf("%s\n", json.ToString().c_str());
  return 0;
}

// Six subnets spanning the size (and so accuracy) range evenly: the smallest,
// the largest and the four whose parameter counts are closest to the evenly
// spaced sizes in between, found among seeded candidates whose choices are
// biased from small to large (uniform sampling rarely yields large subnets).
std::vector<ControlTuple> EvenlySpacedArchitectures(const OfaResNetConfig& c, uint64_t seed) {
  const double lo = models::SubnetParameterCount(c, models::SmallestArchitecture(c));
  const double hi = models::SubnetParameterCount(c, models::LargestArchitecture(c));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> jitter(0, 0.25);
  auto pick = [&](const auto& choices, double bias) {
    double u = std::clamp(bias + jitter(rng), 0.0, 0.999);
    return choices[static_cast<size_t>(u * choices.size())];
  };
  std::vector<ControlTuple> best(4);
  std::vector<double> best_gap(4, 1e300);
  for (int n = 0; n < 20000; ++n) {
    const double bias = unit(rng);
    ControlTuple t;
    for (int64_t s = 0; s < c.num_stages(); ++s) t.depths.push_back(pick(c.depth_choices, bias));
    for (int64_t b = 0; b < c.num_blocks(); ++b) {
      t.expand_ratios.push_back(pick(c.expand_ratio_choices, bias));
    }
    for (int64_t s = 0; s <= c.num_stages(); ++s) {
      t.width_multipliers.push_back(pick(c.width_multiplier_choices, bias));
    }
    t = models::Canonicalize(c, t);
    const double p = models::SubnetParameterCount(c, t);
    for (int k = 0; k < 4; ++k) {
      const double gap = std::abs(p - (lo + (k + 1) * (hi - lo) / 5));
      if (gap < best_gap[k]) {
        best_gap[k] = gap;
        best[k] = t;
      }
    }
  }
  std::vector<ControlTuple> six = {models::SmallestArchitecture(c)};
  six.insert(six.end(), best.begin(), best.end());
  six.push_back(models::LargestArchitecture(c));
  return six;
}

struct MemoryResult {
  double supernet_mb = 0, statistics_mb = 0, even_mb = 0, quantile_mb = 0;
  std::vector<double> even_each, quantile_each;
};

absl::StatusOr<MemoryResult> MeasureMemory(models::StatisticsPrecision precision) {
  OfaResNetConfig c = OfaResNetConfig::ImageNetResNet50();
  c.statistics_precision = precision;
  auto model = OfaResNet::Create(c, 3);
  if (!model.ok()) return model.status();
  // 500 slots: the six evenly spaced subnets plus 494 uniformly sampled ones.
  std::vector<ControlTuple> archs = EvenlySpacedArchitectures(c, 3);
  std::vector<ControlTuple> sampled = *models::SampleArchitectures(c, 494, 3);
  archs.insert(archs.end(), sampled.begin(), sampled.end());
  for (size_t i = 0; i < archs.size(); ++i) archs[i].subnet_id = static_cast<int32_t>(i);
  if (auto s = (*model)->SetSlots(archs); !s.ok()) return s;
  const double mb = 1024.0 * 1024.0;
  MemoryResult r;
  r.supernet_mb = (*model)->ResidentBytes() / mb;
  r.statistics_mb = (*model)->StatisticsBytes() / mb;
  // Alternative span: smallest, largest and the 20/40/60/80th percentiles of
  // parameter count among the 500 slots (mostly mid-size subnets).
  std::vector<int> by_size = SlotsBySize(c, archs);
  std::vector<int> quantile = {by_size.front()};
  for (double q : {0.2, 0.4, 0.6, 0.8}) quantile.push_back(by_size[static_cast<size_t>(q * 499)]);
  quantile.push_back(by_size.back());
  for (int slot = 0; slot < 6; ++slot) {
    auto e = (*model)->Extract(archs[slot]);
    if (!e.ok()) return e.status();
    r.even_each.push_back((*e)->ResidentBytes() / mb);
    r.even_mb += r.even_each.back();
  }
  for (int slot : quantile) {
    auto e = (*model)->Extract(archs[slot]);
    if (!e.ok()) return e.status();
    r.quantile_each.push_back((*e)->ResidentBytes() / mb);
    r.quantile_mb += r.quantile_each.back();
  }
  return r;
}

int RunMemory(const BenchmarkArgs& args) {
  torch::NoGradGuard no_grad;
  auto half = MeasureMemory(models::StatisticsPrecision::kFloat16);
  if (!half.ok()) return Fail("float16 statistics", half.status());
  auto full = MeasureMemory(models::StatisticsPrecision::kFloat32);
  if (!full.ok()) return Fail("float32 statistics", full.status());
  auto print = [](const char* name, const MemoryResult& r) {
    std::printf(
        "%s: supernet with 500 slots %.1f MB (weights+affine %.1f MB, statistics %.1f "
        "MB); six evenly spaced subnets %.1f MB (",
        name, r.supernet_mb, r.supernet_mb - r.statistics_mb, r.statistics_mb, r.even_mb);
    for (double e : r.even_each) std::printf(" %.1f", e);
    std::printf(" ) ratio %.2f; six quantile subnets %.1f MB (", r.even_mb / r.supernet_mb,
                r.quantile_mb);
    for (double e : r.quantile_each) std::printf(" %.1f", e);
    std::printf(" ) ratio %.2f\n", r.quantile_mb / r.supernet_mb);
  };
  print("float16 statistics (default)", *half);
  print("float32 statistics", *full);
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", "memory")
                            .Add("slots", static_cast<int64_t>(500))
                            .Add("supernet_mb", half->supernet_mb)
                            .Add("supernet_statistics_mb", half->statistics_mb)
                            .Add("separate_mb", half->even_mb)
                            .AddArray("separate_each_mb", half->even_each)
                            .Add("ratio", half->even_mb / half->supernet_mb)
                            .Add("ratio_quantile_six", half->quantile_mb / half->supernet_mb)
                            .Add("separate_quantile_mb", half->quantile_mb)
                            .Add("supernet_fp32_statistics_mb", full->supernet_mb)
                            .Add("ratio_fp32_statistics", full->even_mb / full->supernet_mb)
                            .Add("ratio_fp32_statistics_quantile_six",
                                 full->quantile_mb / full->supernet_mb)
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
}  // namespace superserve::bench::subnetact_bench
