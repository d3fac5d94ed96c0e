#include "common/model_profile.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "superserve/v1/profile.pb.h"

namespace superserve {
namespace {

// A small valid profile: three subnets, batch sizes 1..4.
v1::ModelProfile ValidProto() {
  v1::ModelProfile p;
  p.set_model("fmnist");
  p.set_family("ofa_resnet");
  for (int b : {1, 2, 4}) p.add_batch_sizes(b);
  for (int d : {1, 28, 28}) p.add_input_shape(d);
  p.set_num_classes(10);
  for (int i = 0; i < 3; ++i) {
    auto* s = p.add_subnets();
    s->set_id(10 + i);
    s->set_accuracy(88.0 + i);
    s->mutable_control()->set_subnet_id(10 + i);
    for (int d : {0, 1, 2}) s->mutable_control()->add_depths(d);
    for (int b = 0; b < 3; ++b) s->add_latency_us(100.0 * (i + 1) * (b + 1));
  }
  return p;
}

void ExpectRejected(const v1::ModelProfile& p, const std::string& must_mention,
                    const std::string& also = "") {
  auto m = ModelProfile::FromProto(p);
  ASSERT_FALSE(m.ok()) << "accepted a bad profile; expected an error naming " << must_mention;
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  std::string msg(m.status().message());
  EXPECT_NE(msg.find(must_mention), std::string::npos) << msg;
  if (!also.empty()) EXPECT_NE(msg.find(also), std::string::npos) << msg;
}

TEST(ModelProfileTest, AcceptsValidProfile) {
  auto m = ModelProfile::FromProto(ValidProto());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model, "fmnist");
  ASSERT_EQ(m->subnets.size(), 3u);
  EXPECT_EQ(m->subnets[1].id, 11);
  EXPECT_DOUBLE_EQ(m->subnets[1].accuracy, 89.0);
  EXPECT_EQ(m->subnets[1].latency[2], Micros(600));
  EXPECT_EQ(m->subnets[1].control.depths, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(m->BatchIndex(4), 2);
  EXPECT_EQ(m->BatchIndex(8), -1);
  EXPECT_EQ(m->SubnetIndex(12), 2);
  EXPECT_EQ(m->max_batch(), 4);
}

TEST(ModelProfileTest, AcceptsAnyStrictlyIncreasingBatchSizes) {
  auto p = ValidProto();
  p.set_batch_sizes(1, 3);
  p.set_batch_sizes(2, 7);
  auto m = ModelProfile::FromProto(p);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->batch_sizes, (std::vector<int32_t>{1, 3, 7}));
  EXPECT_TRUE(m->warnings.empty());
  EXPECT_EQ(m->BatchIndex(3), 1);
  EXPECT_EQ(m->BatchIndex(2), -1);
  // A batch of n runs at the smallest listed size >= n.
  EXPECT_EQ(m->PaddedBatchIndex(1), 0);
  EXPECT_EQ(m->PaddedBatchIndex(2), 1);
  EXPECT_EQ(m->PaddedBatchIndex(3), 1);
  EXPECT_EQ(m->PaddedBatchIndex(4), 2);
  EXPECT_EQ(m->PaddedBatchIndex(7), 2);
  EXPECT_EQ(m->PaddedBatchIndex(8), -1);
}

TEST(ModelProfileTest, RejectsABatchSizeBelowOne) {
  auto p = ValidProto();
  p.set_batch_sizes(0, 0);
  ExpectRejected(p, "batch_sizes[0] = 0", "must be >= 1");
  p.set_batch_sizes(0, -3);
  ExpectRejected(p, "batch_sizes[0] = -3", "must be >= 1");
}

TEST(ModelProfileTest, RejectsAnInputShapeNoRequestCouldCarry) {
  auto p = ValidProto();
  p.clear_input_shape();
  for (int64_t d : {int64_t{1} << 32, int64_t{1} << 32, int64_t{4}}) p.add_input_shape(d);
  ExpectRejected(p, "field input_shape", "cannot be sent");
  p.clear_input_shape();
  for (int i = 0; i < 9; ++i) p.add_input_shape(1);
  ExpectRejected(p, "field input_shape has 9 dimensions");
  p.clear_input_shape();
  for (int64_t d : {3, 224, 224}) p.add_input_shape(d);
  EXPECT_TRUE(ModelProfile::FromProto(p).ok());
}

TEST(ModelProfileTest, RejectsBatchSizesPastTheLargest) {
  auto p = ValidProto();
  p.set_batch_sizes(2, kMaxBatchSize * 2);
  ExpectRejected(p, "batch_sizes[2] = 131072", "exceeds the largest batch");
  p.set_batch_sizes(2, kMaxBatchSize);
  EXPECT_TRUE(ModelProfile::FromProto(p).ok());
}

TEST(ModelProfileTest, RejectsBatchSizesNotIncreasing) {
  auto p = ValidProto();
  p.set_batch_sizes(1, 4);
  p.set_batch_sizes(2, 2);
  ExpectRejected(p, "batch_sizes[2] = 2", "strictly increasing");
}

// A measured table whose latency dips (a published BERT profile's batch 8
// below its batch 4) is timing noise: raised to the previous batch size's
// figure, with a warning naming the subnet, the batch, the value and the
// figure it was raised to.
TEST(ModelProfileTest, RaisesALatencyDipWithAWarning) {
  auto p = ValidProto();
  p.mutable_subnets(1)->set_latency_us(1, 190.5);  // below batch 1's 200
  p.mutable_subnets(1)->set_latency_us(2, 150.0);  // below both
  auto m = ModelProfile::FromProto(p);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->subnets.size(), 3u);
  EXPECT_EQ(m->subnets[1].latency, (std::vector<Nanos>{Micros(200), Micros(200), Micros(200)}));
  ASSERT_EQ(m->warnings.size(), 2u);
  EXPECT_NE(m->warnings[0].find("subnet id=11: latency_us[1] (batch 2) = 190.5 is below batch "
                                "1's 200; raised to 200"),
            std::string::npos)
      << m->warnings[0];
  EXPECT_NE(m->warnings[1].find("latency_us[2] (batch 4) = 150 is below batch 2's 200; raised "
                                "to 200"),
            std::string::npos)
      << m->warnings[1];
  // The other subnets are untouched.
  EXPECT_EQ(m->subnets[0].latency.back(), Micros(300));
  // Saved, the raised table loads again without a warning.
  auto back = ModelProfile::FromJson(m->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->warnings.empty());
  EXPECT_EQ(back->subnets[1].latency, m->subnets[1].latency);
}

