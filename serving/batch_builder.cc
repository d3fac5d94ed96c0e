// BuildBatch: a taken batch as sent and as kept in flight (batch_builder.h).
#include "serving/batch_builder.h"

#include <algorithm>

namespace superserve {

BuiltBatch BuildBatch(const ServedModel& m, const TakenBatch& taken, uint64_t batch_id, Nanos now,
                      Nanos grace, PendingQueries* pending) {
  BuiltBatch built;
  BatchPlan& plan = built.plan;
  plan.batch_id = batch_id;
  plan.worker = taken.worker;
  plan.model = *m.name;
  plan.subnet_index = taken.subnet_index;
  if (taken.subnet_index >= 0) {  // -1: a dynamic model, no subnet to pick
    const SubnetProfile& subnet = m.profile.subnets[taken.subnet_index];
    plan.subnet_id = subnet.id;
    plan.control = subnet.control;
  }
  plan.exit_threshold_index = taken.exit_threshold_index;
  plan.exit_threshold = taken.exit_threshold_index >= 0
                            ? m.profile.dynamic.thresholds[taken.exit_threshold_index].threshold
                            : 0;
  plan.control.exit_threshold = static_cast<float>(plan.exit_threshold);
  plan.batch_size = taken.batch_size;
  plan.sent_at = now;
  plan.earliest = taken.earliest;
  plan.latest = taken.latest;
  InflightBatch& inflight = built.inflight;
  inflight.id = plan.batch_id;
  inflight.model = m.id;
  inflight.subnet_index = taken.subnet_index;
  inflight.exit_threshold_index = taken.exit_threshold_index;
  inflight.batch_size = taken.batch_size;
  inflight.sent_at = now;
  Nanos latest_deadline = now;
  plan.queries.reserve(taken.queries.size());
  plan.inputs.reserve(taken.queries.size());
  for (const Query& q : taken.queries) {
    auto it = pending->find(q.id);
    if (it == pending->end()) continue;
    it->second.dispatched_at = now;
    it->second.on_worker = true;
    plan.queries.push_back(q.id);
    plan.inputs.push_back(it->second.input);
    latest_deadline = std::max(latest_deadline, q.deadline);
  }
  if (plan.queries.empty()) return built;
  inflight.deadline = SaturatingAdd(latest_deadline, grace);
  inflight.queries = plan.queries;
  return built;
}

}  // namespace superserve
