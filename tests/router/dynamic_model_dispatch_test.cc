// A dynamic (early-exit) model beside a supernet in one Dispatcher: its own
// policy (the dynamic default, or a per-model override), the client's
// application tag travels to the worker, and per-query exits and times come
// back as policy telemetry.
#include <gtest/gtest.h>

#include <deque>

#include "common/tensor_codec.h"
#include "router/dispatcher.h"
#include "router/grpc_worker_channel.h"
#include "router/tensor_payload.h"
#include "tests/baselines_registered.h"
#include "tests/test_util/router_fakes.h"

namespace superserve {
namespace {

using testing::FakeConnection;
using testing::FakeQuery;

ModelProfile StaticProfile() {
  ModelProfile p;
  p.model = "m";
  p.batch_sizes = {1, 2};
  p.input_shape = {2};
  p.num_classes = 3;
  SubnetProfile s;
  s.id = 0;
  s.accuracy = 80;
  s.latency = {Millis(1), Millis(2)};
  p.subnets.push_back(s);
  return p;
}

ModelProfile DynamicProfile() {
  ModelProfile p;
  p.model = "dyn";
  p.family = "early_exit";
  p.batch_sizes = {1, 2, 4};
  p.input_shape = {2};
  p.num_classes = 3;
  p.is_dynamic = true;
  p.dynamic.batch_overhead_us = 500;
  p.dynamic.per_request_factor = 0.5;
  p.dynamic.applications = {{"easy", {100, 200}, {1}}, {"hard", {1000, 2000}, {1}}};
  // The accuracy an answer from each exit carries: per application where the
  // profile has it ("hard"), else the model's.
  p.dynamic.applications[1].exit_accuracy = {60, 70, 75};
  p.dynamic.exit_accuracy = {90, 91, 92};
  return p;
}

// Worker "w" serving `models`.
v1::RegisterWorker Hello(const std::vector<std::string>& models) {
  v1::RegisterWorker hello;
  hello.set_worker_id("w");
  for (const std::string& m : models) hello.add_models(m);
  return hello;
}

DispatcherOptions Options() {
  DispatcherOptions o;
  o.policy = "clipper+";
  o.run_timer_thread = false;
  return o;
}

TEST(DynamicModelDispatch, DynamicModelGetsTheDynamicPolicyUnlessOverridden) {
  SimulatedClock clock(Seconds(1));
  RouterMetrics metrics;
  DispatcherOptions o = Options();
  Dispatcher d(o, &clock, &metrics);
  EXPECT_EQ(d.PolicyNameFor(StaticProfile()), "clipper+");
  EXPECT_EQ(d.PolicyNameFor(DynamicProfile()), "orloj");
  ASSERT_TRUE(d.AddModel(StaticProfile()).ok());
  ASSERT_TRUE(d.AddModel(DynamicProfile()).ok()) << "a dynamic profile has no subnets";

  o.dynamic_policy = "nexus";
  o.model_policies = {{"dyn", "clockwork"}, {"m", "infaas"}};
  Dispatcher overridden(o, &clock, &metrics);
  EXPECT_EQ(overridden.PolicyNameFor(DynamicProfile()), "clockwork");
  EXPECT_EQ(overridden.PolicyNameFor(StaticProfile()), "infaas");
  ASSERT_TRUE(overridden.AddModel(DynamicProfile()).ok());

  o.model_policies = {{"dyn", "no-such-policy"}};
  Dispatcher bad(o, &clock, &metrics);
  EXPECT_FALSE(bad.AddModel(DynamicProfile()).ok());
}

TEST(DynamicModelDispatch, ApplicationReachesTheWorkerAndExitsComeBack) {
  SimulatedClock clock(Seconds(1));
  RouterMetrics metrics;
  std::vector<std::unique_ptr<FakeQuery>> queries;  // outlive the dispatcher
  Dispatcher d(Options(), &clock, &metrics);
  ASSERT_TRUE(d.AddModel(StaticProfile()).ok());
  ASSERT_TRUE(d.AddModel(DynamicProfile()).ok());
  auto conn = std::make_shared<FakeConnection>();
  auto w = d.RegisterWorker(Hello({"m", "dyn"}), conn);
  ASSERT_TRUE(w.ok()) << w.status();

  queries.push_back(std::make_unique<FakeQuery>("dyn", std::vector<int64_t>{2}, "hard"));
  FakeQuery& q = *queries.back();
  d.Submit(&q, clock.Now() + Millis(50));
  auto batch = conn->NextBatch();
  ASSERT_NE(batch, nullptr) << "the dynamic model's policy dispatched nothing";
  EXPECT_EQ(batch->batch().model(), "dyn");
  ASSERT_EQ(batch->batch().queries_size(), 1);
  EXPECT_EQ(batch->batch().queries(0).application(), "hard");

  v1::BatchResult r;
  r.set_batch_id(batch->batch().batch_id());
  r.set_exec_us(1300);
  auto* qr = r.add_results();
  qr->set_query_id(batch->batch().queries(0).query_id());
  qr->set_exit(3);
  qr->set_exit_us(1300);
  qr->set_own_us(1250);
  EncodeTensor(MakeFloatTensor({3}, std::vector<float>{0, 0, 1}), qr->mutable_output());
  ASSERT_TRUE(clock.Advance(Millis(2)).ok());
  v1::BatchResult copy = r;
  BatchOutcome decoded = DecodeBatchResult(&copy);
  ASSERT_EQ(decoded.query_times.size(), 1u);
  EXPECT_EQ(decoded.query_times[0].id, qr->query_id());
  EXPECT_EQ(decoded.query_times[0].exit, 2) << "1-based on the wire, 0-based in telemetry";
  EXPECT_EQ(decoded.query_times[0].exec, Micros(1250));

  d.OnBatchResult(*w, &r);
  ASSERT_EQ(q.answers, 1);
  EXPECT_TRUE(q.status.ok()) << q.status;
  EXPECT_EQ(q.response_.output().data().size(), 12u);
  // The answer says which exit served it, with that exit's accuracy.
  EXPECT_EQ(q.response_.served_by().exit(), 3) << "1-based, as the worker reported it";
  EXPECT_EQ(q.response_.served_by().subnet_id(), -1);
  EXPECT_DOUBLE_EQ(q.response_.served_by().accuracy(), 75) << "hard's own figure for exit 3";

  // Per-application metrics beside the per-model ones.
  const std::string text = metrics.Scrape();
  EXPECT_NE(text.find("superserve_application_queries_total{application=\"hard\",model=\"dyn\","
                      "status=\"ok\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("superserve_application_slo_attainment{application=\"hard\",model=\"dyn\"} 1"),
            std::string::npos);
}

// Load-adaptive exits: the policy's threshold travels in the batch's control,
// and the answer and the metrics say which threshold served it.
TEST(DynamicModelDispatch, TheChosenExitThresholdReachesTheWorkerTheAnswerAndTheMetrics) {
  ModelProfile p = DynamicProfile();
  p.dynamic.default_threshold = 0.9;
  ExitThresholdProfile low{0.6, 70, {{"easy", {100, 150}, {1}}, {"hard", {300, 400}, {1}}}};
  low.applications[1].exit_accuracy = {50, 55, 60};
  p.dynamic.thresholds = {low, {0.9, 80, p.dynamic.applications}};
  SimulatedClock clock(Seconds(1));
  RouterMetrics metrics;
  std::vector<std::unique_ptr<FakeQuery>> queries;  // outlive the dispatcher
  Dispatcher d(Options(), &clock, &metrics);
  ASSERT_TRUE(d.AddModel(p).ok());
  auto conn = std::make_shared<FakeConnection>();
  auto w = d.RegisterWorker(Hello({"dyn"}), conn);
  ASSERT_TRUE(w.ok()) << w.status();
  // 1.6 ms left, 0.5 ms of it the assumed dispatch overhead: a batch of one
  // takes 0.5 + 0.5 * l ms, so l <= 1.2 ms, which "hard" makes with
  // probability 0.2 at 0.9 and 1 at 0.6.
  queries.push_back(std::make_unique<FakeQuery>("dyn", std::vector<int64_t>{2}, "hard"));
  FakeQuery& q = *queries.back();
  d.Submit(&q, clock.Now() + Micros(1600));
  auto batch = conn->NextBatch();
  ASSERT_NE(batch, nullptr);
  EXPECT_FLOAT_EQ(batch->batch().control().exit_threshold(), 0.6f);
  v1::BatchResult r;
  r.set_batch_id(batch->batch().batch_id());
  r.set_exec_us(400);
  auto* qr = r.add_results();
  qr->set_query_id(batch->batch().queries(0).query_id());
  qr->set_exit(2);
  qr->set_own_us(350);
  EncodeTensor(MakeFloatTensor({3}, std::vector<float>{0, 0, 1}), qr->mutable_output());
  ASSERT_TRUE(clock.Advance(Micros(500)).ok());
  d.OnBatchResult(*w, &r);
  ASSERT_EQ(q.answers, 1);
  EXPECT_TRUE(q.status.ok()) << q.status;
  EXPECT_FLOAT_EQ(q.response_.served_by().exit_threshold(), 0.6f);
  EXPECT_EQ(q.response_.served_by().exit(), 2);
  EXPECT_DOUBLE_EQ(q.response_.served_by().accuracy(), 55) << "hard's exit 2 at 0.6";
  const std::string text = metrics.Scrape();
  EXPECT_NE(text.find("superserve_exit_threshold_queries_total{model=\"dyn\",threshold=\"0.6\"} 1"),
            std::string::npos)
      << text;
}

// An application the profile has no accuracy for, and an exit the worker did
// not report, fall back to the model's figure and to none.
TEST(DynamicModelDispatch, AnswersFallBackToTheModelsExitAccuracy) {
  SimulatedClock clock(Seconds(1));
  RouterMetrics metrics;
  std::vector<std::unique_ptr<FakeQuery>> queries;  // outlive the dispatcher
  Dispatcher d(Options(), &clock, &metrics);
  ASSERT_TRUE(d.AddModel(DynamicProfile()).ok());
  auto conn = std::make_shared<FakeConnection>();
  auto w = d.RegisterWorker(Hello({"dyn"}), conn);
  ASSERT_TRUE(w.ok()) << w.status();
  for (int exit : {1, 0}) {  // 0: the worker did not say
    queries.push_back(std::make_unique<FakeQuery>("dyn", std::vector<int64_t>{2}, "easy"));
    FakeQuery& q = *queries.back();
    d.Submit(&q, clock.Now() + Millis(50));
    auto batch = conn->NextBatch();
    ASSERT_NE(batch, nullptr);
    v1::BatchResult r;
    r.set_batch_id(batch->batch().batch_id());
    r.set_exec_us(300);
    auto* qr = r.add_results();
    qr->set_query_id(batch->batch().queries(0).query_id());
    qr->set_exit(exit);
    qr->set_own_us(150);
    EncodeTensor(MakeFloatTensor({3}, std::vector<float>{1, 0, 0}), qr->mutable_output());
    ASSERT_TRUE(clock.Advance(Millis(1)).ok());
    d.OnBatchResult(*w, &r);
    ASSERT_EQ(q.answers, 1);
    ASSERT_TRUE(q.status.ok()) << q.status;
    EXPECT_EQ(q.response_.served_by().exit(), exit);
    EXPECT_DOUBLE_EQ(q.response_.served_by().accuracy(), exit == 1 ? 90 : 0)
        << "exit " << exit << ": \"easy\" has no figures of its own";
  }
}

TEST(DynamicModelDispatch, StaticResultsCarryNoQueryTelemetry) {
  v1::BatchResult r;
  r.set_batch_id(1);
  auto* qr = r.add_results();
  qr->set_query_id(7);
  EXPECT_TRUE(DecodeBatchResult(&r).query_times.empty());
}

}  // namespace
}  // namespace superserve
