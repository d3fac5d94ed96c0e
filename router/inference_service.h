#ifndef SUPERSERVE_ROUTER_INFERENCE_SERVICE_H_
#define SUPERSERVE_ROUTER_INFERENCE_SERVICE_H_

#include <cstdint>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/strings/str_cat.h"
#include "common/time.h"
#include "router/dispatcher.h"
#include "superserve/v1/inference.grpc.pb.h"

namespace superserve {

// Inference.Infer and Inference.InferStream over gRPC's callback API: each
// query becomes a QueryResponder that the Dispatcher answers exactly once (a
// unary call's reactor, or one entry of a stream). The deadline is the client's gRPC
// deadline (`default_slo` when the client set none), converted to the
// dispatcher's clock.
//
// Both methods are raw (ByteBuffer) callback methods: the router parses
// requests itself (ParseRequest below), so that one that does not parse is
// INVALID_ARGUMENT saying so; gRPC answers a typed callback method's parse
// failure UNIMPLEMENTED with no message, and ends a stream's reads as if the
// client had closed its side (router/answering_stream.h).
class InferenceService final
    : public v1::Inference::WithRawCallbackMethod_Infer<
          v1::Inference::WithRawCallbackMethod_InferStream<v1::Inference::Service>> {
 public:
  // `max_stream_unsent_answers`: an InferStream whose client does not read
  // piles answers up behind a write that cannot complete (HTTP/2 flow
  // control); once this many wait, the stream is finished
  // RESOURCE_EXHAUSTED naming the bound, and its later answers are dropped.
  // 0 = no bound.
  // `inline_completion`: a unary call's reactor lets gRPC run its OnDone
  // and OnCancel on whichever gRPC thread completes the call (true), or has
  // them run on gRPC's executor thread (false, gRPC's default). true saves a
  // thread wake-up per query: with gRPC 1.51 about a quarter of the router's
  // CPU ran on "default-executor" without it. The only hook is
  // ServerReactor::InternalInlineable, public in
  // <grpcpp/support/server_callback.h> but marked "not API"; no public API
  // asks for it. Exactly-once does not rest on it: OnDone deletes the
  // reactor, OnCancel takes the Dispatcher's lock, which no thread holds
  // while calling into gRPC. tests/router/inference_service_test.cc runs the
  // answer-once tests, a cancellation storm among them, both ways, so a gRPC
  // upgrade that changed what inline means fails there; the router's
  // --inline_call_completion=false turns it off without a rebuild.
  InferenceService(Dispatcher* dispatcher, Nanos default_slo,
                   size_t max_stream_unsent_answers = kDefaultMaxStreamUnsentAnswers,
                   bool inline_completion = true)
      : dispatcher_(dispatcher),
        default_slo_(default_slo),
        max_stream_unsent_answers_(max_stream_unsent_answers),
        inline_completion_(inline_completion) {}
  static constexpr size_t kDefaultMaxStreamUnsentAnswers = 4096;

  // A v1::InferRequest in, a v1::InferResponse out.
  grpc::ServerUnaryReactor* Infer(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  // The same over one stream: each query carries its own timeout and tag
  // (v1::InferStreamRequest in, v1::InferStreamResponse out).
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InferStream(
      grpc::CallbackServerContext* context) override;

  // Infer and InferStream reactors not yet deleted (their OnDone has not run), over all
  // services in the process. For tests: it returns to 0 once every call
  // has completed.
  static int64_t LiveReactors();

 private:
  Dispatcher* const dispatcher_;
  const Nanos default_slo_;
  const size_t max_stream_unsent_answers_;
  const bool inline_completion_;
};

// The most bytes of a status message the router sends a client. Messages
// quote what the client sent (an unknown model's name, an input name): a
// name of a MiB came back in every answer, so that a stream that does not
// read held --max_stream_unsent_answers of them (a bound in answers, not
// bytes), and a unary call's message overflowed the client's metadata limit
// (it saw RESOURCE_EXHAUSTED instead of the error).
constexpr size_t kMaxWireMessageBytes = 1024;

// `message` cut to kMaxWireMessageBytes (at a UTF-8 character boundary,
// saying how long it was), or as it is when shorter.
std::string WireMessage(absl::string_view message);

// absl -> grpc status (same numeric codes).
grpc::Status ToGrpcStatus(const absl::Status& s);
// The same with the message as WireMessage: what the inference services
// answer a client (the Admin service's operator gets messages whole).
grpc::Status ToClientStatus(const absl::Status& s);

// A raw method's request parsed into `msg`, or INVALID_ARGUMENT naming the
// message type when it does not parse (malformed, or a proto3 string field
// that is not UTF-8). `raw` is not consumed.
template <typename M>
grpc::Status ParseRequest(const grpc::ByteBuffer& raw, M* msg) {
  grpc::ByteBuffer copy(raw);  // Deserialize consumes its buffer; the slices are shared
  if (grpc::SerializationTraits<M>::Deserialize(&copy, msg).ok()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("the request is not a valid ", msg->GetTypeName(),
                                   " (malformed, or a string field that is not UTF-8)"));
}

// A raw method's response: `msg` serialized into `raw`.
template <typename M>
grpc::Status SerializeResponse(const M& msg, grpc::ByteBuffer* raw) {
  bool own_buffer = false;
  return grpc::SerializationTraits<M>::Serialize(msg, raw, &own_buffer);
}

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_INFERENCE_SERVICE_H_