// A subnet at least as accurate and at least as fast at every batch size
// (strictly better somewhere) than another leaves that one out of the
// choices, with a warning naming both.
TEST(ModelProfileTest, LeavesADominatedSubnetOutWithAWarning) {
  auto p = ValidProto();  // ids 10, 11, 12: accuracy 88, 89, 90; slower as accuracy rises
  // id 11 becomes slower than id 12 at every batch size: dominated.
  for (int b = 0; b < 3; ++b) p.mutable_subnets(1)->set_latency_us(b, 300.0 * (b + 1) + 1);
  // A tie at every figure (same accuracy, same latencies) dominates nothing.
  auto* twin = p.add_subnets();
  *twin = p.subnets(0);
  twin->set_id(13);
  auto m = ModelProfile::FromProto(p);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<int32_t> ids;
  for (const auto& s : m->subnets) ids.push_back(s.id);
  EXPECT_EQ(ids, (std::vector<int32_t>{10, 12, 13}));
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_NE(m->warnings[0].find("subnet id=11 (accuracy 89%) is dominated by subnet id=12 "
                                "(accuracy 90%"),
            std::string::npos)
      << m->warnings[0];
  EXPECT_EQ(m->SubnetIndex(11), -1);
  // Left out of the choices, not of the checkpoint: its slot is still
  // addressed (EverySubnet, in id order). Saving writes the choices only.
  ASSERT_EQ(m->left_out.size(), 1u);
  EXPECT_EQ(m->left_out[0].id, 11);
  EXPECT_EQ(m->left_out[0].latency.back(), Micros(901));
  ids.clear();
  for (const auto& s : m->EverySubnet()) ids.push_back(s.id);
  EXPECT_EQ(ids, (std::vector<int32_t>{10, 11, 12, 13}));
  v1::ModelProfile saved;
  m->ToProto(&saved);
  EXPECT_EQ(saved.subnets_size(), 3);
  // Equal latency everywhere but more accurate also dominates.
  auto q = ValidProto();
  for (int b = 0; b < 3; ++b) q.mutable_subnets(0)->set_latency_us(b, q.subnets(1).latency_us(b));
  auto n = ModelProfile::FromProto(q);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->SubnetIndex(10), -1);
  ASSERT_EQ(n->warnings.size(), 1u);
  EXPECT_NE(n->warnings[0].find("subnet id=10 (accuracy 88%) is dominated by subnet id=11"),
            std::string::npos)
      << n->warnings[0];
}

