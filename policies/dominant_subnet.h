#ifndef SUPERSERVE_POLICIES_DOMINANT_SUBNET_H_
#define SUPERSERVE_POLICIES_DOMINANT_SUBNET_H_

#include "common/model_profile.h"

namespace superserve {

// The subnet that leaves no accuracy to trade: at least as accurate as
// every other subnet and no slower at any profiled batch size (a
// single-subnet profile's only subnet). Of several such (equal rows), the
// lowest index. -1 when the profile trades accuracy for latency, i.e. a
// faster choice costs accuracy somewhere. O(S x B).
int DominantSubnet(const ModelProfile& profile);

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_DOMINANT_SUBNET_H_
