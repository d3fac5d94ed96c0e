// The ledger of accepted, unanswered queries: ids ascend and are never
// reused (a late report naming an answered query finds nothing), an entry
// leaves once, and Ids lists what is left in ascending order.
#include "serving/pending_queries.h"

#include "gtest/gtest.h"

namespace superserve {
namespace {

TEST(PendingQueriesTest, IdsAscendAndAreNeverReused) {
  PendingQueries pending;
  EXPECT_TRUE(pending.empty());
  std::vector<QueryId> added;
  for (int i = 0; i < 5; ++i) {
    PendingQuery& p = pending.Add();
    p.model = 100 + static_cast<ModelId>(i);
    added.push_back(p.query.id);
  }
  EXPECT_EQ(added, (std::vector<QueryId>{1, 2, 3, 4, 5}));
  ASSERT_NE(pending.find(3), pending.end());
  EXPECT_EQ(pending.find(3)->second.model, 102u);
  pending.erase(pending.find(3));
  pending.erase(pending.find(5));
  EXPECT_EQ(pending.find(3), pending.end()) << "answered: a late result finds nothing";
  EXPECT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending.Add().query.id, 6u) << "the id of an answered query is not reused";
  EXPECT_EQ(pending.Ids(), (std::vector<QueryId>{1, 2, 4, 6}));
  for (QueryId id : pending.Ids()) pending.erase(pending.find(id));
  EXPECT_TRUE(pending.empty());
  EXPECT_TRUE(pending.Ids().empty());
}

}  // namespace
}  // namespace superserve
