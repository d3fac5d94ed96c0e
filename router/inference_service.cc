#include "router/inference_service.h"

#include <chrono>

namespace superserve {
namespace {

class InferReactor final : public grpc::ServerUnaryReactor, public QueryResponder {
 public:
  InferReactor(Dispatcher* dispatcher, const v1::InferRequest* request,
               v1::InferResponse* response)
      : dispatcher_(dispatcher), request_(request), response_(response) {}

  const v1::InferRequest& request() const override { return *request_; }
  v1::InferResponse* response() override { return response_; }
  void Answer(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }

  // gRPC calls OnCancel before OnDone, so `this` is alive here. A call
  // already on a worker is answered when its batch returns; finishing a
  // cancelled call is allowed.
  void OnCancel() override { dispatcher_->OnCancelled(this); }
  void OnDone() override { delete this; }

 private:
  Dispatcher* const dispatcher_;
  const v1::InferRequest* const request_;
  v1::InferResponse* const response_;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

grpc::ServerUnaryReactor* InferenceService::Infer(grpc::CallbackServerContext* context,
                                                  const v1::InferRequest* request,
                                                  v1::InferResponse* response) {
  auto* reactor = new InferReactor(dispatcher_, request, response);
  const Nanos now = dispatcher_->clock()->Now();
  Nanos deadline = now + default_slo_;
  const auto client_deadline = context->deadline();
  if (client_deadline != std::chrono::system_clock::time_point::max()) {
    // The wire carries a relative timeout that gRPC turned into a wall-clock
    // deadline; turn it back into a span and anchor it on our clock.
    const auto left = client_deadline - std::chrono::system_clock::now();
    deadline = now + std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  }
  dispatcher_->Submit(reactor, deadline);
  return reactor;
}

}  // namespace superserve
