#ifndef SUPERSERVE_ROUTER_INFERENCE_SERVICE_H_
#define SUPERSERVE_ROUTER_INFERENCE_SERVICE_H_

#include <cstdint>

#include "common/time.h"
#include "router/dispatcher.h"
#include "superserve/v1/inference.grpc.pb.h"

namespace superserve {

// Inference.Infer and Inference.InferStream over gRPC's callback API: each
// query becomes a QueryResponder that the Dispatcher answers exactly once (a
// unary call's reactor, or one entry of a stream). The deadline is the client's gRPC
// deadline (`default_slo` when the client set none), converted to the
// dispatcher's clock.
class InferenceService final : public v1::Inference::CallbackService {
 public:
  InferenceService(Dispatcher* dispatcher, Nanos default_slo)
      : dispatcher_(dispatcher), default_slo_(default_slo) {}

  grpc::ServerUnaryReactor* Infer(grpc::CallbackServerContext* context,
                                  const v1::InferRequest* request,
                                  v1::InferResponse* response) override;
  // The same over one stream: each query carries its own timeout and tag.
  grpc::ServerBidiReactor<v1::InferStreamRequest, v1::InferStreamResponse>* InferStream(
      grpc::CallbackServerContext* context) override;

  // Infer and InferStream reactors not yet deleted (their OnDone has not run), over all
  // services in the process. For tests: it returns to 0 once every call
  // has completed.
  static int64_t LiveReactors();

 private:
  Dispatcher* const dispatcher_;
  const Nanos default_slo_;
};

// absl -> grpc status (same numeric codes).
grpc::Status ToGrpcStatus(const absl::Status& s);

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_INFERENCE_SERVICE_H_
