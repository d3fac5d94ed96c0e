// SummarizeModel: what ListModels reports of a model (model_summary.h).
#include "serving/model_summary.h"

#include <algorithm>

namespace superserve {
namespace {

// The figures an operator checks a dynamic model by (superserve-admin list).
void SummarizeDynamic(const DynamicModelProfile& d, ModelSummary* s) {
  s->dynamic = true;
  std::vector<double> exits = d.exit_accuracy;
  for (const ApplicationHistogram& h : d.applications) {
    s->applications.push_back(h.application);
    // The model's figures when measured, else every application's.
    if (d.exit_accuracy.empty()) {
      exits.insert(exits.end(), h.exit_accuracy.begin(), h.exit_accuracy.end());
    }
    s->num_exits = std::max(s->num_exits, static_cast<int32_t>(h.exit_accuracy.size()));
    for (size_t i = 0; i < h.counts.size(); ++i) {
      if (h.counts[i] <= 0) continue;
      const double lo = h.bin_edges_us[i], hi = h.bin_edges_us[i + 1];
      s->min_exec_us = s->min_exec_us == 0 ? lo : std::min(s->min_exec_us, lo);
      s->max_exec_us = std::max(s->max_exec_us, hi);
    }
  }
  s->num_exits = std::max(s->num_exits, static_cast<int32_t>(d.exit_accuracy.size()));
  if (!exits.empty()) {
    s->min_exit_accuracy = *std::min_element(exits.begin(), exits.end());
    s->max_exit_accuracy = *std::max_element(exits.begin(), exits.end());
  }
}

}  // namespace

ModelSummary SummarizeModel(const ServedModel& m, int64_t inflight_batches) {
  ModelSummary s;
  s.name = *m.name;
  s.family = m.profile.family;
  s.version = m.version;
  s.num_subnets = static_cast<int32_t>(m.profile.subnets.size());
  s.min_accuracy = 100;
  for (const auto& sub : m.profile.subnets) {
    s.min_accuracy = std::min(s.min_accuracy, sub.accuracy);
    s.max_accuracy = std::max(s.max_accuracy, sub.accuracy);
    if (!sub.latency.empty()) {
      const double l = ToMicros(sub.latency.front());
      s.min_latency_us = s.min_latency_us == 0 ? l : std::min(s.min_latency_us, l);
      s.max_latency_us = std::max(s.max_latency_us, l);
    }
  }
  s.batch_sizes = m.profile.batch_sizes;
  s.workers = static_cast<int32_t>(m.scheduler.workers().size());
  s.queued = static_cast<int64_t>(m.scheduler.queued());
  s.closed = m.closed;
  s.inflight_batches = inflight_batches;
  s.input_shape = m.profile.input_shape;
  s.num_classes = m.profile.num_classes;
  if (m.profile.is_dynamic) SummarizeDynamic(m.profile.dynamic, &s);
  return s;
}

}  // namespace superserve
