#include "policies/dominant_subnet.h"

#include <cstddef>

namespace superserve {

int DominantSubnet(const ModelProfile& profile) {
  const int n = static_cast<int>(profile.subnets.size());
  if (n == 0) return -1;
  // The candidate: the most accurate subnet, the fastest of equals at
  // batch 1 (a dominant one must be both).
  int best = 0;
  for (int i = 1; i < n; ++i) {
    const SubnetProfile& s = profile.subnets[i];
    const SubnetProfile& b = profile.subnets[best];
    if (s.accuracy > b.accuracy ||
        (s.accuracy == b.accuracy && !s.latency.empty() && !b.latency.empty() &&
         s.latency[0] < b.latency[0])) {
      best = i;
    }
  }
  const SubnetProfile& d = profile.subnets[best];
  for (int i = 0; i < n; ++i) {
    const SubnetProfile& s = profile.subnets[i];
    if (s.latency.size() != d.latency.size()) return -1;
    for (size_t k = 0; k < s.latency.size(); ++k) {
      if (s.latency[k] < d.latency[k]) return -1;
    }
  }
  return best;
}

}  // namespace superserve
