#ifndef SUPERSERVE_ROUTER_OPEN_INFERENCE_SERVICE_H_
#define SUPERSERVE_ROUTER_OPEN_INFERENCE_SERVICE_H_

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "common/time.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "router/dispatcher.h"
#include "superserve/v1/inference.pb.h"

namespace superserve {

// The Open Inference Protocol (KServe v2, `inference.GRPCInferenceService`)
// as a thin adapter over the Dispatcher: a ModelInfer call is translated
// into the native superserve.v1 InferRequest and submitted exactly as
// Inference.Infer submits it (same queue, policy, validation and answer
// rules); its answer is translated back. docs/oip.md has the mapping.
//
// Tensors: one FP32 input named "input", shape [1, <model input shape>]
// (the leading 1 is the batch dimension: the router batches queries itself);
// one FP32 output "logits", shape [1, classes], in raw_output_contents.
// Deadline: the request parameter "timeout" (microseconds, Triton's) when
// set, else the gRPC deadline, else the router's default SLO. The response
// parameters carry the served subnet and its accuracy, and with the request
// parameter superserve_details=true also worker, batch size and timings.
//
// ModelInfer and ModelStreamInfer are raw (ByteBuffer) methods, parsed here
// as InferenceService's: a request that does not parse is INVALID_ARGUMENT
// saying so, not gRPC's UNIMPLEMENTED (unary) or a silent end of the
// stream's reads (router/answering_stream.h).
using OipServiceBase = inference::GRPCInferenceService::WithCallbackMethod_ServerLive<
    inference::GRPCInferenceService::WithCallbackMethod_ServerReady<
        inference::GRPCInferenceService::WithCallbackMethod_ModelReady<
            inference::GRPCInferenceService::WithCallbackMethod_ServerMetadata<
                inference::GRPCInferenceService::WithCallbackMethod_ModelMetadata<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                        inference::GRPCInferenceService::WithRawCallbackMethod_ModelStreamInfer<
                            inference::GRPCInferenceService::Service>>>>>>>;
class OpenInferenceService final : public OipServiceBase {
 public:
  // `max_stream_unsent_answers`: ModelStreamInfer's bound on answers piled
  // up behind a write its client does not read, as InferenceService's.
  // `inline_completion`: as InferenceService's.
  OpenInferenceService(Dispatcher* dispatcher, Nanos default_slo,
                       size_t max_stream_unsent_answers = 4096, bool inline_completion = true)
      : dispatcher_(dispatcher),
        default_slo_(default_slo),
        max_stream_unsent_answers_(max_stream_unsent_answers),
        inline_completion_(inline_completion) {}

  // False while the router drains or shuts down: ServerReady and ModelReady
  // answer false.
  void SetServing(bool serving) { serving_.store(serving, std::memory_order_relaxed); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  // An inference::ModelInferRequest in, an inference::ModelInferResponse out.
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // inference::ModelInferRequest in, inference::ModelStreamInferResponse out.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override;

 private:
  Dispatcher* const dispatcher_;
  const Nanos default_slo_;
  const size_t max_stream_unsent_answers_;
  const bool inline_completion_;
  std::atomic<bool> serving_{true};
};

// The most bytes of a request id (echoed in its answer).
constexpr size_t kMaxIdBytes = 1024;

// The translation, exposed for unit tests. ToNativeRequest moves raw input
// bytes into `native` (typed contents are copied once) and returns
// the "timeout" parameter in nanoseconds, 0 when the request has none; every
// error is INVALID_ARGUMENT and names the offending field.
absl::StatusOr<Nanos> ToNativeRequest(inference::ModelInferRequest* request,
                                      v1::InferRequest* native);
// Fills `out` from a served native answer (output moved, not copied).
void ToOpenInferenceResponse(const inference::ModelInferRequest& request, v1::InferResponse* native,
                             inference::ModelInferResponse* out);

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_OPEN_INFERENCE_SERVICE_H_
