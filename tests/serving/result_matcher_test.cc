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

}  // namespace
}  // namespace superserve
