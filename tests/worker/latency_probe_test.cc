#include "worker/latency_probe.h"

#include <gtest/gtest.h>

#include "worker/emulated_executor.h"

namespace superserve {
namespace {

// An emulated model sleeps its profiled latency: the probe, timing real
// sleeps, can only read at least that much.
TEST(LatencyProbeTest, MeasuresEverySubnetAtEveryBatchSizeInProfileOrder) {
  ModelEntry e;
  e.name = "m";
  e.profile.model = "m";
  e.profile.batch_sizes = {1, 4};
  e.profile.input_shape = {3};
  e.profile.num_classes = 5;
  for (int id : {7, 2}) {
    SubnetProfile s;
    s.id = id;
    s.accuracy = 50;
    s.control.subnet_id = id;  // what the router sends (the profile's control)
    s.latency = {Millis(id), Millis(3 * id)};
    e.profile.subnets.push_back(s);
  }
  EmulatedExecutor ex;
  ASSERT_TRUE(ex.Load(e).ok());
  auto m = MeasureLatencies(&ex, e, /*repeats=*/3);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  for (int id : {7, 2}) {
    ASSERT_EQ(m->count(id), 1u);
    const std::vector<double>& us = m->at(id);
    ASSERT_EQ(us.size(), 2u);
    EXPECT_GE(us[0], 1000.0 * id);
    EXPECT_GE(us[1], 3000.0 * id);
  }
  // A model the executor does not hold: the error names the subnet and batch.
  ModelEntry other = e;
  other.name = "absent";
  auto missing = MeasureLatencies(&ex, other, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("measuring subnet id 7 at batch 1"),
            std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace superserve