// The linear form: latency(b) = alpha_us * b + beta_us at every batch size.
TEST(ModelProfileTest, ExpandsTheLinearFormAndKeepsItOnSave) {
  auto p = ValidProto();
  p.clear_batch_sizes();
  for (int b : {1, 3, 5, 64}) p.add_batch_sizes(b);
  for (int s = 0; s < 3; ++s) {
    auto* sn = p.mutable_subnets(s);
    sn->clear_latency_us();
    sn->set_alpha_us(1053.0 * (s + 1));
    sn->set_beta_us(5072.0 * (s + 1));
  }
  auto m = ModelProfile::FromProto(p);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->warnings.empty());
  EXPECT_EQ(m->subnets[0].latency, (std::vector<Nanos>{Micros(6125), Micros(8231), Micros(10337),
                                                       Micros(1053 * 64 + 5072)}));
  ASSERT_TRUE(m->subnets[0].linear.has_value());
  EXPECT_DOUBLE_EQ(m->subnets[0].linear->alpha_us, 1053.0);
  // Saved, the form stays the form (not a 4-entry table)...
  v1::ModelProfile out;
  m->ToProto(&out);
  EXPECT_EQ(out.subnets(0).latency_us_size(), 0);
  EXPECT_TRUE(out.subnets(0).has_alpha_us());
  EXPECT_DOUBLE_EQ(out.subnets(0).beta_us(), 5072.0);
  const std::string json = m->ToJson();
  EXPECT_NE(json.find("\"alpha_us\": 1053"), std::string::npos) << json;
  auto back = ModelProfile::FromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->subnets[2].latency, m->subnets[2].latency);
  // ...and a proportional model (beta 0) is allowed.
  p.mutable_subnets(0)->set_beta_us(0);
  auto proportional = ModelProfile::FromProto(p);
  ASSERT_TRUE(proportional.ok()) << proportional.status();
  EXPECT_EQ(proportional->subnets[0].latency[0], Micros(1053));
  // Linear subnets are compared for dominance like tables.
  p.mutable_subnets(1)->set_alpha_us(1053.0);
  p.mutable_subnets(1)->set_beta_us(0);
  auto dominated = ModelProfile::FromProto(p);
  ASSERT_TRUE(dominated.ok()) << dominated.status();
  EXPECT_EQ(dominated->SubnetIndex(10), -1);
}

TEST(ModelProfileTest, RejectsABadLinearFormByName) {
  auto linear = [] {
    auto p = ValidProto();
    for (auto& sn : *p.mutable_subnets()) {
      sn.clear_latency_us();
      sn.set_alpha_us(10);
      sn.set_beta_us(100);
    }
    return p;
  };
  auto both = linear();
  both.mutable_subnets(1)->add_latency_us(1);
  ExpectRejected(both, "subnet id=11", "both latency_us (1 entries) and the linear form");
  auto neither = linear();
  neither.mutable_subnets(2)->clear_alpha_us();
  neither.mutable_subnets(2)->clear_beta_us();
  ExpectRejected(neither, "subnet id=12", "gives neither latency_us");
  auto half = linear();
  half.mutable_subnets(0)->clear_beta_us();
  ExpectRejected(half, "subnet id=10", "field beta_us is missing");
  auto negative = linear();
  negative.mutable_subnets(0)->set_alpha_us(-1);
  ExpectRejected(negative, "field alpha_us = -1", "finite and >= 0");
  auto nan = linear();
  nan.mutable_subnets(1)->set_beta_us(std::nan(""));
  ExpectRejected(nan, "subnet id=11", "field beta_us = nan");
  auto zero = linear();
  zero.mutable_subnets(2)->set_alpha_us(0);
  zero.mutable_subnets(2)->set_beta_us(0);
  ExpectRejected(zero, "alpha_us = 0 and beta_us = 0", "must be > 0");
  auto huge = linear();
  huge.mutable_subnets(0)->set_alpha_us(1e12);
  ExpectRejected(huge, "alpha_us = 1e+12", "us at batch 1; every latency must be in");
}

// What is really wrong with a table stays an error naming field and value.
TEST(ModelProfileTest, RejectsABadTableFigureByFieldAndValue) {
  auto p = ValidProto();
  p.mutable_subnets(1)->set_latency_us(2, std::nan(""));
  ExpectRejected(p, "subnet id=11 (index 1): field latency_us[2] (batch 4) = nan",
                 "must be finite");
  p = ValidProto();
  p.mutable_subnets(0)->set_latency_us(1, -5);
  ExpectRejected(p, "field latency_us[1] (batch 2) = -5", "must be finite and in [0.001");
}

