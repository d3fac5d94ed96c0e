// The free-slot bitmap: ids across several 64-bit words, walked in
// ascending order, and what a walk sees of changes made while it runs.
#include "serving/free_slot_index.h"

#include <vector>

#include "gtest/gtest.h"

namespace superserve {
namespace {

std::vector<int32_t> WalkAll(const FreeSlotIndex& index) {
  std::vector<int32_t> out;
  FreeSlotIndex::Walk walk = index.Free();
  for (int32_t id = walk.Next(); id >= 0; id = walk.Next()) out.push_back(id);
  return out;
}

TEST(FreeSlotIndexTest, WalksFreeIdsAscendingAcrossWords) {
  FreeSlotIndex index;
  EXPECT_TRUE(WalkAll(index).empty()) << "an empty index";
  for (int32_t id : {200, 3, 64, 63, 0, 130}) index.Set(id, true);
  EXPECT_EQ(WalkAll(index), (std::vector<int32_t>{0, 3, 63, 64, 130, 200}));
  index.Set(63, false);
  index.Set(200, false);
  index.Set(199, false);  // never set: stays clear
  EXPECT_EQ(WalkAll(index), (std::vector<int32_t>{0, 3, 64, 130}));
  EXPECT_TRUE(index.Contains(64));
  EXPECT_FALSE(index.Contains(63));
  EXPECT_FALSE(index.Contains(1000)) << "beyond the bitmap";
  EXPECT_FALSE(index.Contains(-1));
  FreeSlotIndex::Walk done = index.Free();
  while (done.Next() >= 0) {
  }
  EXPECT_EQ(done.Next(), -1) << "an exhausted walk stays exhausted";
}

// The serving core's scheduling pass dispatches (clears ids) while it walks:
// ids of the current word come from the walk's copy, later words are read
// when reached, so an id cleared ahead of the walk is skipped.
TEST(FreeSlotIndexTest, AWalkReadsLaterWordsWhenItReachesThem) {
  FreeSlotIndex index;
  for (int32_t id : {1, 2, 70, 71}) index.Set(id, true);
  FreeSlotIndex::Walk walk = index.Free();
  EXPECT_EQ(walk.Next(), 1);
  index.Set(2, false);   // in the word being walked: still returned
  index.Set(70, false);  // in a later word: skipped
  index.Set(72, true);   // set ahead of the walk: seen
  EXPECT_EQ(walk.Next(), 2);
  EXPECT_EQ(walk.Next(), 71);
  EXPECT_EQ(walk.Next(), 72);
  EXPECT_EQ(walk.Next(), -1);
}

}  // namespace
}  // namespace superserve
