// The Open Inference Protocol adapter's translation (no gRPC server): an OIP
// request becomes the native request the Dispatcher validates, and a native
// answer becomes the OIP response. The served path end to end is
// oip_spec_client_test.py.
#include "router/open_inference_service.h"

#include "router/inference_service.h"

#include <cstring>
#include <functional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace superserve {
namespace {

using ::testing::HasSubstr;

inference::ModelInferRequest Request(const std::vector<float>& values,
                                     std::vector<int64_t> shape = {1, 1, 2, 2}) {
  inference::ModelInferRequest r;
  r.set_model_name("emu");
  r.set_id("q1");
  auto* in = r.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  for (int64_t d : shape) in->add_shape(d);
  r.add_raw_input_contents(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return r;
}

// ToNativeRequest on a copy of `r` (it moves the raw input out of its request).
absl::StatusOr<Nanos> Translate(inference::ModelInferRequest r, v1::InferRequest* native) {
  return ToNativeRequest(&r, native);
}

TEST(OpenInferenceTranslation, RawInputBecomesTheNativeSampleWithoutTheBatchDimension) {
  const std::vector<float> v = {1, 2, 3, 4};
  v1::InferRequest native;
  auto timeout = Translate(Request(v), &native);
  ASSERT_TRUE(timeout.ok()) << timeout.status();
  EXPECT_EQ(*timeout, 0);
  EXPECT_EQ(native.model(), "emu");
  EXPECT_EQ(native.input().dtype(), v1::DTYPE_FLOAT32);
  EXPECT_THAT(native.input().shape(), ::testing::ElementsAre(1, 2, 2));
  ASSERT_EQ(native.input().data().size(), 16u);
  EXPECT_EQ(std::memcmp(native.input().data().data(), v.data(), 16), 0);
}

// The raw input bytes move into the native request: the router holds one
// copy of a query's input, not two.
TEST(OpenInferenceTranslation, RawInputBytesMoveNotCopy) {
  const std::vector<float> v(1024, 0.25f);
  inference::ModelInferRequest r = Request(v, {1, 1, 32, 32});
  const char* bytes = r.raw_input_contents(0).data();
  v1::InferRequest native;
  ASSERT_TRUE(ToNativeRequest(&r, &native).ok());
  EXPECT_EQ(native.input().data().data(), bytes) << "the same buffer, not a copy";
  EXPECT_EQ(native.input().data().size(), 4096u);
  EXPECT_TRUE(r.raw_input_contents(0).empty());
}

TEST(OpenInferenceTranslation, TypedContentsEqualRawBytes) {
  const std::vector<float> v = {0.5f, -1.f, 3.25f, 7.f};
  auto typed = Request(v);
  typed.clear_raw_input_contents();
  for (float x : v) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(x);
  v1::InferRequest a, b;
  ASSERT_TRUE(Translate(typed, &a).ok());
  ASSERT_TRUE(Translate(Request(v), &b).ok());
  EXPECT_EQ(a.input().data(), b.input().data());
}

TEST(OpenInferenceTranslation, TimeoutParameterIsMicroseconds) {
  auto r = Request({1, 2, 3, 4});
  (*r.mutable_parameters())["timeout"].set_int64_param(2500);
  (*r.mutable_parameters())["application"].set_string_param("camera");
  v1::InferRequest native;
  auto timeout = Translate(r, &native);
  ASSERT_TRUE(timeout.ok());
  EXPECT_EQ(*timeout, Micros(2500));
  EXPECT_EQ(native.application(), "camera");
  (*r.mutable_parameters())["timeout"].set_int64_param(INT64_MAX);  // saturates
  EXPECT_EQ(*Translate(r, &native), INT64_MAX);
  (*r.mutable_parameters())["timeout"].set_string_param("soon");
  EXPECT_THAT(Translate(r, &native).status().message(), HasSubstr("timeout"));
  (*r.mutable_parameters())["timeout"].set_int64_param(-1);
  EXPECT_THAT(Translate(r, &native).status().message(), HasSubstr("negative"));
}

TEST(OpenInferenceTranslation, ModelVersionPinsTheManifestVersion) {
  auto r = Request({1, 2, 3, 4});
  v1::InferRequest native;
  ASSERT_TRUE(Translate(r, &native).ok());
  EXPECT_EQ(native.model_version(), 0u);  // empty: the current version
  r.set_model_version("2");
  ASSERT_TRUE(Translate(r, &native).ok());
  EXPECT_EQ(native.model_version(), 2u);
  // " 1", "+1" and "01" were taken as 1 here while ModelReady and
  // ModelMetadata answered NOT_FOUND for them.
  for (const char* bad : {"two", "0", "-1", " 1", "+1", "01", "1 ", "4294967297"}) {
    r.set_model_version(bad);
    auto s = Translate(r, &native).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("model_version")) << bad;
  }
}

// A parameter the router reads, of another type, was silently ignored: an
// int64 "application" served as no application (per-application policies
// planned it as another), a string "superserve_details" gave no details.
TEST(OpenInferenceTranslation, ParametersOfTheWrongTypeAreRefusedNamingTheType) {
  v1::InferRequest native;
  for (auto set : std::vector<std::function<void(inference::InferParameter*)>>{
           [](inference::InferParameter* p) { p->set_int64_param(5); },
           [](inference::InferParameter* p) { p->set_bool_param(true); },
           [](inference::InferParameter* p) { p->set_double_param(1); }}) {
    auto r = Request({1, 2, 3, 4});
    set(&(*r.mutable_parameters())["application"]);
    auto s = Translate(r, &native).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("parameter \"application\" must be a string_param"));
  }
  for (auto set : std::vector<std::function<void(inference::InferParameter*)>>{
           [](inference::InferParameter* p) { p->set_string_param("true"); },
           [](inference::InferParameter* p) { p->set_int64_param(1); }}) {
    auto r = Request({1, 2, 3, 4});
    set(&(*r.mutable_parameters())["superserve_details"]);
    auto s = Translate(r, &native).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("parameter \"superserve_details\" must be a bool_param"));
  }
  auto r = Request({1, 2, 3, 4});
  (*r.mutable_parameters())["application"].set_string_param("camera");
  (*r.mutable_parameters())["superserve_details"].set_bool_param(false);
  (*r.mutable_parameters())["some_other_servers_parameter"].set_int64_param(1);  // not ours
  ASSERT_TRUE(Translate(r, &native).ok());
  EXPECT_EQ(native.application(), "camera");
}