TEST(ModelProfileTest, RejectsWrongNumberOfLatencies) {
  auto p = ValidProto();
  p.mutable_subnets(2)->add_latency_us(1000.0);
  ExpectRejected(p, "subnet id=12", "exactly one per batch size");
}

TEST(ModelProfileTest, RejectsAccuracyOutsidePercent) {
  auto p = ValidProto();
  p.mutable_subnets(0)->set_accuracy(0.9 * 1000);
  ExpectRejected(p, "subnet id=10", "field accuracy");
}

TEST(ModelProfileTest, RejectsDuplicateIds) {
  auto p = ValidProto();
  p.mutable_subnets(2)->set_id(10);
  ExpectRejected(p, "subnet id=10 (index 2)", "duplicate");
}

TEST(ModelProfileTest, RejectsNonPositiveLatency) {
  auto p = ValidProto();
  p.mutable_subnets(0)->set_latency_us(0, 0.0);
  ExpectRejected(p, "subnet id=10", "latency_us[0]");
}

// Regression (found by model_profile_fuzzer on the committed fmnist profile):
// latencies were truncated to nanoseconds, and 514.883 us is 514882.99.. ns in
// binary, so every save and load of a profile lost a nanosecond.
TEST(ModelProfileTest, LatencyRoundsToTheNearestNanosecondAndSurvivesSaveLoad) {
  auto p = ValidProto();
  p.mutable_subnets(0)->set_latency_us(2, 514.883);
  auto m = ModelProfile::FromProto(p);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->subnets[0].latency[2], 514883);
  auto again = ModelProfile::FromJson(m->ToJson());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->subnets[0].latency[2], 514883);
  EXPECT_EQ(again->ToJson(), m->ToJson());
}

// Regression (found while writing model_profile_fuzzer): a latency is held as
// int64 nanoseconds, so a finite latency_us beyond that range (1e300) made the
// conversion undefined behaviour, and one below half a nanosecond became
// 0 ns, a profile that saved fine but failed to load again.
TEST(ModelProfileTest, RejectsLatencyOutsideNanosecondRange) {
  auto p = ValidProto();
  p.mutable_subnets(1)->set_latency_us(2, 1e300);
  ExpectRejected(p, "subnet id=11", "latency_us[2]");
  p = ValidProto();
  p.mutable_subnets(0)->set_latency_us(0, 1e-6);
  ExpectRejected(p, "subnet id=10", "latency_us[0]");
  // The bounds themselves are accepted: one nanosecond and one day.
  p = ValidProto();
  p.mutable_subnets(0)->set_latency_us(0, 0.001);
  for (int s = 0; s < 3; ++s) p.mutable_subnets(s)->set_latency_us(2, 86400e6);
  auto m = ModelProfile::FromProto(p);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->subnets[0].latency[0], 1);
  EXPECT_EQ(m->subnets[2].latency[2], kMaxQueryTimeout);
}

