// A query's answering end (QueryHandle, answered exactly once) and its
// opaque payload.
#ifndef SUPERSERVE_SERVING_QUERY_HANDLE_H_
#define SUPERSERVE_SERVING_QUERY_HANDLE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/time.h"
#include "policies/query.h"

namespace superserve {

// Bytes that travel with a query: its input on the way to a worker, its
// output on the way back. The serving core never looks inside and never
// copies them; it only hands the pointer on. The router's payloads hold wire
// tensors, the simulator's are empty.
class QueryPayload {
 public:
  virtual ~QueryPayload() = default;
};

// The one terminal answer of an accepted query.
struct QueryAnswer {
  absl::Status status;
  // The rest is set only when status is OK.
  std::shared_ptr<QueryPayload> output;
  int32_t subnet_id = -1;
  // Profiled top-1 accuracy, percent: the subnet's, or for a dynamic model
  // that of the queries that left at the same exit (0 when not profiled).
  double accuracy = 0;
  int32_t exit = -1;  // dynamic models: the 0-based exit the query left at
  // Dynamic models: the exit confidence threshold the batch ran at (0 = the
  // model's default, not stated by its profile).
  double exit_threshold = 0;
  std::shared_ptr<const std::string> worker;
  int32_t batch_size = 0;  // queries in the batch that served it
  Nanos queued = 0;        // arrival to dispatch
  Nanos exec = 0;          // the batch's execution time on its worker
};

// The answering end of one query, implemented by the router over a gRPC call
// and by the simulator in memory.
class QueryHandle {
 public:
  virtual ~QueryHandle() = default;
  // Called exactly once for every query handed to ServingCore::Submit
  // (accepted or not), never while the core holds its lock, on whichever
  // thread produced the answer. The handle may delete itself here.
  virtual void Deliver(QueryAnswer answer) = 0;

  // Written by the core, under its lock, when it accepts the query (0 = not
  // accepted): lets a cancelled call find its queue entry.
  QueryId query_id = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_QUERY_HANDLE_H_
