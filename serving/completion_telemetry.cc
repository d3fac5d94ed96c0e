// MakeCompletionTelemetry: what a policy learns from a batch that ran
// (completion_telemetry.h).
#include "serving/completion_telemetry.h"

#include <algorithm>
#include <utility>

namespace superserve {

CompletionTelemetry MakeCompletionTelemetry(int32_t worker, const InflightBatch& b,
                                            BatchOutcome* outcome, double speed, Nanos now,
                                            const PendingQueries& pending) {
  CompletionTelemetry t;
  t.worker = worker;
  t.subnet_index = b.subnet_index;
  t.exit_threshold_index = b.exit_threshold_index;
  t.batch_size = b.batch_size;
  t.exec = static_cast<Nanos>(static_cast<double>(outcome->exec) / speed);
  t.overhead = std::max<Nanos>(0, now - b.sent_at - outcome->exec - outcome->worker_queue);
  t.now = now;
  t.queries = std::move(outcome->query_times);
  for (QueryTelemetry& q : t.queries) {
    auto pit = pending.find(q.id);
    q.application = pit != pending.end() ? pit->second.query.application : -1;
  }
  return t;
}

}  // namespace superserve
