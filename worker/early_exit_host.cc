#include "worker/early_exit_host.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "models/early_exit.h"
#include "superserve/v1/tensor.pb.h"

namespace superserve {

EarlyExitHost::~EarlyExitHost() = default;

int64_t EarlyExitHost::ResidentBytes() const { return net_->ResidentBytes(); }

absl::StatusOr<std::unique_ptr<EarlyExitHost>> EarlyExitHost::Load(const ModelEntry& model,
                                                                   const std::string& checkpoint,
                                                                   const std::string& device) {
  auto net = models::EarlyExitNet::Load(checkpoint);
  if (!net.ok()) return net.status();
  if (auto st = (*net)->MoveTo(device); !st.ok()) return st;
  std::unique_ptr<EarlyExitHost> host(new EarlyExitHost());
  host->net_ = *std::move(net);
  const auto& c = host->net_->config();
  const std::vector<int64_t> expected = {c.in_channels, c.image_size, c.image_size};
  const auto list = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&s, i ? ", " : "", v[i]);
    return s + "]";
  };
  if (model.profile.input_shape != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", model.name, ": profile.json's input_shape ", list(model.profile.input_shape),
        " does not match checkpoint ", checkpoint, " (", list(expected), ")"));
  }
  // The profile describes the answers (num_classes: the router advertises
  // that output shape) and the exits (one accuracy per exit): a checkpoint
  // that disagrees would be served under the wrong description.
  if (model.profile.num_classes > 0 && model.profile.num_classes != c.num_classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", model.name, ": profile.json's num_classes ",
                     model.profile.num_classes, " but checkpoint ", checkpoint, " has ",
                     c.num_classes, " classes"));
  }
  const auto check_exits = [&](const std::vector<double>& acc,
                               const std::string& field) -> absl::Status {
    if (acc.empty() || static_cast<int>(acc.size()) == host->net_->num_exits()) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", model.name, ": profile.json's ", field, " has ", acc.size(),
        " entries (one per exit) but checkpoint ", checkpoint, " has ", host->net_->num_exits(),
        " exits"));
  };
  if (auto st = check_exits(model.profile.dynamic.exit_accuracy, "dynamic.exit_accuracy");
      !st.ok()) {
    return st;
  }
  for (const ApplicationHistogram& a : model.profile.dynamic.applications) {
    if (auto st = check_exits(a.exit_accuracy, absl::StrCat("application \"", a.application,
                                                            "\" exit_accuracy"));
        !st.ok()) {
      return st;
    }
  }
  host->input_shape_ = model.profile.input_shape;
  host->input_mean_ = model.profile.input_mean;
  host->input_std_ = model.profile.input_std;
  for (int32_t b : model.profile.batch_sizes) host->max_batch_ = std::max(host->max_batch_, b);

  // Warm-up, so that first-run allocations never land on served queries;
  // then batch-of-one runs with every exit forced time each exit.
  if (auto st = host->WarmUp(); !st.ok()) {  // e.g. a weight of the wrong shape: name the file
    return absl::InvalidArgumentError(absl::StrCat("model ", model.name, ": checkpoint ",
                                                   checkpoint, " fails its warm-up: ",
                                                   st.message()));
  }
  const float threshold = c.exit_threshold;
  host->own_threshold_ = threshold;
  host->net_->set_exit_threshold(2.f);
  int64_t sample = 1;
  for (int64_t d : host->input_shape_) sample *= d;
  std::vector<float> zeros(static_cast<size_t>(sample), 0.f);
  constexpr int kTimingRuns = 21;
  std::vector<std::vector<int64_t>> per_exit(host->net_->num_exits());
  for (int r = 0; r < kTimingRuns; ++r) {
    auto out = host->net_->Run(zeros.data(), 1);
    if (!out.ok()) return out.status();
    for (size_t e = 0; e < out->exit_reached_ns.size() && e < per_exit.size(); ++e) {
      per_exit[e].push_back(out->exit_reached_ns[e]);
    }
  }
  host->net_->set_exit_threshold(threshold);
  for (auto& v : per_exit) {
    if (v.empty()) return absl::InternalError("early exit warm-up reached no exit");
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    host->exit_times_.push_back(v[v.size() / 2]);
  }
  return host;
}

absl::Status EarlyExitHost::WarmUp() {
  // Every exit forced to run (no sample is that confident), at every batch
  // size a batch may have.
  const float threshold = net_->config().exit_threshold;
  net_->set_exit_threshold(2.f);
  int64_t sample = 1;
  for (int64_t d : input_shape_) sample *= d;
  std::vector<float> zeros(static_cast<size_t>(sample * max_batch_), 0.f);
  absl::Status st;
  for (int32_t b = 1; b <= max_batch_ && st.ok(); ++b) {
    if (auto out = net_->Run(zeros.data(), b); !out.ok()) st = out.status();
  }
  net_->set_exit_threshold(threshold);
  return st;
}

absl::StatusOr<std::vector<HostTensor>> EarlyExitHost::Run(
    absl::Span<const v1::Tensor* const> inputs, std::vector<QueryExit>* exits,
    float exit_threshold) {
  if (!(exit_threshold == 0 || (exit_threshold > 0 && exit_threshold <= 1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("exit threshold ", exit_threshold, " must be in (0, 1] (0: the model's own)"));
  }
  const int64_t n = static_cast<int64_t>(inputs.size());
  int64_t sample = 1;
  for (int64_t d : input_shape_) sample *= d;
  const size_t sample_bytes = static_cast<size_t>(sample) * sizeof(float);
  std::vector<float> x(static_cast<size_t>(n * sample));
  for (int64_t i = 0; i < n; ++i) {
    if (inputs[i]->data().size() != sample_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " has ", inputs[i]->data().size(),
                                                     " bytes, expected ", sample_bytes));
    }
    std::memcpy(x.data() + i * sample, inputs[i]->data().data(), sample_bytes);
  }
  // The model's own input normalisation: clients send plain values.
  if (input_mean_ != 0.f || input_std_ != 1.f) {
    for (float& v : x) v = (v - input_mean_) / input_std_;
  }
  net_->set_exit_threshold(exit_threshold > 0 ? exit_threshold : own_threshold_);
  auto out = net_->Run(x.data(), n);
  net_->set_exit_threshold(own_threshold_);
  if (!out.ok()) return out.status();
  const int64_t classes = net_->config().num_classes;
  std::vector<HostTensor> result;
  result.reserve(inputs.size());
  exits->assign(inputs.size(), QueryExit{});
  for (int64_t i = 0; i < n; ++i) {
    result.push_back(MakeFloatTensor(
        {classes}, absl::MakeConstSpan(out->logits.data() + i * classes, classes)));
    const int32_t e = out->exit_taken[i];
    QueryExit& q = (*exits)[i];
    q.exit = e;
    if (e >= 0 && static_cast<size_t>(e) < out->exit_reached_ns.size()) {
      q.at = out->exit_reached_ns[e];
    }
    q.own = n == 1 ? q.at
                   : (e >= 0 && static_cast<size_t>(e) < exit_times_.size() ? exit_times_[e] : 0);
  }
  return result;
}

}  // namespace superserve