TEST(ModelProfileTest, InputNormalizationRoundTripsAndStdMustBePositive) {
  auto p = ValidProto();
  p.mutable_input_normalization()->set_mean(0.25f);
  p.mutable_input_normalization()->set_std(0.5f);
  auto m = ModelProfile::FromProto(p);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FLOAT_EQ(m->input_mean, 0.25f);
  EXPECT_FLOAT_EQ(m->input_std, 0.5f);
  auto back = ModelProfile::FromJson(m->ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_FLOAT_EQ(back->input_std, 0.5f);
  p.mutable_input_normalization()->set_std(0.f);
  ExpectRejected(p, "input_normalization", "std");
}

TEST(ModelProfileTest, RejectsEmptyBatchSizesAndSubnets) {
  auto p = ValidProto();
  p.clear_batch_sizes();
  ExpectRejected(p, "batch_sizes is empty");
  p = ValidProto();
  p.clear_subnets();
  ExpectRejected(p, "subnets is empty");
}

TEST(ModelProfileTest, RejectsBadDynamicHistogram) {
  auto p = ValidProto();
  p.clear_subnets();
  auto* h = p.mutable_dynamic()->add_applications();
  h->set_application("video");
  p.mutable_dynamic()->set_per_request_factor(1.0);
  h->add_bin_edges_us(0);
  h->add_bin_edges_us(10);
  h->add_counts(1);
  h->add_counts(2);  // 2 counts need 3 edges
  ExpectRejected(p, "\"video\"", "bin_edges_us");
}

TEST(ModelProfileTest, RejectsAProfileThatIsBothASupernetAndADynamicModel) {
  auto p = ValidProto();  // has subnets
  auto* h = p.mutable_dynamic()->add_applications();
  h->set_application("video");
  p.mutable_dynamic()->set_per_request_factor(1.0);
  h->add_bin_edges_us(10);
  h->add_bin_edges_us(20);
  h->add_counts(1);
  ExpectRejected(p, "has both subnets", "not both");
}

TEST(ModelProfileTest, ADynamicBlockWithoutApplicationsSaysSo) {
  auto p = ValidProto();
  p.clear_subnets();
  p.mutable_dynamic()->set_per_request_factor(1.0);
  ExpectRejected(p, "dynamic.applications is empty");
}

// Batch times past a day would wrap when converted to nanoseconds and make an
// impossible model look instant.
TEST(ModelProfileTest, RejectsDynamicBatchTimesBeyondADay) {
  const auto dynamic = [](double c0, double c1, double edge) {
    v1::ModelProfile p = ValidProto();
    p.clear_subnets();
    auto* d = p.mutable_dynamic();
    d->set_batch_overhead_us(c0);
    d->set_per_request_factor(c1);
    auto* h = d->add_applications();
    h->set_application("long");
    h->add_bin_edges_us(10);
    h->add_bin_edges_us(edge);
    h->add_counts(1);
    return p;
  };
  EXPECT_TRUE(ModelProfile::FromProto(dynamic(500, 1, 1e6)).ok());
  ExpectRejected(dynamic(500, 1, 1e17), "\"long\"", "more than a day");
  ExpectRejected(dynamic(9.3e15, 1, 100), "dynamic.batch_overhead_us", "exceeds a day");
  ExpectRejected(dynamic(500, 1e300, 100), "\"long\"", "more than a day");
  v1::ModelProfile no_single = dynamic(500, 1, 100);
  no_single.clear_batch_sizes();
  no_single.add_batch_sizes(4);
  ExpectRejected(no_single, "batch_sizes starts at 4", "must start at 1");
}

TEST(ModelProfileTest, LoadsADynamicModelWithoutSubnets) {
  const std::string json = R"({"model": "early-exit", "batch_sizes": [1, 2, 4],
    "dynamic": {"batch_overhead_us": 500, "per_request_factor": 0.25,
      "applications": [
        {"application": "clean", "bin_edges_us": [100, 200, 400], "counts": [3, 1]},
        {"application": "noisy", "bin_edges_us": [100, 400], "counts": [5]}]}})";
  auto m = ModelProfile::FromJson(json);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->is_dynamic);
  EXPECT_TRUE(m->subnets.empty());
  ASSERT_EQ(m->dynamic.applications.size(), 2u);
  EXPECT_EQ(m->dynamic.applications[1].application, "noisy");
  EXPECT_EQ(m->dynamic.applications[0].counts, (std::vector<double>{3, 1}));
  EXPECT_DOUBLE_EQ(m->dynamic.per_request_factor, 0.25);
  auto back = ModelProfile::FromJson(m->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dynamic.applications[0].bin_edges_us,
            m->dynamic.applications[0].bin_edges_us);
  // Without histograms and without subnets there is nothing to schedule.
  EXPECT_FALSE(ModelProfile::FromJson(R"({"model": "x", "batch_sizes": [1],
    "dynamic": {"per_request_factor": 1}})").ok());
}

TEST(ModelProfileTest, ExitAccuracyIsValidatedRoundTripsAndFallsBackToTheModel) {
  const std::string json = R"({"model": "early-exit", "batch_sizes": [1, 2],
    "dynamic": {"batch_overhead_us": 500, "per_request_factor": 0.25,
      "exit_accuracy": [90, 80, 70],
      "applications": [
        {"application": "clean", "bin_edges_us": [100, 200], "counts": [3],
         "exit_accuracy": [99, 95, 85]},
        {"application": "noisy", "bin_edges_us": [100, 400], "counts": [5]}]}})";
  auto m = ModelProfile::FromJson(json);
  ASSERT_TRUE(m.ok()) << m.status();
  const DynamicModelProfile& d = m->dynamic;
  EXPECT_DOUBLE_EQ(d.ExitAccuracy("clean", 2), 85);
  EXPECT_DOUBLE_EQ(d.ExitAccuracy("noisy", 0), 90) << "no figures of its own: the model's";
  EXPECT_DOUBLE_EQ(d.ExitAccuracy("", 1), 80);
  EXPECT_DOUBLE_EQ(d.ExitAccuracy("unknown", 1), 80);
  EXPECT_DOUBLE_EQ(d.ExitAccuracy("clean", 3), 0) << "an exit past the profile's";
  EXPECT_DOUBLE_EQ(d.ExitAccuracy("clean", -1), 0) << "exit not reported";
  auto back = ModelProfile::FromJson(m->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dynamic.exit_accuracy, d.exit_accuracy);
  EXPECT_EQ(back->dynamic.applications[0].exit_accuracy, d.applications[0].exit_accuracy);

  v1::ModelProfile p;
  m->ToProto(&p);
  p.mutable_dynamic()->mutable_applications(0)->set_exit_accuracy(1, 100.5);
  ExpectRejected(p, "\"clean\"", "exit_accuracy[1] = 100.5");
  p.mutable_dynamic()->mutable_applications(0)->set_exit_accuracy(1, 95);
  p.mutable_dynamic()->mutable_applications(0)->add_exit_accuracy(60);
  ExpectRejected(p, "\"clean\"", "one per exit");
  p.mutable_dynamic()->mutable_applications(0)->clear_exit_accuracy();
  p.mutable_dynamic()->set_exit_accuracy(0, std::nan(""));
  ExpectRejected(p, "dynamic.exit_accuracy[0]");
}

