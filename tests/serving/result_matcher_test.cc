#include "serving/result_matcher.h"

#include <gtest/gtest.h>

#include <vector>

namespace superserve {
namespace {

std::vector<size_t> Unanswered(const ResultMatcher& m) {
  std::vector<size_t> out;
  for (size_t k = 0; k < m.size(); ++k) {
    if (!m.answered(k)) out.push_back(k);
  }
  return out;
}

TEST(ResultMatcher, ResultsInOrderAnswerTheirPositions) {
  const std::vector<QueryId> batch = {10, 11, 12};
  ResultMatcher m;
  m.Start(batch);
  EXPECT_EQ(m.Match(0, 10), 0);
  EXPECT_EQ(m.Match(1, 11), 1);
  EXPECT_EQ(m.Match(2, 12), 2);
  EXPECT_TRUE(Unanswered(m).empty());
  EXPECT_EQ(m.foreign(), 0);
  EXPECT_EQ(m.duplicate(), 0);
}

TEST(ResultMatcher, AHostileWorkersResultsAreFoundCountedOrIgnored) {
  const std::vector<QueryId> batch = {10, 11, 12, 13};
  ResultMatcher m;
  m.Start(batch);
  EXPECT_EQ(m.Match(0, 12), 2);   // out of order: found by id
  EXPECT_EQ(m.Match(1, 99), -1);  // not in the batch
  EXPECT_EQ(m.Match(2, 12), -1);  // answered already
  EXPECT_EQ(m.Match(3, 10), 0);
  EXPECT_EQ(m.Match(7, 13), 3);   // past the batch's size
  EXPECT_EQ(m.foreign(), 1);
  EXPECT_EQ(m.duplicate(), 1);
  EXPECT_EQ(Unanswered(m), (std::vector<size_t>{1}));
}

TEST(ResultMatcher, StartForgetsTheLastBatch) {
  const std::vector<QueryId> first = {1, 2};
  const std::vector<QueryId> second = {1, 2, 3};
  ResultMatcher m;
  m.Start(first);
  m.Match(0, 1);
  m.Match(0, 5);
  m.Start(second);
  EXPECT_EQ(m.foreign(), 0);
  EXPECT_EQ(m.Match(0, 1), 0) << "not a duplicate of the last batch's answer";
  EXPECT_EQ(Unanswered(m), (std::vector<size_t>{1, 2}));
}

TEST(ResultMatcher, AnEmptyAnswerLeavesEveryQueryUnanswered) {
  const std::vector<QueryId> batch = {4, 5};
  ResultMatcher m;
  m.Start(batch);
  EXPECT_EQ(Unanswered(m), (std::vector<size_t>{0, 1}));
}

// Telemetry in the results' order is found by the cursor; out of order or
// missing entries by a scan (or not at all).
TEST(TelemetryLookup, FindsEachQuerysEntryInOrderOrNot) {
  std::vector<QueryTelemetry> reported(3);
  for (size_t k = 0; k < reported.size(); ++k) {
    reported[k].id = 20 + k;
    reported[k].exit = static_cast<int32_t>(k);
  }
  TelemetryLookup lookup(reported);
  EXPECT_EQ(lookup.Find(20), &reported[0]);
  EXPECT_EQ(lookup.Find(22), &reported[2]) << "out of order";
  EXPECT_EQ(lookup.Find(21), &reported[1]);
  EXPECT_EQ(lookup.Find(99), nullptr) << "not reported";
  EXPECT_EQ(lookup.Find(20), &reported[0]) << "a second look still finds it";
  const std::vector<QueryTelemetry> none;
  TelemetryLookup empty(none);
  EXPECT_EQ(empty.Find(20), nullptr);
}

}  // namespace
}  // namespace superserve
