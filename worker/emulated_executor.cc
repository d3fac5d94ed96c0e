#include "worker/emulated_executor.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {

absl::Status EmulatedExecutor::Unload(const std::string& model) {
  std::lock_guard<std::mutex> lock(mu_);
  dynamic_.erase(model);
  if (profiles_.erase(model) == 0) {
    return absl::NotFoundError(absl::StrCat("model ", model, " not loaded"));
  }
  return absl::OkStatus();
}

int64_t EmulatedExecutor::ResidentBytes(const std::string& model) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = profiles_.find(model);
  return it == profiles_.end() ? 0 : std::max<int64_t>(0, it->second.memory_bytes);
}

absl::Status EmulatedExecutor::Load(const ModelEntry& model) {
  if (model.profile.load_time > 0) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(
        static_cast<Nanos>(slowdown_ * static_cast<double>(model.profile.load_time))));
  }
  if (model.profile.is_dynamic) {
    DynamicModel d;
    d.c0_us = model.profile.dynamic.batch_overhead_us;
    d.c1 = model.profile.dynamic.per_request_factor;
    std::vector<EmpiricalDistribution> parts;
    std::vector<double> weights;
    for (const auto& h : model.profile.dynamic.applications) {
      auto dist = EmpiricalDistribution::FromProfile(h);
      if (!dist.ok()) return dist.status();
      parts.push_back(*dist);
      double w = 0;
      for (double c : h.counts) w += c;
      weights.push_back(w);
      d.applications.emplace(h.application, *std::move(dist));
    }
    if (parts.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dynamic model ", model.name, " has no application histograms"));
    }
    auto mix = EmpiricalDistribution::Mixture(parts, weights);
    if (!mix.ok()) return mix.status();
    d.mix = *std::move(mix);
    for (const ExitThresholdProfile& t : model.profile.dynamic.thresholds) {
      auto& apps = d.at_threshold[static_cast<float>(t.threshold)];
      for (const auto& h : t.applications) {
        auto dist = EmpiricalDistribution::FromProfile(h);
        if (!dist.ok()) return dist.status();
        apps.emplace(h.application, *std::move(dist));
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    dynamic_[model.name] = std::move(d);
  }
  std::lock_guard<std::mutex> lock(mu_);
  profiles_[model.name] = model.profile;
  return absl::OkStatus();
}

absl::StatusOr<Nanos> EmulatedExecutor::EmulatedLatency(const std::string& model,
                                                        int32_t subnet_id, size_t batch) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = profiles_.find(model);
  if (it == profiles_.end()) return absl::NotFoundError(absl::StrCat("model ", model, " not loaded"));
  const ModelProfile& p = it->second;
  int s = p.SubnetIndex(subnet_id);
  if (s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", model, " has no subnet id ", subnet_id));
  }
  size_t b = 0;
  while (b + 1 < p.batch_sizes.size() && static_cast<size_t>(p.batch_sizes[b]) < batch) ++b;
  if (static_cast<size_t>(p.batch_sizes[b]) < batch) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", batch, " exceeds model ", model,
                                                   "'s largest batch ", p.batch_sizes[b]));
  }
  return p.subnets[s].latency[b];
}

absl::StatusOr<std::vector<HostTensor>> EmulatedExecutor::RunWithExits(
    const std::string& model, const ControlTuple& control,
    absl::Span<const v1::Tensor* const> inputs, absl::Span<const std::string* const> applications,
    std::vector<QueryExit>* exits) {
  exits->clear();
  const DynamicModel* found = nullptr;
  {
    // Entries are erased only by Unload, on the thread that runs batches.
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = dynamic_.find(model); it != dynamic_.end()) found = &it->second;
  }
  if (found == nullptr) return Run(model, control, inputs);
  const DynamicModel& d = *found;
  // The batch's exit threshold: one the profile measured (0: the default's).
  const auto* apps = &d.applications;
  if (control.exit_threshold != 0) {
    auto t = d.at_threshold.find(control.exit_threshold);
    if (t == d.at_threshold.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model, " has no exit threshold ",
                                                     control.exit_threshold, " in its profile"));
    }
    apps = &t->second;
  }
  const double k = static_cast<double>(inputs.size());
  double max_l = 0;
  exits->resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const EmpiricalDistribution* dist = &d.mix;
    if (i < applications.size() && applications[i] != nullptr) {
      if (auto a = apps->find(*applications[i]); a != apps->end()) {
        dist = &a->second;
      }
    }
    const double l = std::max(0.0, dist->Sample(rng_));
    max_l = std::max(max_l, l);
    (*exits)[i].own = Micros(l);
    (*exits)[i].at = Micros(d.c0_us + d.c1 * k * l);
  }
  std::vector<HostTensor> out = FakeLogits(model, inputs);
  std::this_thread::sleep_for(
      std::chrono::nanoseconds(Micros(slowdown_ * (d.c0_us + d.c1 * k * max_l))));
  return out;
}

absl::StatusOr<std::vector<HostTensor>> EmulatedExecutor::Run(
    const std::string& model, const ControlTuple& control,
    absl::Span<const v1::Tensor* const> inputs) {
  bool dynamic;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dynamic = dynamic_.count(model) > 0;
  }
  if (dynamic) {
    std::vector<QueryExit> ignored;
    return RunWithExits(model, control, inputs, {}, &ignored);
  }
  auto latency = EmulatedLatency(model, control.subnet_id, inputs.size());
  if (!latency.ok()) return latency.status();
  std::vector<HostTensor> out = FakeLogits(model, inputs);
  std::this_thread::sleep_for(
      std::chrono::nanoseconds(static_cast<Nanos>(slowdown_ * static_cast<double>(*latency))));
  return out;
}

std::vector<HostTensor> EmulatedExecutor::FakeLogits(const std::string& model,
                                                     absl::Span<const v1::Tensor* const> inputs) {
  int32_t classes = 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = profiles_.find(model); it != profiles_.end()) {
      classes = std::max(1, it->second.num_classes);
    }
  }
  std::vector<HostTensor> out;
  out.reserve(inputs.size());
  for (const v1::Tensor* in : inputs) {
    // A cheap deterministic hash of the input bytes, 8 at a time (a
    // byte-wise FNV-1a was ~9 % of the 16-instance worker's CPU).
    const std::string& bytes = in->data();
    uint64_t h = 1469598103934665603ull ^ bytes.size();
    size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, bytes.data() + i, 8);
      h = (h ^ w) * 1099511628211ull;
      h ^= h >> 29;
    }
    for (; i < bytes.size(); ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ull;
    h ^= h >> 32;
    std::vector<float> logits(classes, 0.f);
    logits[h % classes] = 1.f;
    out.push_back(MakeFloatTensor({classes}, logits));
  }
  return out;
}

}  // namespace superserve