// Every answer quotes what the client sent (the id; an unknown model's name
// in the error): unbounded, a stream that did not read held
// --max_stream_unsent_answers answers of any size (+440 MiB for 400 requests
// with 1 MiB ids), and a unary error overflowed the client's metadata limit.
TEST(OpenInferenceTranslation, AnIdOverTheLimitIsRefused) {
  v1::InferRequest native;
  auto r = Request({1, 2, 3, 4});
  r.set_id(std::string(kMaxIdBytes, 'i'));
  ASSERT_TRUE(Translate(r, &native).ok());
  r.set_id(std::string(kMaxIdBytes + 1, 'i'));
  auto s = Translate(r, &native).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("id of 1025 bytes exceeds the limit of 1024 bytes"));
}

TEST(WireMessage, LongMessagesAreCutAtACharacterBoundarySayingSo) {
  EXPECT_EQ(WireMessage("unknown model \"x\""), "unknown model \"x\"");
  const std::string exact(kMaxWireMessageBytes, 'a');
  EXPECT_EQ(WireMessage(exact), exact);
  const std::string name(1 << 20, 'm');
  const std::string cut = WireMessage("unknown model \"" + name + "\"");
  EXPECT_LE(cut.size(), kMaxWireMessageBytes);
  EXPECT_THAT(cut, HasSubstr("unknown model \"mmm"));
  EXPECT_THAT(cut, HasSubstr("(1048592 bytes, cut)"));
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT,
            ToClientStatus(absl::InvalidArgumentError(name)).error_code());
  EXPECT_LE(ToClientStatus(absl::InvalidArgumentError(name)).error_message().size(),
            kMaxWireMessageBytes);
  // Three-byte characters at every offset: the cut never splits one (a
  // proto3 string field must stay valid UTF-8, or the client cannot parse
  // the answer that carries it).
  for (size_t pad = 0; pad < 3; ++pad) {
    std::string wide(pad, 'a');
    for (int i = 0; i < 1000; ++i) wide += "\xe4\xb8\xad";  // U+4E2D
    const std::string w = WireMessage(wide);
    EXPECT_LE(w.size(), kMaxWireMessageBytes);
    const size_t body = w.find("...");
    ASSERT_NE(body, std::string::npos);
    EXPECT_EQ((body - pad) % 3, 0u) << "pad " << pad << ": cut inside a character";
  }
}

// Triton's shared memory and classification extensions change where or what
// the data is: ignored, a client read a shared memory region nobody wrote,
// or took the FP32 logits for top-k class labels. Refused, naming them.
TEST(OpenInferenceTranslation, SharedMemoryAndClassificationAreRefusedNotIgnored) {
  v1::InferRequest native;
  {
    auto r = Request({1, 2, 3, 4});
    auto* o = r.add_outputs();
    o->set_name("logits");
    (*o->mutable_parameters())["classification"].set_int64_param(3);
    EXPECT_THAT(Translate(r, &native).status().message(),
                HasSubstr("parameter \"classification\" is not supported"));
  }
  {
    auto r = Request({1, 2, 3, 4});
    auto* o = r.add_outputs();
    o->set_name("logits");
    (*o->mutable_parameters())["shared_memory_region"].set_string_param("out0");
    (*o->mutable_parameters())["shared_memory_byte_size"].set_int64_param(40);
    EXPECT_THAT(Translate(r, &native).status().message(),
                HasSubstr("parameter \"shared_memory_region\" is not supported"));
  }
  {
    auto r = Request({1, 2, 3, 4});
    (*r.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("in0");
    auto s = Translate(r, &native).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("\"shared_memory_region\" is not supported"));
  }
  {  // tritonclient's HTTP-only binary_data flag, and others: ignored
    auto r = Request({1, 2, 3, 4});
    auto* o = r.add_outputs();
    o->set_name("logits");
    (*o->mutable_parameters())["binary_data"].set_bool_param(true);
    EXPECT_TRUE(Translate(r, &native).ok());
  }
}

