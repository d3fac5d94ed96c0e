// What ListModels reports of one served model (superserve-admin list): its
// profile in brief, its workers, its queue and its batches in flight.
#ifndef SUPERSERVE_SERVING_MODEL_SUMMARY_H_
#define SUPERSERVE_SERVING_MODEL_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "serving/model_registry.h"

namespace superserve {

struct ModelSummary {
  std::string name;
  std::string family;
  int64_t version = 0;
  int32_t num_subnets = 0;
  double min_accuracy = 0;
  double max_accuracy = 0;
  // The fastest and slowest subnet at the smallest batch size (profile).
  double min_latency_us = 0;
  double max_latency_us = 0;
  std::vector<int32_t> batch_sizes;
  int32_t workers = 0;
  int64_t queued = 0;
  int64_t inflight_batches = 0;  // on workers, with queries still to answer
  bool closed = false;           // CloseModel: draining before removal
  std::vector<int64_t> input_shape;  // one sample's, no batch dimension
  int32_t num_classes = 0;
  // A dynamic (early-exit) model's profile, in brief (num_subnets is 0):
  // its applications, its exits (those with a measured accuracy), the range
  // of the exits' accuracy over the test set (percent), and the range of its
  // measured execution times over every application's histogram (µs).
  bool dynamic = false;
  std::vector<std::string> applications;
  int32_t num_exits = 0;
  double min_exit_accuracy = 0;
  double max_exit_accuracy = 0;
  double min_exec_us = 0;
  double max_exec_us = 0;
};

// The summary of `m`, with `inflight_batches` of its batches on workers
// (WorkerPool::AnsweringBatches).
ModelSummary SummarizeModel(const ServedModel& m, int64_t inflight_batches);

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_MODEL_SUMMARY_H_
