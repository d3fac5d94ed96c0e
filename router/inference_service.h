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
  // `max_stream_unsent_answers`: an InferStream whose client does not read
  // piles answers up behind a write that cannot complete (HTTP/2 flow
  // control); once this many wait, the stream is finished
  // RESOURCE_EXHAUSTED naming the bound, and its later answers are dropped.
  // 0 = no bound.
  InferenceService(Dispatcher* dispatcher, Nanos default_slo,
                   size_t max_stream_unsent_answers = kDefaultMaxStreamUnsentAnswers)
      : dispatcher_(dispatcher),
        default_slo_(default_slo),
        max_stream_unsent_answers_(max_stream_unsent_answers) {}
  static constexpr size_t kDefaultMaxStreamUnsentAnswers = 4096;

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
  const size_t max_stream_unsent_answers_;
};

// absl -> grpc status (same numeric codes).
grpc::Status ToGrpcStatus(const absl::Status& s);

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_INFERENCE_SERVICE_H_
