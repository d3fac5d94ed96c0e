// The free-slot index: which workers may take one more batch, as a bitmap
// walked lowest id first. Kept by WorkerPool.
#ifndef SUPERSERVE_SERVING_FREE_SLOT_INDEX_H_
#define SUPERSERVE_SERVING_FREE_SLOT_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace superserve {

// Bit w: worker w is alive, registered and holds fewer batches than the
// lookahead. A scheduling pass offers a model the lowest free workers a few
// at a time instead of testing every worker that serves it (hundreds), so
// an arrival costs O(1) in the pool's size and a walk O(W/64). Not
// thread-safe.
class FreeSlotIndex {
 public:
  void Set(int32_t id, bool free) {
    const size_t word = static_cast<size_t>(id) / 64;
    if (words_.size() <= word) words_.resize(word + 1, 0);
    const uint64_t bit = uint64_t{1} << (id % 64);
    if (free) {
      words_[word] |= bit;
    } else {
      words_[word] &= ~bit;
    }
  }
  bool Contains(int32_t id) const {
    const size_t word = static_cast<size_t>(id) / 64;
    return id >= 0 && word < words_.size() && (words_[word] >> (id % 64) & 1) != 0;
  }

  // The free ids in ascending order. A walk copies one 64-id word at a
  // time: an id cleared in the word being walked is still returned (the
  // caller checks), later words are read as the walk reaches them.
  class Walk {
   public:
    explicit Walk(const FreeSlotIndex* index)
        : words_(&index->words_), bits_(words_->empty() ? 0 : (*words_)[0]) {}
    // The next free id, or -1 when none is left.
    int32_t Next() {
      while (bits_ == 0 && ++word_ < words_->size()) bits_ = (*words_)[word_];
      if (bits_ == 0) return -1;
      const int32_t id = static_cast<int32_t>(word_ * 64 + __builtin_ctzll(bits_));
      bits_ &= bits_ - 1;
      return id;
    }

   private:
    const std::vector<uint64_t>* words_;
    size_t word_ = 0;
    uint64_t bits_;
  };
  Walk Free() const { return Walk(this); }

 private:
  std::vector<uint64_t> words_;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_FREE_SLOT_INDEX_H_
