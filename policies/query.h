#ifndef SUPERSERVE_POLICIES_QUERY_H_
#define SUPERSERVE_POLICIES_QUERY_H_

#include <cstdint>

#include "common/time.h"

namespace superserve {

using QueryId = uint64_t;

// A pending query as the scheduler sees it. The payload stays with whoever
// owns the bytes (the router's RPC state, or nothing in the simulator); the
// scheduler only needs times and tags.
struct Query {
  QueryId id = 0;
  int32_t application = 0;  // index into the router's application table
  Nanos arrival = 0;        // router clock
  Nanos deadline = 0;       // absolute, router clock
};

}  // namespace superserve

#endif  // SUPERSERVE_POLICIES_QUERY_H_