TEST(OpenInferenceTranslation, EveryMalformedRequestIsInvalidArgumentNamingTheField) {
  struct Case {
    const char* what;
    std::function<void(inference::ModelInferRequest*)> mutate;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"no model", [](auto* r) { r->clear_model_name(); }, "model_name"},
      {"two inputs", [](auto* r) { r->add_inputs()->set_name("x"); }, "one input"},
      {"no inputs", [](auto* r) { r->clear_inputs(); }, "one input"},
      {"name", [](auto* r) { r->mutable_inputs(0)->set_name("img"); }, "\"img\""},
      {"datatype", [](auto* r) { r->mutable_inputs(0)->set_datatype("INT8"); }, "INT8"},
      {"batch of 2", [](auto* r) { r->mutable_inputs(0)->set_shape(0, 2); }, "[2,1,2,2]"},
      {"rank 0", [](auto* r) { r->mutable_inputs(0)->clear_shape(); }, "shape"},
      {"no data", [](auto* r) { r->clear_raw_input_contents(); }, "no data"},
      {"two raw", [](auto* r) { r->add_raw_input_contents("abcd"); }, "2 entries"},
      {"ragged bytes", [](auto* r) { r->mutable_raw_input_contents(0)->push_back('x'); },
       "whole number"},
      {"raw and typed",
       [](auto* r) { r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); }, "both"},
      {"int contents for FP32",
       [](auto* r) {
         r->clear_raw_input_contents();
         r->mutable_inputs(0)->mutable_contents()->add_int_contents(1);
       },
       "fp32_contents"},
      {"unknown output", [](auto* r) { r->add_outputs()->set_name("probs"); }, "\"probs\""},
  };
  for (const Case& c : cases) {
    auto r = Request({1, 2, 3, 4});
    c.mutate(&r);
    v1::InferRequest native;
    auto s = Translate(r, &native).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(s.message(), HasSubstr(c.says)) << c.what << ": " << s.message();
  }
}

TEST(OpenInferenceTranslation, ResponseCarriesOutputAndServedSubnet) {
  auto req = Request({1, 2, 3, 4});
  req.set_model_version("3");
  v1::InferResponse native;
  const std::vector<float> logits = {0, 1, 0};
  native.mutable_output()->set_dtype(v1::DTYPE_FLOAT32);
  native.mutable_output()->add_shape(3);
  native.mutable_output()->set_data(std::string(reinterpret_cast<const char*>(logits.data()), 12));
  native.mutable_served_by()->set_subnet_id(2);
  native.mutable_served_by()->set_accuracy(88.5);
  native.mutable_served_by()->set_worker("w0#1");
  native.set_batch_size(8);
  native.set_queue_us(120);
  native.set_exec_us(900);
  inference::ModelInferResponse lean;
  v1::InferResponse copy = native;
  ToOpenInferenceResponse(req, &copy, &lean);
  EXPECT_EQ(lean.parameters().size(), 2u);  // subnet and accuracy unless asked
  EXPECT_EQ(lean.parameters().at("superserve_subnet_id").int64_param(), 2);
  EXPECT_EQ(lean.parameters().at("superserve_accuracy").double_param(), 88.5);
  (*req.mutable_parameters())["superserve_details"].set_bool_param(true);
  inference::ModelInferResponse out;
  ToOpenInferenceResponse(req, &native, &out);
  EXPECT_EQ(out.model_name(), "emu");
  EXPECT_EQ(out.model_version(), "3");
  EXPECT_EQ(out.id(), "q1");
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).name(), "logits");
  EXPECT_EQ(out.outputs(0).datatype(), "FP32");
  EXPECT_THAT(out.outputs(0).shape(), ::testing::ElementsAre(1, 3));
  ASSERT_EQ(out.raw_output_contents_size(), 1);
  EXPECT_EQ(out.raw_output_contents(0).size(), 12u);
  const auto& p = out.parameters();
  EXPECT_EQ(p.at("superserve_subnet_id").int64_param(), 2);
  EXPECT_EQ(p.at("superserve_accuracy").double_param(), 88.5);
  EXPECT_EQ(p.at("superserve_worker").string_param(), "w0#1");
  EXPECT_EQ(p.at("superserve_batch_size").int64_param(), 8);
  EXPECT_EQ(p.at("superserve_queue_us").int64_param(), 120);
  EXPECT_EQ(p.at("superserve_exec_us").int64_param(), 900);
}

}  // namespace
}  // namespace superserve
