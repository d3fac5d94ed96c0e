#include "router/open_inference_service.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/tensor_codec.h"
#include "router/answering_stream.h"
#include "router/inference_service.h"

namespace superserve {
namespace {

constexpr char kInputName[] = "input";
constexpr char kOutputName[] = "logits";
constexpr char kFp32[] = "FP32";
constexpr char kServerName[] = "superserve";
constexpr char kServerVersion[] = "1";

Nanos TimeLeft(std::chrono::system_clock::time_point deadline) {
  return SaturatingSub(deadline.time_since_epoch().count(),
                       std::chrono::system_clock::now().time_since_epoch().count());
}

// The query's deadline on the dispatcher's clock: the "timeout" parameter,
// else the gRPC deadline, else the default SLO.
Nanos QueryDeadline(Nanos now, Nanos timeout_param, const grpc::CallbackServerContext* context,
                    Nanos default_slo) {
  if (timeout_param > 0) return DeadlineAfter(now, timeout_param);
  if (context != nullptr && context->deadline() != std::chrono::system_clock::time_point::max()) {
    return DeadlineAfter(now, TimeLeft(context->deadline()));
  }
  return DeadlineAfter(now, default_slo);
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const grpc::Status& status) {
  grpc::ServerUnaryReactor* r = context->DefaultReactor();
  r->Finish(status);
  return r;
}

// An OIP model_version: empty = 0 (the current one), else decimal digits of
// a version >= 1 (SimpleAtoi alone also takes " 1", "+1" and "01").
bool ParseVersion(const std::string& text, uint32_t* version) {
  *version = 0;
  if (text.empty()) return true;
  return absl::SimpleAtoi(text, version) && *version > 0 && absl::StrCat(*version) == text;
}

// The model ModelReady and ModelMetadata describe: resolved by name and
// version as ModelInfer resolves them (Dispatcher::FindModel).
absl::StatusOr<ModelSummary> FindOipModel(const Dispatcher& dispatcher, const std::string& name,
                                          const std::string& version_text) {
  uint32_t version = 0;
  if (!ParseVersion(version_text, &version)) {
    return absl::NotFoundError(absl::StrCat("no model \"", name, "\" version \"", version_text,
                                            "\" (a version is decimal digits, >= 1)"));
  }
  return dispatcher.FindModel(name, version);
}

grpc::Status NotFound(const absl::Status& s) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND, WireMessage(s.message()));
}

absl::StatusOr<Nanos> TimeoutParameter(const inference::ModelInferRequest& request) {
  auto it = request.parameters().find("timeout");
  if (it == request.parameters().end()) return Nanos{0};
  const inference::InferParameter& p = it->second;
  int64_t us = 0;
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param) {
    us = p.int64_param();
  } else if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
    us = static_cast<int64_t>(std::min<uint64_t>(p.uint64_param(), INT64_MAX));
  } else {
    return absl::InvalidArgumentError(
        "parameter \"timeout\" must be an int64_param (microseconds)");
  }
  if (us < 0) {
    return absl::InvalidArgumentError(absl::StrCat("parameter \"timeout\" is negative: ", us));
  }
  return us > INT64_MAX / kNanosPerMicro ? INT64_MAX : us * kNanosPerMicro;
}

// The Dispatcher checks the sample against the model's input shape and
// names both without the batch dimension the OIP request carried: say so.
absl::Status InOipTerms(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kInvalidArgument ||
      s.message().find("shape") == absl::string_view::npos) {
    return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(s.message(),
                   " (one sample, without the batch dimension: the OIP input shape is [1] "
                   "followed by the model's)"));
}

// A request parameter the router reads must have the type it reads:
// otherwise it was silently ignored (an int64 "application" served as no
// application; a string "superserve_details" as no details).
absl::Status CheckParameterType(const inference::ModelInferRequest& request, const char* name,
                                inference::InferParameter::ParameterChoiceCase want,
                                const char* want_name) {
  auto it = request.parameters().find(name);
  if (it == request.parameters().end() || it->second.parameter_choice_case() == want) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("parameter \"", name, "\" must be a ", want_name));
}

// Keeps what an answer needs of its request (ToOpenInferenceResponse, a
// stream's error answer) once it is translated; the rest (its input, copied
// into the native request; parameters the router does not read; unknown
// fields) would be held for as long as the query waits.
void KeepWhatTheAnswerNeeds(inference::ModelInferRequest* r) {
  inference::ModelInferRequest keep;
  keep.mutable_model_name()->swap(*r->mutable_model_name());
  keep.mutable_model_version()->swap(*r->mutable_model_version());
  keep.mutable_id()->swap(*r->mutable_id());
  if (auto it = r->parameters().find("superserve_details"); it != r->parameters().end()) {
    (*keep.mutable_parameters())[it->first] = it->second;
  }
  r->Swap(&keep);
}

