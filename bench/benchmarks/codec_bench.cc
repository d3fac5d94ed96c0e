// `codec`: the wire tensor codec's serialize+parse+validate of one
// Fashion-MNIST sample (1x28x28 float32) against a bare memcpy of the same
// bytes (the floor any codec pays).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench/benchmark_registry.h"
#include "common/clock.h"
#include "common/json_writer.h"
#include "common/tensor_codec.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve::bench::codec_bench {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int RunCodec(const BenchmarkArgs& args) {
  std::vector<float> values(28 * 28);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 255) / 255.f;
  HostTensor t = MakeFloatTensor({1, 28, 28}, values);
  constexpr int kReps = 20, kIters = 2000;
  std::vector<double> codec_ns, memcpy_ns;
  std::string wire, sink(t.data.size(), '\0');
  volatile size_t guard = 0;
  for (int r = 0; r < kReps; ++r) {  // interleaved: each rep measures both
    Nanos t0 = RealClock::Get()->Now();
    for (int i = 0; i < kIters; ++i) {
      v1::Tensor p;
      EncodeTensor(t, &p);
      p.SerializeToString(&wire);
      v1::Tensor q;
      q.ParseFromString(wire);
      auto d = DecodeTensor(q);
      guard += d.ok() ? d->data.size() : 0;
    }
    Nanos t1 = RealClock::Get()->Now();
    for (int i = 0; i < kIters; ++i) {
      std::memcpy(sink.data(), t.data.data(), t.data.size());
      guard += static_cast<unsigned char>(sink[i % sink.size()]);
    }
    Nanos t2 = RealClock::Get()->Now();
    codec_ns.push_back(static_cast<double>(t1 - t0) / kIters);
    memcpy_ns.push_back(static_cast<double>(t2 - t1) / kIters);
  }
  double c = Median(codec_ns), m = std::max(Median(memcpy_ns), 1.0);
  std::printf("codec round trip %.0f ns/sample, memcpy %.0f ns/sample, ratio %.1f\n", c, m, c / m);
  if (args.json) {
    std::printf("%s\n", JsonWriter()
                            .Add("benchmark", "codec")
                            .Add("codec_ns_p50", c)
                            .Add("memcpy_ns_p50", m)
                            .Add("ratio", c / m)
                            .ToString()
                            .c_str());
  }
  return guard == 0 ? 1 : 0;
}

RegisterBenchmark reg("codec", "wire tensor encode+serialize+parse+validate vs memcpy",
                      RunCodec);

}  // namespace
}  // namespace superserve::bench::codec_bench