// Load-adaptive exits: per threshold, the model's accuracy and each
// application's histogram; a profile without them is one threshold.
TEST(ModelProfileTest, PerThresholdHistogramsLoadValidateAndRoundTrip) {
  const std::string json = R"({"model": "early-exit", "batch_sizes": [1, 2],
    "dynamic": {"batch_overhead_us": 500, "per_request_factor": 0.25,
      "default_threshold": 0.9,
      "applications": [
        {"application": "clean", "bin_edges_us": [100, 300], "counts": [3], "accuracy": 91}],
      "thresholds": [
        {"threshold": 0.6, "accuracy": 85, "applications": [
          {"application": "clean", "bin_edges_us": [100, 150], "counts": [3], "accuracy": 86,
           "exit_accuracy": [80, 90]}]},
        {"threshold": 0.9, "accuracy": 90, "applications": [
          {"application": "clean", "bin_edges_us": [100, 300], "counts": [3], "accuracy": 91}]}]}})";
  auto m = ModelProfile::FromJson(json);
  ASSERT_TRUE(m.ok()) << m.status();
  const DynamicModelProfile& d = m->dynamic;
  ASSERT_EQ(d.thresholds.size(), 2u);
  EXPECT_DOUBLE_EQ(d.thresholds[0].threshold, 0.6);
  EXPECT_DOUBLE_EQ(d.thresholds[0].accuracy, 85);
  EXPECT_EQ(d.default_threshold_index(), 1);
  EXPECT_EQ(d.ApplicationsAt(0)[0].bin_edges_us, (std::vector<double>{100, 150}));
  EXPECT_EQ(d.ApplicationsAt(-1)[0].bin_edges_us, (std::vector<double>{100, 300}));
  EXPECT_EQ(d.ApplicationsAt(0)[0].accuracy, std::optional<double>(86));
  EXPECT_DOUBLE_EQ(d.ExitAccuracy("clean", 1, 0), 90) << "threshold 0.6's own figures";
  // An answer whose exit is unknown: the application's accuracy at the
  // threshold, else the threshold's.
  EXPECT_DOUBLE_EQ(d.ExpectedAccuracy("clean", 0), 86);
  EXPECT_DOUBLE_EQ(d.ExpectedAccuracy("other", 0), 85);
  EXPECT_DOUBLE_EQ(d.ExpectedAccuracy("clean", -1), 91);
  EXPECT_DOUBLE_EQ(d.ExpectedAccuracy("other", -1), 90) << "the default threshold's";
  auto back = ModelProfile::FromJson(m->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->dynamic.thresholds.size(), 2u);
  EXPECT_DOUBLE_EQ(back->dynamic.default_threshold, 0.9);
  EXPECT_EQ(back->dynamic.thresholds[0].applications[0].counts, (std::vector<double>{3}));
  EXPECT_EQ(back->dynamic.applications[0].accuracy, std::optional<double>(91));

  v1::ModelProfile p;
  m->ToProto(&p);
  p.mutable_dynamic()->set_default_threshold(0.8);
  ExpectRejected(p, "dynamic.default_threshold = 0.8", "none of dynamic.thresholds");
  p.mutable_dynamic()->set_default_threshold(0.9);
  p.mutable_dynamic()->mutable_thresholds(0)->set_threshold(0.95);
  ExpectRejected(p, "dynamic.thresholds[1]", "increasing");
  p.mutable_dynamic()->mutable_thresholds(0)->set_threshold(0.6);
  p.mutable_dynamic()->mutable_thresholds(0)->set_accuracy(101);
  ExpectRejected(p, "dynamic.thresholds[0]", "accuracy = 101");
  p.mutable_dynamic()->mutable_thresholds(0)->set_accuracy(85);
  p.mutable_dynamic()->mutable_thresholds(0)->mutable_applications(0)->set_application("noisy");
  ExpectRejected(p, "dynamic.thresholds[0]", "same order");
  p.mutable_dynamic()->mutable_thresholds(0)->mutable_applications(0)->set_application("clean");
  p.mutable_dynamic()->mutable_thresholds(0)->mutable_applications(0)->set_counts(0, -1);
  ExpectRejected(p, "dynamic.thresholds[0]", "counts[0]");

  // Today's profiles: no thresholds, one threshold (the model's own).
  auto old = ModelProfile::FromJson(R"({"model": "x", "batch_sizes": [1],
    "dynamic": {"per_request_factor": 1, "applications": [
      {"application": "a", "bin_edges_us": [1, 2], "counts": [1]}]}})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_TRUE(old->dynamic.thresholds.empty());
  EXPECT_EQ(old->dynamic.default_threshold_index(), -1);
  EXPECT_EQ(&old->dynamic.ApplicationsAt(0), &old->dynamic.applications);
  EXPECT_DOUBLE_EQ(old->dynamic.ExpectedAccuracy("a"), 0) << "not measured";
}