void SetParam(inference::ModelInferResponse* out, const char* name, int64_t v) {
  (*out->mutable_parameters())[name].set_int64_param(v);
}

}  // namespace

absl::StatusOr<Nanos> ToNativeRequest(inference::ModelInferRequest* mutable_request,
                                      v1::InferRequest* native) {
  const inference::ModelInferRequest& request = *mutable_request;
  if (request.model_name().empty()) return absl::InvalidArgumentError("model_name is empty");
  // The id comes back in the answer: unbounded, a stream that does not read
  // held --max_stream_unsent_answers copies of it.
  if (request.id().size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("id of ", request.id().size(),
                                                   " bytes exceeds the limit of ", kMaxIdBytes,
                                                   " bytes"));
  }
  // model_version: the manifest's version, pinned; empty = the current one.
  if (!request.model_version().empty()) {
    // Digits only, as ModelReady and ModelMetadata read it.
    uint32_t version = 0;
    if (!ParseVersion(request.model_version(), &version) || version == 0) {
      return absl::InvalidArgumentError(absl::StrCat("model_version \"", request.model_version(),
                                                     "\" is not a version number (>= 1)"));
    }
    native->set_model_version(version);
  }
  if (request.inputs_size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("model \"", request.model_name(),
                                                   "\" takes exactly one input (\"", kInputName,
                                                   "\"); the request has ", request.inputs_size()));
  }
  for (const auto& o : request.outputs()) {
    if (o.name() != kOutputName) {
      return absl::InvalidArgumentError(
          absl::StrCat("requested output \"", o.name(),
                       "\" does not exist; the model's one output is \"", kOutputName, "\""));
    }
    // Triton's extensions that change where or what the output is: ignored,
    // the client would read its shared memory region (never written) or
    // take the FP32 logits for top-k class labels.
    for (const char* p : {"shared_memory_region", "classification"}) {
      if (o.parameters().contains(p)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "requested output \"", o.name(), "\": parameter \"", p,
            "\" is not supported (the output is the FP32 logits, in raw_output_contents)"));
      }
    }
  }
  const auto& in = request.inputs(0);
  if (in.name() != kInputName) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input \"", in.name(), "\" does not exist; the model's input is \"", kInputName, "\""));
  }
  if (in.parameters().contains("shared_memory_region")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input \"", kInputName, "\": parameter \"shared_memory_region\" is not supported (send "
        "the data in raw_input_contents or contents.fp32_contents)"));
  }
  if (in.datatype() != kFp32) {
    return absl::InvalidArgumentError(absl::StrCat("input \"", kInputName, "\" has datatype \"",
                                                   in.datatype(), "\"; the model takes ", kFp32));
  }
  if (in.shape_size() < 1 || in.shape(0) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input \"", kInputName, "\" has shape ", ShapeString(in.shape()),
        "; expected [1, <model input shape>] (one sample per request: the router batches)"));
  }
  auto timeout = TimeoutParameter(request);
  if (!timeout.ok()) return timeout.status();
  if (auto s = CheckParameterType(request, "application",
                                  inference::InferParameter::kStringParam, "string_param");
      !s.ok()) {
    return s;
  }
  if (auto s = CheckParameterType(request, "superserve_details",
                                  inference::InferParameter::kBoolParam, "bool_param");
      !s.ok()) {
    return s;
  }

  native->set_model(request.model_name());
  if (auto it = request.parameters().find("application"); it != request.parameters().end()) {
    native->set_application(it->second.string_param());
  }
  v1::Tensor* t = native->mutable_input();
  t->set_dtype(v1::DTYPE_FLOAT32);
  t->mutable_shape()->Assign(in.shape().begin() + 1, in.shape().end());
  const bool typed = in.has_contents();
  if (request.raw_input_contents_size() > 0) {
    if (typed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", kInputName, "\" has both contents and raw_input_contents; send one"));
    }
    if (request.raw_input_contents_size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "raw_input_contents has ", request.raw_input_contents_size(), " entries for 1 input"));
    }
    t->mutable_data()->swap(*mutable_request->mutable_raw_input_contents(0));  // moved, not copied
  } else if (typed) {
    const auto& c = in.contents();
    if (c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
            c.uint_contents_size() + c.uint64_contents_size() + c.fp64_contents_size() +
            c.bytes_contents_size() >
        0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", kInputName, "\" is FP32: only contents.fp32_contents may be set"));
    }
    static_assert(sizeof(float) == 4, "FP32 is 4 bytes");
    std::string* data = t->mutable_data();
    data->resize(c.fp32_contents_size() * sizeof(float));
    if (!data->empty()) std::memcpy(data->data(), c.fp32_contents().data(), data->size());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("input \"", kInputName,
                     "\" has no data: set raw_input_contents or contents.fp32_contents"));
  }
  // Dtype, shape against the model and the byte count are checked by the
  // Dispatcher as for every native query (common/tensor_codec); here only
  // that the bytes are a whole number of elements, for a clearer message.
  if (t->data().size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("input \"", kInputName, "\" has ",
                                                   t->data().size(),
                                                   " bytes, not a whole number of FP32 elements"));
  }
  return *timeout;
}

