#ifndef SUPERSERVE_ROUTER_CLIENT_LOAD_GENERATOR_H_
#define SUPERSERVE_ROUTER_CLIENT_LOAD_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/idx_reader.h"
#include "common/image_applications.h"
#include "common/time.h"
#include "router/client/inference_client.h"
#include "router/client/trace_csv.h"

namespace superserve {

// Requests for a labelled image set, built once and reused by every replayed
// query: float32 tensors of `shape` holding (pixel/255 - mean) / std.
struct LabelledRequests {
  std::vector<std::shared_ptr<const v1::InferRequest>> requests;
  std::vector<int32_t> labels;
};

// Index of the largest value of a float32 output tensor (the predicted
// class); -1 for any other dtype or an empty tensor.
int32_t ArgMax(const v1::Tensor& t);

absl::StatusOr<LabelledRequests> MakeImageRequests(const LabeledImages& images,
                                                   const std::string& model,
                                                   const std::vector<int64_t>& shape, float mean,
                                                   float std_dev, int64_t limit = 0);

// Requests of one application of a dynamic model (common/image_applications.h):
// the test images of the application's classes, each as the application
// sends it (pixels/255, plus its seeded noise), the first `limit` of them
// (0 = all). Clients send plain values; the worker normalises.
absl::StatusOr<LabelledRequests> MakeApplicationRequests(const LabeledImages& images,
                                                         const std::string& model,
                                                         const std::vector<int64_t>& shape,
                                                         const ImageApplication& app,
                                                         int64_t limit = 0);

// The inputs a trace row draws from (by its model and application); nullptr
// = no inputs for that row (ReplayTrace fails before sending anything).
using InputsForRow = std::function<const LabelledRequests*(const TraceArrival&)>;

struct ReplayOptions {
  Nanos default_slo = Millis(100);  // for trace rows without an SLO
  int64_t max_queries = 0;          // 0 = the whole trace
  double time_scale = 1.0;          // arrival times are multiplied by this
  bool progress = true;             // progress bar on stderr
  // After the last send and its SLO, the replay waits while answers keep
  // coming; it stops after drain_timeout without one. Queries still out then
  // are recorded unanswered (code kUnknown, answered false).
  Nanos drain_timeout = Seconds(10);
};

// What happened to one replayed query.
struct QueryRecord {
  Nanos sent = 0;     // since the replay start
  Nanos slo = 0;
  Nanos latency = 0;  // client-side, send to answer
  absl::StatusCode code = absl::StatusCode::kUnknown;
  bool answered = false;
  bool in_slo = false;  // OK and latency <= slo
  int32_t subnet_id = -1;
  // Profiled top-1 accuracy, percent, of the serving subnet (or, for a
  // dynamic model, of its exit).
  double accuracy = 0;
  int32_t exit = 0;  // dynamic models: the 1-based exit taken; 0 otherwise
  float exit_threshold = 0;  // dynamic models: its batch's exit threshold; 0 = not stated
  int32_t batch_size = 0;
  int64_t queue_us = 0;
  int64_t exec_us = 0;
  int32_t label = -1;
  int32_t predicted = -1;  // argmax of the returned float32 output
  std::string worker;
  std::string model;        // the row's model (empty: the default)
  std::string application;  // the row's application tag
  int64_t input = -1;       // index into the row's LabelledRequests
};

// The load generator's JSON summary (printed last by superserve-loadgen).
struct ReplaySummary {
  int64_t queries = 0;
  int64_t ok = 0;                 // served within the SLO
  double slo_attainment = 0;      // ok / queries
  double mean_accuracy = 0;       // mean profiled accuracy over ok queries, percent
  double measured_accuracy = 0;   // top-1 percent: ok queries whose prediction was right
  double p50_ms = 0, p99_ms = 0;  // latency of answered queries
  double throughput_qps = 0;      // ok / replay span
  std::string ToJson() const;
};

// Open-loop replay in real time: query i is sent at trace[i].arrival whether
// or not earlier ones are answered; its input is requests[i % n]. Returns one
// record per query once all are answered, or when drain_timeout passes
// without an answer (the rest are recorded unanswered).
absl::StatusOr<std::vector<QueryRecord>> ReplayTrace(InferenceClient& client,
                                                     const std::vector<TraceArrival>& trace,
                                                     const LabelledRequests& inputs,
                                                     const ReplayOptions& options);

// Mixed replay: row i is sent with input i % n of inputs_for(trace[i])
// (e.g. per model and application from the trace's `model` and
// `application` columns).
absl::StatusOr<std::vector<QueryRecord>> ReplayTrace(InferenceClient& client,
                                                     const std::vector<TraceArrival>& trace,
                                                     const InputsForRow& inputs_for,
                                                     const ReplayOptions& options);

// The same through several clients (one connection and one sending thread
// each): row i goes through clients[i % clients.size()], still at its own
// arrival time. For rates one sending thread cannot issue.
absl::StatusOr<std::vector<QueryRecord>> ReplayTrace(absl::Span<InferenceClient* const> clients,
                                                     const std::vector<TraceArrival>& trace,
                                                     const InputsForRow& inputs_for,
                                                     const ReplayOptions& options);

ReplaySummary Summarize(const std::vector<QueryRecord>& records);

// Summaries per (model, application) group of a mixed replay, in order of
// first appearance: one JSON object per group with "model" and "application"
// added to ReplaySummary's fields.
std::vector<std::string> SummarizeGroupsJson(const std::vector<QueryRecord>& records);

// One row per query: sent_us,slo_us,latency_us,status,in_slo,subnet,accuracy,
// batch_size,queue_us,exec_us,label,predicted,correct,worker,model,application.
absl::Status WriteRecordsCsv(const std::string& path, const std::vector<QueryRecord>& records);

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_CLIENT_LOAD_GENERATOR_H_