TEST(ModelProfileTest, JsonRoundTripAndFileIo) {
  auto m = ModelProfile::FromProto(ValidProto());
  ASSERT_TRUE(m.ok());
  std::string json = m->ToJson();
  auto back = ModelProfile::FromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->subnets.size(), 3u);
  EXPECT_EQ(back->subnets[2].latency, m->subnets[2].latency);
  EXPECT_EQ(back->input_shape, m->input_shape);

  std::string path = ::testing::TempDir() + "/profile_test.json";
  ASSERT_TRUE(m->SaveFile(path).ok());
  auto loaded = ModelProfile::LoadFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->subnets[0].control, m->subnets[0].control);
  std::remove(path.c_str());
}

TEST(ModelProfileTest, RejectsMalformedJsonAndMissingFile) {
  auto bad = ModelProfile::FromJson("{\"model\": \"x\", \"batch_sizes\": [1], \"nope\": 3}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a valid ModelProfile JSON"), std::string::npos);
  auto missing = ModelProfile::LoadFile("/nonexistent/profile.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/profile.json"), std::string::npos);
}

// A profile file with `p` as protobuf JSON, in a fresh temporary folder.
std::string WriteProfileFile(const v1::ModelProfile& p, const std::string& name) {
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(p, &json).ok());
  const std::string path = ::testing::TempDir() + "/" + name + ".json";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(json.c_str(), f);
  std::fclose(f);
  return path;
}

TEST(ModelProfileTest, LatenciesLeftOutOfEverySubnetAreAcceptedOnlyAsUnmeasured) {
  v1::ModelProfile p = ValidProto();
  for (auto& s : *p.mutable_subnets()) s.clear_latency_us();
  const std::string path = WriteProfileFile(p, "unmeasured");
  // The usual rules refuse it...
  auto strict = ModelProfile::LoadFile(path);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("latency_us"), std::string::npos);
  // ...a package's loader takes it, with no latencies and the flag down.
  auto m = ModelProfile::LoadFileAllowingUnmeasured(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->latencies_measured);
  ASSERT_EQ(m->subnets.size(), 3u);
  for (const auto& s : m->subnets) EXPECT_TRUE(s.latency.empty());
  // Every other rule still holds.
  v1::ModelProfile bad_accuracy = p;
  bad_accuracy.mutable_subnets(1)->set_accuracy(0.9e3);
  auto refused = ModelProfile::LoadFileAllowingUnmeasured(WriteProfileFile(bad_accuracy, "acc"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("accuracy"), std::string::npos);
  // Left out of some subnets only: the usual error.
  v1::ModelProfile partial = ValidProto();
  partial.mutable_subnets(2)->clear_latency_us();
  auto some = ModelProfile::LoadFileAllowingUnmeasured(WriteProfileFile(partial, "partial"));
  ASSERT_FALSE(some.ok());
  EXPECT_NE(some.status().message().find("subnet id=12 (index 2): gives neither latency_us"),
            std::string::npos)
      << some.status();
  // A measured profile loads as measured.
  auto measured = ModelProfile::LoadFileAllowingUnmeasured(WriteProfileFile(ValidProto(), "ok"));
  ASSERT_TRUE(measured.ok());
  EXPECT_TRUE(measured->latencies_measured);
}

