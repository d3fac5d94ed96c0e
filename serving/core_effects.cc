// CoreEffects::Carry: the core's decided work carried out, in order
// (core_effects.h).
#include "serving/core_effects.h"

namespace superserve {

void CoreEffects::Carry(ServingObserver* observer) {
  const Rare* r = rare.get();
  if (r != nullptr) {
    // One channel's order: unloads free memory before the load, which the
    // batches of the same effects never need (they hold resident models).
    for (const auto& [channel, model] : r->unloads) channel->Unload(model);
    for (const auto& [channel, model, expected] : r->loads) channel->Load(model, expected);
  }
  for (auto& [channel, plan] : sends) {
    if (observer != nullptr) observer->OnBatchSent(plan);
    channel->Send(std::move(plan));
  }
  for (auto& [handle, answer] : answers) handle->Deliver(std::move(answer));
  if (r != nullptr) {
    for (auto& [channel, why] : r->closes) channel->Close(why);
    for (const Rare::LogEntry& l : r->logs) LogLine(l.level, l.file, l.line).stream() << l.text;
  }
  if (observer != nullptr) {
    for (auto& [model, report] : done) {
      report.model = model.get();
      observer->OnQueryDone(report);
    }
  }
  if (r == nullptr) return;
  if (observer != nullptr) {
    for (const auto& [model, depth] : r->depths) observer->OnQueueDepth(*model, depth);
    for (const auto& [worker, busy] : r->busy) observer->OnWorkerBusyFraction(*worker, busy);
    for (const auto& [worker, slow] : r->slowdown) observer->OnWorkerSlowdown(*worker, slow);
    for (const auto& [model, worker] : r->refused) observer->OnBatchRefused(*model, *worker);
    for (const auto& [model, worker, cold] : r->loaded) {
      observer->OnModelLoaded(*model, *worker, cold);
    }
  }
  // Last: the drained model's answers are delivered and reported.
  for (const auto& on_drained : r->drained) on_drained();
}

}  // namespace superserve
