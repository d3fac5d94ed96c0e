#include "router/inference_service.h"

#include <atomic>
#include <chrono>

namespace superserve {
namespace {

std::atomic<int64_t> live_reactors{0};

class InferReactor final : public grpc::ServerUnaryReactor, public QueryResponder {
 public:
  InferReactor(Dispatcher* dispatcher, const v1::InferRequest* request,
               v1::InferResponse* response)
      : dispatcher_(dispatcher), request_(request), response_(response) {
    live_reactors.fetch_add(1, std::memory_order_relaxed);
  }
  ~InferReactor() override { live_reactors.fetch_sub(1, std::memory_order_relaxed); }

  const v1::InferRequest& request() const override { return *request_; }
  v1::InferResponse* response() override { return response_; }
  void Answer(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }

  // gRPC calls OnCancel before OnDone, so `this` is alive here. A call
  // already on a worker is answered when its batch returns; finishing a
  // cancelled call is allowed.
  void OnCancel() override { dispatcher_->OnCancelled(this); }
  void OnDone() override { delete this; }

  // gRPC 1.51 otherwise hands OnDone (and with it the call's teardown and
  // the re-arming of the next Infer request) to its executor thread: one
  // more thread wake-up per query (perf: ~1/4 of the router's CPU ran on
  // "default-executor"). Both reactions are trivial and safe on whichever
  // gRPC thread finishes the call: OnDone deletes the reactor; OnCancel
  // takes the Dispatcher's lock, which no thread holds while calling into
  // gRPC (the Dispatcher runs all network actions after releasing it).
  // The hook is public in <grpcpp/support/server_callback.h> but marked
  // "not API"; tests/router/inference_service_test.cc pins the behaviour.
  bool InternalInlineable() override { return true; }

 private:
  Dispatcher* const dispatcher_;
  const v1::InferRequest* const request_;
  v1::InferResponse* const response_;
};

}  // namespace

int64_t InferenceService::LiveReactors() { return live_reactors.load(); }

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
