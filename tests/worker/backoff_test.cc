#include "worker/backoff.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// A worker that cannot reach its router: which failed attempts it logs, on
// a simulated timeline (each attempt takes `attempt` plus its backoff delay).
struct Logged {
  std::vector<int64_t> attempts;
  Nanos longest_silence = 0;  // between two logged lines
};
Logged Simulate(Nanos attempt, Nanos cap, Nanos span) {
  BackoffOptions o;
  o.max = cap;
  Backoff backoff(o);
  ReconnectLogSchedule schedule(Seconds(30));
  Logged out;
  Nanos now = 0, last = 0;
  for (int64_t n = 1; now < span; ++n) {
    now += attempt;
    if (schedule.Due(n, now, "connection failed")) {
      schedule.Logged(now, "connection failed");
      out.attempts.push_back(n);
      out.longest_silence = std::max(out.longest_silence, now - last);
      last = now;
    }
    now += backoff.Next();
  }
  return out;
}

// It logged attempts 1-3 and every 20th: with 5-s attempt timeouts that was
// minutes of silence, with a 60-s backoff cap twenty minutes.
TEST(ReconnectLogSchedule, FirstAttemptsThenAtLeastEveryIntervalHoweverSlowTheAttempts) {
  for (Nanos attempt : {Nanos{0}, Millis(1), Seconds(5)}) {
    for (Nanos cap : {Seconds(2), Seconds(10)}) {
      const Logged l = Simulate(attempt, cap, Seconds(3600));
      ASSERT_GE(l.attempts.size(), 4u);
      EXPECT_EQ(l.attempts[0], 1);
      EXPECT_EQ(l.attempts[1], 2);
      EXPECT_EQ(l.attempts[2], 3);
      EXPECT_EQ(l.attempts[3], 4);
      // At most the interval plus one attempt and its capped backoff apart.
      EXPECT_LE(l.longest_silence, Seconds(30) + attempt + cap)
          << "attempt " << ToSeconds(attempt) << " s, cap " << ToSeconds(cap) << " s";
      // An hour down is about 120 lines (every 30 s) plus the first ones,
      // not one per attempt (3600 at 1 ms attempts).
      EXPECT_LE(l.attempts.size(), 3600u / 30 + 20) << ToSeconds(attempt);
    }
  }
  // A large cap: each attempt is logged when they are farther apart than the interval.
  const Logged slow = Simulate(Seconds(5), Seconds(60), Seconds(3600));
  EXPECT_LE(slow.longest_silence, Seconds(65));
}

TEST(ReconnectLogSchedule, ANewReasonIsLoggedAtOnceAndRegistrationStartsOver) {
  ReconnectLogSchedule s(Seconds(30));
  for (int64_t n = 1; n <= 3; ++n) s.Logged(Seconds(n), "connection failed");
  EXPECT_FALSE(s.Due(5, Seconds(5), "connection failed"));
  EXPECT_TRUE(s.Due(5, Seconds(5), "connection not established in time"));
  EXPECT_TRUE(s.Due(8, Seconds(8), "connection failed"));  // a power of two
  EXPECT_TRUE(s.Due(9, Seconds(33), "connection failed"));  // the interval passed
  s.Reset();
  EXPECT_TRUE(s.Due(1, Seconds(34), "connection failed"));
}

}  // namespace
}  // namespace superserve
