#ifndef SUPERSERVE_TESTS_POLICIES_POLICY_TEST_UTIL_H_
#define SUPERSERVE_TESTS_POLICIES_POLICY_TEST_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "common/model_profile.h"
#include "policies/edf_queue.h"

namespace superserve::testing {

// A profile built by hand: one subnet per row of latencies in milliseconds
// (one per batch size), accuracy from `accuracies`. Subnet ids are 100 + i.
inline ModelProfile HandProfile(const std::vector<int32_t>& batches,
                                const std::vector<double>& accuracies,
                                const std::vector<std::vector<double>>& latency_ms) {
  ModelProfile p;
  p.model = "hand";
  p.batch_sizes = batches;
  for (size_t i = 0; i < accuracies.size(); ++i) {
    SubnetProfile s;
    s.id = 100 + static_cast<int32_t>(i);
    s.accuracy = accuracies[i];
    for (double ms : latency_ms[i]) s.latency.push_back(Millis(ms));
    p.subnets.push_back(s);
  }
  return p;
}

// Three subnets (70, 75, 80 %), batches 1..8. With K = 4 buckets the width is
// 4.25 ms over [1, 18] ms and the buckets' best tuples are
// (70 %, 8) | (75 %, 8) | (80 %, 4) | (80 %, 8).
inline ModelProfile ThreeSubnetProfile() {
  return HandProfile({1, 2, 4, 8}, {70, 75, 80},
                     {{1, 1.5, 2.5, 4.5}, {2, 3, 5, 9}, {4, 6, 10, 18}});
}

// Model "m": two subnets with control tuples, ids 10 (70 %, 1/1.5/2 ms) and
// 11 (80 %, 2/3/4 ms) at batches 1/2/4, input shape {2}, 3 classes. The
// profile of the serving core's rule tests and the router's dispatcher tests.
inline ModelProfile TwoSubnetProfile() {
  ModelProfile p;
  p.model = "m";
  p.batch_sizes = {1, 2, 4};
  p.input_shape = {2};
  p.num_classes = 3;
  const double acc[] = {70, 80};
  const double lat_ms[2][3] = {{1, 1.5, 2}, {2, 3, 4}};
  for (int i = 0; i < 2; ++i) {
    SubnetProfile s;
    s.id = 10 + i;
    s.accuracy = acc[i];
    s.control.subnet_id = 10 + i;
    s.control.depths = {i};
    for (double l : lat_ms[i]) s.latency.push_back(Millis(l));
    p.subnets.push_back(s);
  }
  return p;
}

// One application of DynamicProfile: execution times uniform on [lo, hi).
struct App {
  std::string name;
  double lo_us, hi_us;
};

// A dynamic profile: a batch of k takes c0 + c1 * k * max(l); each
// application uniform on [lo, hi) in one bin, equal counts.
inline ModelProfile DynamicProfile(double c0_us, double c1, std::vector<int32_t> batches,
                                   std::vector<App> apps) {
  ModelProfile p;
  p.model = "dyn";
  p.batch_sizes = std::move(batches);
  p.is_dynamic = true;
  p.dynamic.batch_overhead_us = c0_us;
  p.dynamic.per_request_factor = c1;
  for (const App& a : apps) p.dynamic.applications.push_back({a.name, {a.lo_us, a.hi_us}, {100}});
  return p;
}

// Queue of n queries, all with deadline `deadline` (ids 1..n).
inline void FillQueue(EdfQueue* q, int n, Nanos deadline) {
  for (int i = 1; i <= n; ++i) q->Push({static_cast<QueryId>(i), 0, 0, deadline});
}

}  // namespace superserve::testing

#endif  // SUPERSERVE_TESTS_POLICIES_POLICY_TEST_UTIL_H_
