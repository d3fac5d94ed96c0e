#include "worker/backoff.h"

#include <gtest/gtest.h>

#include <vector>

namespace superserve {
namespace {

BackoffOptions NoJitter() {
  BackoffOptions o;
  o.initial = Millis(100);
  o.max = Millis(1000);
  o.multiplier = 2;
  o.jitter = 0;
  return o;
}

TEST(Backoff, DoublesUpToTheCapAndStartsOverAfterReset) {
  Backoff b(NoJitter());
  const std::vector<Nanos> want = {Millis(100), Millis(200), Millis(400), Millis(800),
                                   Millis(1000), Millis(1000), Millis(1000)};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(b.Next(), want[i]) << "attempt " << i + 1;
    EXPECT_EQ(b.attempts(), static_cast<int64_t>(i + 1));
  }
  b.Reset();
  EXPECT_EQ(b.attempts(), 0);
  EXPECT_EQ(b.Next(), Millis(100));
  EXPECT_EQ(b.Next(), Millis(200));
}

TEST(Backoff, JitterStaysWithinTheBandBelowTheCappedValue) {
  BackoffOptions o = NoJitter();
  o.jitter = 0.2;
  o.seed = 42;
  Backoff b(o);
  Nanos d = o.initial;
  int below = 0;
  for (int i = 0; i < 200; ++i) {
    const Nanos got = b.Next();
    EXPECT_LE(got, d) << "attempt " << i + 1;
    EXPECT_GE(got, d - d / 5) << "attempt " << i + 1;
    if (got < d) ++below;
    d = std::min(d * 2, o.max);
  }
  // The jitter is really applied (a draw of exactly 0 every time would mean none).
  EXPECT_GT(below, 190);
}

TEST(Backoff, SameSeedSameDelaysOtherSeedOtherDelays) {
  BackoffOptions o = NoJitter();
  o.jitter = 0.5;
  auto run = [&](uint64_t seed) {
    o.seed = seed;
    Backoff b(o);
    std::vector<Nanos> d;
    for (int i = 0; i < 20; ++i) d.push_back(b.Next());
    return d;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Backoff, BadOptionsAreClampedAndTheCapHoldsForever) {
  BackoffOptions o;
  o.initial = Millis(500);
  o.max = Millis(100);    // below initial: the cap becomes initial
  o.multiplier = 0.5;     // below 1: constant delays
  o.jitter = 3;           // above 1: clamped to 1
  Backoff b(o);
  EXPECT_EQ(b.options().max, Millis(500));
  EXPECT_EQ(b.options().multiplier, 1.0);
  EXPECT_EQ(b.options().jitter, 1.0);
  for (int i = 0; i < 10; ++i) {
    const Nanos d = b.Next();
    EXPECT_GE(d, 0);
    EXPECT_LE(d, Millis(500));
  }
  // A long outage: thousands of attempts never overflow past the cap.
  BackoffOptions big = NoJitter();
  big.max = Seconds(3600);
  big.multiplier = 10;
  Backoff c(big);
  Nanos last = 0;
  for (int i = 0; i < 5000; ++i) last = c.Next();
  EXPECT_EQ(last, Seconds(3600));
}

}  // namespace
}  // namespace superserve