TEST(ModelProfileTest, FillLatenciesTakesAWorkersMeasurementRaisingNoiseDips) {
  v1::ModelProfile p = ValidProto();
  for (auto& s : *p.mutable_subnets()) s.clear_latency_us();
  auto m = ModelProfile::LoadFileAllowingUnmeasured(WriteProfileFile(p, "fill"));
  ASSERT_TRUE(m.ok()) << m.status();
  ModelProfile before = *m;
  // A missing subnet, a wrong count and a bad figure are refused; nothing changes.
  EXPECT_FALSE(m->FillLatencies({{10, {1, 2, 3}}, {11, {1, 2, 3}}}).ok());
  EXPECT_FALSE(m->FillLatencies({{10, {1, 2, 3}}, {11, {1, 2}}, {12, {1, 2, 3}}}).ok());
  auto negative = m->FillLatencies({{10, {1, 2, 3}}, {11, {-1, 2, 3}}, {12, {1, 2, 3}}});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.message().find("latency_us"), std::string::npos) << negative;
  EXPECT_FALSE(m->latencies_measured);
  for (const auto& s : m->subnets) EXPECT_TRUE(s.latency.empty());
  ASSERT_TRUE(m->FillLatencies({{10, {100, 90, 300}}, {11, {200, 400, 800}}, {12, {300, 600, 900}}})
                  .ok());
  EXPECT_TRUE(m->latencies_measured);
  const int i = m->SubnetIndex(10);
  ASSERT_GE(i, 0);
  // 90 after 100 is timing noise: raised to 100 (non-decreasing, as the rules want).
  EXPECT_EQ(m->subnets[i].latency, (std::vector<Nanos>{Micros(100), Micros(100), Micros(300)}));
  EXPECT_EQ(m->subnets[m->SubnetIndex(12)].latency.back(), Micros(900));
  EXPECT_EQ(m->subnets[i].accuracy, before.subnets[i].accuracy);
  EXPECT_TRUE(m->warnings.empty());
}

// A worker's measurement can make a subnet dominated (this machine runs it
// slower than a more accurate one): it leaves the choices, with a warning,
// on the router and the worker alike (both fill from the same figures).
TEST(ModelProfileTest, FillLatenciesLeavesOutASubnetTheMeasurementDominates) {
  v1::ModelProfile p = ValidProto();
  for (auto& s : *p.mutable_subnets()) s.clear_latency_us();
  auto m = ModelProfile::LoadFileAllowingUnmeasured(WriteProfileFile(p, "fill_dominated"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->warnings.empty());  // stand-in latencies rank nothing
  ASSERT_EQ(m->subnets.size(), 3u);
  ASSERT_TRUE(
      m->FillLatencies({{10, {100, 200, 300}}, {11, {400, 800, 900}}, {12, {300, 600, 900}}}).ok());
  EXPECT_EQ(m->SubnetIndex(11), -1);
  EXPECT_EQ(m->subnets.size(), 2u);
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_NE(m->warnings[0].find("subnet id=11 (accuracy 89%) is dominated by subnet id=12"),
            std::string::npos)
      << m->warnings[0];
}

}  // namespace
}  // namespace superserve

namespace superserve {
namespace {

// Placement (issue 43): a profile's memory footprint and load time round-
// trip; negative ones are refused naming the fields.
TEST(ModelProfileTest, MemoryAndLoadTimeRoundTripAndNegativesAreRefused) {
  auto p = ValidProto();
  auto plain = ModelProfile::FromProto(p);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->memory_bytes, 0);
  EXPECT_EQ(plain->load_time, 0);
  p.set_memory_bytes(100'000'000);
  p.set_load_ms(8.5);
  auto m = ModelProfile::FromProto(p);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->memory_bytes, 100'000'000);
  EXPECT_EQ(m->load_time, Micros(8500));
  auto back = ModelProfile::FromJson(m->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->memory_bytes, 100'000'000);
  EXPECT_EQ(back->load_time, Micros(8500));
  p.set_memory_bytes(-1);
  ExpectRejected(p, "memory_bytes must be >= 0", "load_ms");
  p.set_memory_bytes(0);
  p.set_load_ms(-1);
  ExpectRejected(p, "memory_bytes must be >= 0", "load_ms in [0");
}

}  // namespace
}  // namespace superserve
