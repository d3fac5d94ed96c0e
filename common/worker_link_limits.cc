#include "common/worker_link_limits.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace superserve {

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  return a > kMax / b ? kMax : a * b;
}

std::string MiB(int64_t bytes) {
  return absl::StrCat(static_cast<double>(bytes) / double(1 << 20), " MiB");
}

}  // namespace

int64_t WorkerLinkQueryBytes(const ModelProfile& profile) {
  int64_t elements = 1;
  for (int64_t d : profile.input_shape) elements = SaturatingMul(elements, d);
  const int64_t input = SaturatingMul(elements, sizeof(float));
  const int64_t output = SaturatingMul(profile.num_classes, sizeof(float));
  const int64_t data = input > output ? input : output;
  return data > kMax - kWorkerLinkQueryOverheadBytes ? kMax
                                                       : data + kWorkerLinkQueryOverheadBytes;
}

absl::Status CheckBatchesFitWorkerLink(const ModelProfile& profile, int64_t reserve) {
  const int64_t per_query = WorkerLinkQueryBytes(profile);
  const int64_t room = kWorkerLinkMaxMessageBytes - reserve;
  const int32_t largest = profile.max_batch();
  if (SaturatingMul(per_query, largest) <= room) return absl::OkStatus();
  int32_t fits = 0;
  for (int32_t b : profile.batch_sizes) {
    if (SaturatingMul(per_query, b) <= room) fits = b;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "model \"", profile.model, "\": a batch of ", largest, " queries of ", per_query,
      " bytes each (input shape and classes as profiled, FP32) is ", MiB(SaturatingMul(per_query, largest)),
      " in one worker-link message, over its limit of ", MiB(kWorkerLinkMaxMessageBytes),
      fits > 0 ? absl::StrCat("; the largest batch size that fits is ", fits,
                              ": remove the larger ones from the profile's batch_sizes")
               : std::string("; not even one query fits")));
}

}  // namespace superserve