void ToOpenInferenceResponse(const inference::ModelInferRequest& request, v1::InferResponse* native,
                             inference::ModelInferResponse* out) {
  out->set_model_name(request.model_name());
  out->set_model_version(request.model_version());
  out->set_id(request.id());
  auto* o = out->add_outputs();
  o->set_name(kOutputName);
  o->set_datatype(kFp32);  // the workers' outputs are float32 logits
  o->add_shape(1);
  for (int64_t d : native->output().shape()) o->add_shape(d);
  out->add_raw_output_contents()->swap(*native->mutable_output()->mutable_data());
  // Every map entry costs an allocation on both ends (about half of the
  // adapter's added latency with all six): the served subnet and its
  // accuracy always, the rest when the request asks for them.
  SetParam(out, "superserve_subnet_id", native->served_by().subnet_id());
  (*out->mutable_parameters())["superserve_accuracy"].set_double_param(
      native->served_by().accuracy());
  if (native->served_by().exit() > 0) SetParam(out, "superserve_exit", native->served_by().exit());
  if (native->served_by().exit_threshold() > 0) {
    (*out->mutable_parameters())["superserve_exit_threshold"].set_double_param(
        native->served_by().exit_threshold());
  }
  auto details = request.parameters().find("superserve_details");
  if (details != request.parameters().end() && details->second.bool_param()) {
    (*out->mutable_parameters())["superserve_worker"].set_string_param(
        native->served_by().worker());
    SetParam(out, "superserve_batch_size", native->batch_size());
    SetParam(out, "superserve_queue_us", native->queue_us());
    SetParam(out, "superserve_exec_us", native->exec_us());
  }
}

namespace {

// One ModelInfer call: the native query the Dispatcher answers exactly once.
class OipInferReactor final : public grpc::ServerUnaryReactor, public QueryResponder {
 public:
  OipInferReactor(Dispatcher* dispatcher, grpc::ByteBuffer* raw_response, bool inline_completion)
      : dispatcher_(dispatcher), raw_response_(raw_response), inline_completion_(inline_completion) {}

  const v1::InferRequest& request() const override { return native_request_; }
  v1::InferResponse* response() override { return &native_response_; }
  bool TakeInput(v1::Tensor* out) override {
    out->Swap(native_request_.mutable_input());
    return true;
  }
  void Answer(const absl::Status& status) override {
    if (status.ok()) {
      inference::ModelInferResponse response;
      ToOpenInferenceResponse(oip_request_, &native_response_, &response);
      if (grpc::Status s = SerializeResponse(response, raw_response_); !s.ok()) {
        Finish(s);
        return;
      }
    }
    Finish(ToClientStatus(InOipTerms(status)));
  }
  void OnCancel() override { dispatcher_->OnCancelled(this); }
  void OnDone() override { delete this; }
  // As InferenceService's reactor (router/inference_service.h).
  bool InternalInlineable() override { return inline_completion_; }

  inference::ModelInferRequest oip_request_;  // parsed before Submit
  v1::InferRequest native_request_;

 private:
  Dispatcher* const dispatcher_;
  grpc::ByteBuffer* const raw_response_;
  const bool inline_completion_;
  v1::InferResponse native_response_;
};

// ModelStreamInfer (router/answering_stream.h): each request read becomes one
// native query; each answer is written back as one ModelStreamInferResponse
// (an error as its error_message, with the request id in infer_response.id).
class OipStreamReactor final
    : public AnsweringStream<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  OipStreamReactor(Dispatcher* dispatcher, Nanos default_slo, size_t max_unsent_answers)
      : AnsweringStream(dispatcher, default_slo, max_unsent_answers, "ModelStreamInfer") {
    StartReading();
  }

