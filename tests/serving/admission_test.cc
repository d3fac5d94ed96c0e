// The admission chain: the first check an arrival fails answers it, with its
// code and the bound it names; the checks that act (input, sweep, placement)
// run only once every check before them passed.
#include "serving/admission.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "policies/policy_factory.h"
#include "tests/policies/policy_test_util.h"
#include "tests/test_util/serving_fakes.h"

namespace superserve {
namespace {

// Model "hand" (ThreeSubnetProfile: fastest subnet 1 ms at batch 1), one
// worker; arrivals at 10 ms due at 30 ms, tag "app".
class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionTest()
      : m_(1, 1, testing::ThreeSubnetProfile(), std::make_unique<testing::IdlePolicy>()) {
    m_.scheduler.AddWorker(0);
  }

  std::optional<Refusal> Check(ServedModel* m, Nanos deadline = Millis(30),
                               absl::string_view tag = "app") {
    return admission_.Check(Arrival{"hand", tag, deadline, kNow}, shut_down_, draining_, m,
                            applications_,
                            {[&](const ModelProfile&) {
                               ++inputs_;
                               return input_;
                             },
                             [&] {
                               ++sweeps_;
                               std::vector<QueryId> expired, cancelled;
                               m->scheduler.Sweep(kNow, &expired, &cancelled);
                             },
                             [&] {
                               ++places_;
                               return ready_;
                             }});
  }
  // The refusal's check, or "admitted".
  static std::string Verdict(const std::optional<Refusal>& r) {
    return r ? absl::StrCat(static_cast<int>(r->check), " ", r->status.ToString()) : "admitted";
  }

  static constexpr Nanos kNow = Millis(10);
  ServedModel m_;
  Admission admission_{2};  // max_queue 2
  ApplicationRegistry applications_;
  bool shut_down_ = false;
  bool draining_ = false;
  absl::Status input_;
  Nanos ready_ = 0;
  int inputs_ = 0, sweeps_ = 0, places_ = 0;
};

TEST_F(AdmissionTest, TheFirstFailingCheckAnswers) {
  shut_down_ = draining_ = true;
  m_.closed = true;
  input_ = absl::InvalidArgumentError("3 bytes, want 8");
  std::optional<Refusal> r = Check(nullptr);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->check, Refusal::Check::kShutDown);
  EXPECT_EQ(r->status, absl::UnavailableError("shutting down"));
  EXPECT_EQ(r->outcome, QueryOutcome::kUnavailable);

  shut_down_ = false;
  r = Check(nullptr);
  EXPECT_EQ(r->check, Refusal::Check::kDraining);
  EXPECT_EQ(r->status.code(), absl::StatusCode::kUnavailable);

  draining_ = false;
  r = Check(nullptr);
  EXPECT_EQ(r->check, Refusal::Check::kUnknownModel);
  EXPECT_EQ(r->status, absl::InvalidArgumentError("unknown model \"hand\""));
  EXPECT_EQ(r->outcome, QueryOutcome::kInvalidArgument);

  r = Check(&m_);
  EXPECT_EQ(r->check, Refusal::Check::kClosed);
  EXPECT_EQ(r->outcome, QueryOutcome::kInvalidArgument);
  EXPECT_EQ(inputs_, 0) << "the input is checked only for an open model";

  m_.closed = false;
  r = Check(&m_);
  EXPECT_EQ(r->check, Refusal::Check::kInput);
  EXPECT_EQ(r->status, absl::InvalidArgumentError("model hand input: 3 bytes, want 8"));
  EXPECT_EQ(inputs_, 1);

  input_ = absl::OkStatus();
  ServedModel unserved(2, 1, testing::ThreeSubnetProfile(),
                       std::make_unique<testing::IdlePolicy>());
  r = Check(&unserved);
  EXPECT_EQ(r->check, Refusal::Check::kNoWorker);
  EXPECT_EQ(r->status, absl::UnavailableError("no live worker serves model hand"));
  EXPECT_EQ(places_, 0);
  unserved.loadable_on = {4};  // a budgeted worker could load it
  EXPECT_EQ(Verdict(Check(&unserved)), "admitted");
  EXPECT_EQ(Verdict(Check(&m_)), "admitted");
  EXPECT_EQ(places_, 2) << "placement last, once per admitted arrival";
  EXPECT_EQ(sweeps_, 0) << "the queue was never full";
}

