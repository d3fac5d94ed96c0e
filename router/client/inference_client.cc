#include "router/client/inference_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/clock.h"

namespace superserve {
namespace {

struct PendingCall {
  grpc::ClientContext context;
  std::shared_ptr<const v1::InferRequest> request;
  InferenceClient::Result result;
  InferenceClient::Callback done;
  Nanos start = 0;
};

}  // namespace

struct InferenceClient::InFlight {
  std::mutex mu;
  std::condition_variable done;
  int64_t calls = 0;
};

InferenceClient::InferenceClient(const std::string& address)
    : in_flight_(std::make_shared<InFlight>()) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // A query past its deadline is useless, and each call already has one:
  // no transparent retries (they also cost a buffering filter per call).
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Inference::NewStub(channel_);
}

InferenceClient::InferenceClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      stub_(v1::Inference::NewStub(channel_)),
      in_flight_(std::make_shared<InFlight>()) {}

InferenceClient::~InferenceClient() {
  std::unique_lock<std::mutex> lock(in_flight_->mu);
  in_flight_->done.wait(lock, [this] { return in_flight_->calls == 0; });
}

void InferenceClient::InferAsync(std::shared_ptr<const v1::InferRequest> request, Nanos timeout,
                                 Callback done) {
  auto* call = new PendingCall();
  call->request = std::move(request);
  call->done = std::move(done);
  call->start = RealClock::Get()->Now();
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(timeout));
  {
    std::lock_guard<std::mutex> lock(in_flight_->mu);
    ++in_flight_->calls;
  }
  stub_->async()->Infer(&call->context, call->request.get(), &call->result.response,
                        [call, in_flight = in_flight_](grpc::Status s) {
                          call->result.latency = RealClock::Get()->Now() - call->start;
                          call->result.status =
                              absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                                           s.error_message());
                          call->done(std::move(call->result));
                          delete call;  // drops the context's channel reference
                          std::lock_guard<std::mutex> lock(in_flight->mu);
                          if (--in_flight->calls == 0) in_flight->done.notify_all();
                        });
}

absl::StatusOr<v1::InferResponse> InferenceClient::Infer(const v1::InferRequest& request,
                                                         Nanos timeout) {
  // The blocking stub: the calling thread polls for its own completion, one
  // thread hop fewer than waiting on an async callback.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(timeout));
  v1::InferResponse response;
  grpc::Status s = stub_->Infer(&context, request, &response);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return response;
}

bool InferenceClient::WaitForConnected(Nanos timeout) {
  return channel_->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::nanoseconds(timeout));
}

}  // namespace superserve