  void OnRequest() override {
    auto* query = new OipQuery(this);
    query->oip_request_.Swap(&in_);
    // Cut off or cancelled: read no more (docs/security.md).
    if (!Admit({query})) {
      delete query;
      return;
    }
    auto timeout = ToNativeRequest(&query->oip_request_, &query->request_);
    if (!timeout.ok()) {
      query->Answer(timeout.status());
    } else {
      KeepWhatTheAnswerNeeds(&query->oip_request_);
      Submit(query, QueryDeadline(Now(), *timeout, nullptr, default_slo_));
    }
    ReadNext();
  }

 private:
  class OipQuery final : public Query {
   public:
    explicit OipQuery(OipStreamReactor* stream) : Query(stream) {}
    inference::ModelInferRequest oip_request_;
  };

  void ToMessage(Query* query, const absl::Status& status,
                 inference::ModelStreamInferResponse* msg) override {
    const auto& oip_request = static_cast<OipQuery*>(query)->oip_request_;
    if (status.ok()) {
      ToOpenInferenceResponse(oip_request, &query->response_, msg->mutable_infer_response());
    } else {
      // Bounded, as every status message (WireMessage): the echoes too,
      // since an id over kMaxIdBytes is what this error may be about.
      msg->set_error_message(WireMessage(absl::StrCat(absl::StatusCodeToString(status.code()),
                                                      ": ", InOipTerms(status).message())));
      msg->mutable_infer_response()->set_model_name(WireMessage(oip_request.model_name()));
      msg->mutable_infer_response()->set_id(WireMessage(oip_request.id()));
    }
  }
};

}  // namespace

grpc::ServerUnaryReactor* OpenInferenceService::ServerLive(
    grpc::CallbackServerContext* context, const inference::ServerLiveRequest* /*request*/,
    inference::ServerLiveResponse* response) {
  response->set_live(true);
  return FinishNow(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerReady(
    grpc::CallbackServerContext* context, const inference::ServerReadyRequest* /*request*/,
    inference::ServerReadyResponse* response) {
  // Ready: serving, and some model has a live worker.
  bool ready = false;
  if (serving_.load(std::memory_order_relaxed)) {
    for (const ModelSummary& m : dispatcher_->ModelSummaries()) ready = ready || m.workers > 0;
  }
  response->set_ready(ready);
  return FinishNow(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelReady(
    grpc::CallbackServerContext* context, const inference::ModelReadyRequest* request,
    inference::ModelReadyResponse* response) {
  auto m = FindOipModel(*dispatcher_, request->name(), request->version());
  if (!m.ok()) return FinishNow(context, NotFound(m.status()));
  response->set_ready(serving_.load(std::memory_order_relaxed) && m->workers > 0);
  return FinishNow(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest* /*request*/,
    inference::ServerMetadataResponse* response) {
  response->set_name(kServerName);
  response->set_version(kServerVersion);
  return FinishNow(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  auto m = FindOipModel(*dispatcher_, request->name(), request->version());
  if (!m.ok()) return FinishNow(context, NotFound(m.status()));
  response->set_name(request->name());
  response->add_versions(absl::StrCat(m->version));
  // The platform names what runs it: a weight-shared supernet family.
  response->set_platform(absl::StrCat("superserve_", m->family));
  auto* in = response->add_inputs();
  in->set_name(kInputName);
  in->set_datatype(kFp32);
  in->add_shape(-1);  // batch dimension; each request carries one sample
  for (int64_t d : m->input_shape) in->add_shape(d);
  auto* out = response->add_outputs();
  out->set_name(kOutputName);
  out->set_datatype(kFp32);
  out->add_shape(-1);
  out->add_shape(m->num_classes > 0 ? m->num_classes : -1);
  return FinishNow(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelInfer(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  auto* reactor = new OipInferReactor(dispatcher_, response, inline_completion_);
  if (grpc::Status s = ParseRequest(*request, &reactor->oip_request_); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  auto timeout = ToNativeRequest(&reactor->oip_request_, &reactor->native_request_);
  if (!timeout.ok()) {
    reactor->Finish(ToClientStatus(timeout.status()));
    return reactor;
  }
  KeepWhatTheAnswerNeeds(&reactor->oip_request_);
  const Nanos now = dispatcher_->clock()->Now();
  dispatcher_->Submit(reactor, QueryDeadline(now, *timeout, context, default_slo_));
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* OpenInferenceService::ModelStreamInfer(grpc::CallbackServerContext* /*context*/) {
  return new OipStreamReactor(dispatcher_, default_slo_, max_stream_unsent_answers_);
}

}  // namespace superserve