TEST_F(AdmissionTest, AFullQueueIsSweptBeforeItRefuses) {
  m_.scheduler.Push({1, 0, 0, Millis(5)}, 0);  // expired by now (10 ms)
  m_.scheduler.Push({2, 0, 0, Millis(30)}, 0);
  EXPECT_EQ(Verdict(Check(&m_)), "admitted") << "the sweep freed 1's place";
  EXPECT_EQ(sweeps_, 1);
  EXPECT_EQ(m_.scheduler.queued(), 1u);
  m_.scheduler.Push({3, 0, 0, Millis(30)}, 0);
  const std::optional<Refusal> r = Check(&m_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->check, Refusal::Check::kQueueFull);
  EXPECT_EQ(r->status, absl::ResourceExhaustedError("model hand queue is full (2)"));
  EXPECT_EQ(r->outcome, QueryOutcome::kResourceExhausted);
  EXPECT_EQ(sweeps_, 2);
  EXPECT_EQ(places_, 1);
}

TEST_F(AdmissionTest, TagsDeadlinesAndLoads) {
  applications_ = ApplicationRegistry(ApplicationRegistry::Options{1, 256});
  applications_.Intern("app");
  std::optional<Refusal> r = Check(&m_, Millis(30), "other");
  EXPECT_EQ(r->check, Refusal::Check::kApplication) << "one tag at most, and it is taken";
  EXPECT_EQ(r->outcome, QueryOutcome::kInvalidArgument);

  r = Check(&m_, kNow);
  EXPECT_EQ(r->check, Refusal::Check::kDeadlinePassed) << "due now";
  EXPECT_EQ(r->outcome, QueryOutcome::kDeadlineExceeded);
  EXPECT_EQ(places_, 0);
  // 0.5 ms left, less than the fastest batch of one (1 ms): answered now.
  r = Check(&m_, kNow + Micros(500));
  EXPECT_EQ(r->check, Refusal::Check::kTooLittleSlack);
  EXPECT_EQ(r->status, absl::DeadlineExceededError(
                           "cannot finish by the deadline: 500 us left on arrival, model hand's "
                           "fastest batch takes 1000 us"));
  EXPECT_EQ(places_, 0);
  EXPECT_EQ(Verdict(Check(&m_, kNow + Millis(1))), "admitted") << "exactly the fastest's 1 ms";

  ready_ = -1;
  r = Check(&m_);
  EXPECT_EQ(r->check, Refusal::Check::kNoLoadableWorker);
  EXPECT_EQ(r->status, absl::UnavailableError("no live worker can load model hand"));
  // A load ready at 29.5 ms leaves 0.5 ms of the 30 ms deadline, less than
  // the fastest subnet's 1 ms.
  ready_ = Millis(29.5);
  r = Check(&m_);
  EXPECT_EQ(r->check, Refusal::Check::kLoadTooLate);
  EXPECT_EQ(r->status, absl::DeadlineExceededError(
                           "model hand is resident on no worker and loading it completes 19.5 "
                           "ms from now, too late for the deadline"));
  ready_ = Millis(29);  // exactly the fastest subnet's 1 ms left
  EXPECT_EQ(Verdict(Check(&m_)), "admitted");
}

TEST_F(AdmissionTest, AnOverloadedModelTurnsAwayWhatTheQueueLeavesNoTimeFor) {
  // Ratefit on one worker. Its best throughput is at most ThreeSubnetProfile's
  // fastest tuple, 8 queries in 4.5 ms (1,778 q/s); with the admission
  // headroom of 4, at most 1 + 20 ms x 1,778 x 4 = 143 queries drain ahead
  // of an arrival due in 20 ms: 200 queued due at 30 ms leave it no time.
  ServedModel m(3, 1, testing::ThreeSubnetProfile(),
                *MakePolicy("ratefit", testing::ThreeSubnetProfile(), PolicyConfig()));
  m.scheduler.AddWorker(0);
  for (QueryId id = 1; id <= 200; ++id) m.scheduler.Push({id, 0, 0, Millis(30)}, 0);
  Admission unbounded(100000);
  const auto check = [&](Nanos deadline) {
    return unbounded.Check(
        Arrival{"hand", "", deadline, kNow}, false, false, &m, applications_,
        {[](const ModelProfile&) { return absl::OkStatus(); }, [] {}, [] { return Nanos{0}; }});
  };
  const std::optional<Refusal> r = check(Millis(30));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->check, Refusal::Check::kOverloaded);
  EXPECT_EQ(r->status,
            absl::DeadlineExceededError("overloaded: cannot finish by the deadline behind the 200 "
                                        "queries queued for model hand"));
  EXPECT_EQ(r->outcome, QueryOutcome::kDeadlineExceeded);
  // Due before all 200 (EDF): none is ahead of it.
  EXPECT_FALSE(check(Millis(29)).has_value());
}

}  // namespace
}  // namespace superserve
