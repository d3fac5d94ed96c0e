#ifndef SUPERSERVE_ROUTER_QUERY_RESPONDER_H_
#define SUPERSERVE_ROUTER_QUERY_RESPONDER_H_

#include "absl/status/status.h"
#include "superserve/v1/inference.pb.h"

namespace superserve {

// The answering end of one client query. The gRPC Infer handler implements it
// over its reactor; unit tests implement it in memory. The request and the
// response live until Answer; the Dispatcher calls Answer exactly once.
class QueryResponder {
 public:
  virtual ~QueryResponder() = default;
  virtual const v1::InferRequest& request() const = 0;
  virtual v1::InferResponse* response() = 0;
  virtual void Answer(const absl::Status& status) = 0;

  // Set by the Dispatcher (under its lock) when it accepts the query; lets a
  // cancelled call find its queue entry. 0 = not accepted.
  uint64_t query_id = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_QUERY_RESPONDER_H_
