#include "worker/latency_probe.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/tensor_codec.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {

absl::StatusOr<std::map<int32_t, std::vector<double>>> MeasureLatencies(Executor* executor,
                                                                       const ModelEntry& model,
                                                                       int repeats) {
  repeats = std::max(1, repeats);
  int64_t sample = 1;
  for (int64_t d : model.profile.input_shape) sample *= d;
  v1::Tensor zeros;
  EncodeTensor(MakeFloatTensor(model.profile.input_shape, std::vector<float>(sample, 0.f)),
               &zeros);
  RealClock* clock = RealClock::Get();
  std::map<int32_t, std::vector<double>> out;
  for (const SubnetProfile& s : model.profile.EverySubnet()) {
    std::vector<double>& row = out[s.id];
    for (int32_t b : model.profile.batch_sizes) {
      std::vector<const v1::Tensor*> inputs(b, &zeros);
      std::vector<double> times;
      for (int r = 0; r <= repeats; ++r) {
        const Nanos t0 = clock->Now();
        auto result = executor->Run(model.name, s.control, inputs);
        const Nanos t1 = clock->Now();
        if (!result.ok()) {
          return absl::Status(result.status().code(),
                              absl::StrCat("measuring subnet id ", s.id, " at batch ", b, ": ",
                                           result.status().message()));
        }
        if (r > 0) times.push_back(ToMicros(t1 - t0));  // the first run is not timed
      }
      std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
      row.push_back(std::max(times[times.size() / 2], 0.001));
    }
  }
  return out;
}

}  // namespace superserve
