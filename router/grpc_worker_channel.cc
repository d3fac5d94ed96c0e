#include "router/grpc_worker_channel.h"

#include <algorithm>

#include "router/tensor_payload.h"

namespace superserve {

void GrpcWorkerChannel::OnRegistered(const std::string& assigned_name, Nanos heartbeat_interval) {
  auto ack = std::make_unique<v1::RouterMessage>();
  ack->mutable_ack()->set_assigned_id(assigned_name);
  ack->mutable_ack()->set_heartbeat_interval_ms(heartbeat_interval / kNanosPerMilli);
  connection_->Send(std::move(ack));
}

void GrpcWorkerChannel::Send(BatchPlan batch) { connection_->Send(Encode(batch)); }

void GrpcWorkerChannel::Load(const std::string& model, Nanos /*expected*/) {
  auto msg = std::make_unique<v1::RouterMessage>();
  msg->mutable_load_model()->set_model(model);
  msg->mutable_load_model()->set_from_repository(true);
  connection_->Send(std::move(msg));
}

void GrpcWorkerChannel::Unload(const std::string& model) {
  auto msg = std::make_unique<v1::RouterMessage>();
  msg->mutable_unload_model()->set_model(model);
  // Placement's eviction (or a removal the admin call then completes with
  // HotModels::Unload): a hot-registered package stays, to load again.
  msg->mutable_unload_model()->set_keep_package(true);
  connection_->Send(std::move(msg));
}

std::unique_ptr<v1::RouterMessage> GrpcWorkerChannel::Encode(const BatchPlan& b) {
  auto message = std::make_unique<v1::RouterMessage>();
  v1::Batch* batch = message->mutable_batch();
  batch->set_batch_id(b.batch_id);
  batch->set_model(b.model);
  ControlTupleToProto(b.control, batch->mutable_control());
  batch->mutable_control()->set_subnet_id(b.subnet_id);
  // The worker's window is relative: its clock is not ours.
  if (b.earliest > b.sent_at) batch->set_earliest_us((b.earliest - b.sent_at) / kNanosPerMicro);
  if (b.latest > 0) {
    batch->set_latest_us(std::max<Nanos>(1, (b.latest - b.sent_at) / kNanosPerMicro));
  }
  batch->mutable_queries()->Reserve(static_cast<int>(b.queries.size()));
  for (size_t i = 0; i < b.queries.size(); ++i) {
    v1::BatchQuery* q = batch->add_queries();
    q->set_query_id(b.queries[i]);
    if (const auto* input = static_cast<const TensorPayload*>(b.inputs[i].get())) {
      *q->mutable_input() = input->tensor;
      if (!input->application.empty()) q->set_application(input->application);
    }
  }
  return message;
}

namespace {

// Reported times are clamped to [0, 1 h] before they become nanoseconds: a
// worker's numbers are input, and an int64 of microseconds can overflow.
Nanos ReportedMicros(int64_t us) {
  constexpr int64_t kMaxUs = int64_t{3600} * 1000 * 1000;
  return std::clamp<int64_t>(us, 0, kMaxUs) * kNanosPerMicro;
}

}  // namespace

BatchOutcome DecodeBatchResult(v1::BatchResult* result) {
  BatchOutcome o;
  o.batch_id = result->batch_id();
  o.exec = ReportedMicros(result->exec_us());
  o.worker_queue = ReportedMicros(result->worker_queue_us());
  if (!result->error().empty()) {
    const int code = result->error_code();
    const bool known = code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated);
    o.status = absl::Status(known ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kInternal,
                            result->error());
    return o;
  }
  o.outputs.reserve(result->results_size());
  for (v1::QueryResult& r : *result->mutable_results()) {
    // Dynamic models: the query's own time and exit feed the policy's
    // per-application distributions (the core fills in the application).
    if (r.exit() > 0 || r.own_us() > 0) {
      QueryTelemetry t;
      t.id = r.query_id();
      t.exec = ReportedMicros(r.own_us());
      t.exit = r.exit() > 0 ? r.exit() - 1 : -1;
      o.query_times.push_back(t);
    }
    auto out = std::make_shared<TensorPayload>();
    out->tensor.Swap(r.mutable_output());
    o.outputs.emplace_back(r.query_id(), std::move(out));
  }
  return o;
}

}  // namespace superserve
