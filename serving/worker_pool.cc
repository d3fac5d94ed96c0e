// WorkerPool: the workers' records and liveness (worker_pool.h).
#include "serving/worker_pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace superserve {

int32_t WorkerPool::Add(const std::string& requested_name, bool emulated,
                        std::vector<std::string> models, std::shared_ptr<WorkerChannel> channel,
                        Nanos now) {
  int32_t id = static_cast<int32_t>(workers_.size());
  if (!recycled_.empty()) {
    id = recycled_.back();
    recycled_.pop_back();
  }
  WorkerRecord w;
  w.id = id;
  w.name = std::make_shared<const std::string>(requested_name.empty()
                                                   ? absl::StrCat("worker-", id)
                                                   : absl::StrCat(requested_name, "#", id));
  w.emulated = emulated;
  w.declared_models = std::move(models);
  w.channel = std::move(channel);
  w.last_heard = now;
  w.busy_since = now;
  if (id < static_cast<int32_t>(workers_.size())) {
    workers_[id] = std::move(w);
  } else {
    workers_.push_back(std::move(w));
  }
  ++alive_;
  RefreshFree(id);
  return id;
}

WorkerRecord* WorkerPool::Get(int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(workers_.size())) return nullptr;
  return &workers_[id];
}

const WorkerRecord* WorkerPool::Get(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(workers_.size())) return nullptr;
  return &workers_[id];
}

WorkerRecord* WorkerPool::GetAlive(int32_t id) {
  WorkerRecord* w = Get(id);
  return w != nullptr && w->alive ? w : nullptr;
}

void WorkerPool::Heard(int32_t id, Nanos now) {
  if (WorkerRecord* w = GetAlive(id)) w->last_heard = now;
}

void WorkerPool::RecordSpeed(int32_t id, Nanos measured, Nanos profiled) {
  WorkerRecord* w = GetAlive(id);
  if (w == nullptr) return;
  w->speed.Record(measured, profiled);
  if (++speed_records_ % kSpeedRefreshEvery != 0 && w->speed.samples() > 4) return;
  speed_scratch_.clear();
  for (const WorkerRecord& r : workers_) {
    if (r.alive && r.speed.samples() >= 4) speed_scratch_.push_back(r.speed.factor());
  }
  const double fleet = LowerMedian(speed_scratch_);
  for (WorkerRecord& r : workers_) {
    if (r.alive) r.relative_speed = RelativeSpeed(r.speed.factor(), fleet);
  }
}

std::vector<WorkerPool::WorkerGauges> WorkerPool::TakeGauges(Nanos now, Nanos window) {
  std::vector<WorkerGauges> out;
  for (WorkerRecord& w : workers_) {
    if (!w.alive || now - w.busy_since < window) continue;
    out.push_back({w.name,
                   std::min(1.0, static_cast<double>(w.busy) /
                                     static_cast<double>(now - w.busy_since)),
                   w.relative_speed});
    w.busy = 0;
    w.busy_since = now;
  }
  return out;
}

int32_t WorkerPool::FreeSlots(int32_t id, int32_t lookahead) const {
  const WorkerRecord& w = workers_[id];
  if (!w.alive || w.registering) return 0;
  return std::max<int32_t>(0, lookahead - static_cast<int32_t>(w.inflight.size()));
}

void WorkerPool::SetRegistering(int32_t id, bool registering) {
  WorkerRecord* w = Get(id);
  if (w == nullptr) return;
  w->registering = registering;
  RefreshFree(id);
}

void WorkerPool::AddInflight(int32_t id, InflightBatch batch) {
  const uint64_t batch_id = batch.id;
  if (!batch.queries.empty()) ++answering_[batch.model];
  workers_[id].inflight.emplace(batch_id, std::move(batch));
  RefreshFree(id);
}

void WorkerPool::Answered(const InflightBatch& b) {
  if (b.queries.empty()) return;
  auto it = answering_.find(b.model);
  if (it != answering_.end() && --it->second <= 0) answering_.erase(it);
}

int32_t WorkerPool::AnsweringBatches(ModelId model) const {
  auto it = answering_.find(model);
  return it == answering_.end() ? 0 : it->second;
}

std::vector<QueryId> WorkerPool::TakeQueriesOf(ModelId model) {
  std::vector<QueryId> out;
  for (WorkerRecord& w : workers_) {
    for (auto& [batch_id, b] : w.inflight) {
      if (b.model != model) continue;
      out.insert(out.end(), b.queries.begin(), b.queries.end());
      b.queries.clear();
    }
  }
  answering_.erase(model);
  return out;
}

std::optional<InflightBatch> WorkerPool::TakeInflight(int32_t id, uint64_t batch_id) {
  WorkerRecord* w = GetAlive(id);
  if (w == nullptr) return std::nullopt;
  auto it = w->inflight.find(batch_id);
  if (it == w->inflight.end()) return std::nullopt;
  InflightBatch b = std::move(it->second);
  w->inflight.erase(it);
  Answered(b);
  RefreshFree(id);
  return b;
}

std::vector<InflightBatch> WorkerPool::MarkDead(int32_t id) {
  std::vector<InflightBatch> out;
  WorkerRecord* w = GetAlive(id);
  if (w == nullptr) return out;
  w->alive = false;
  --alive_;
  for (auto& [batch_id, b] : w->inflight) {
    Answered(b);
    out.push_back(std::move(b));
  }
  w->inflight.clear();
  RefreshFree(id);
  RecycleIfDone(id);
  return out;
}

void WorkerPool::Release(int32_t id) {
  WorkerRecord* w = Get(id);
  if (w == nullptr || w->released) return;
  w->released = true;
  RecycleIfDone(id);
}

void WorkerPool::RecycleIfDone(int32_t id) {
  const WorkerRecord& w = workers_[id];
  if (w.alive || !w.released) return;
  recycled_.push_back(id);
}

std::vector<int32_t> WorkerPool::Silent(Nanos now, Nanos silent_limit) const {
  std::vector<int32_t> out;
  for (const WorkerRecord& w : workers_) {
    if (w.alive && now - w.last_heard > silent_limit) out.push_back(w.id);
  }
  return out;
}

Nanos WorkerPool::NextDeadline(Nanos silent_limit) const {
  Nanos next = std::numeric_limits<Nanos>::max();
  for (const WorkerRecord& w : workers_) {
    if (!w.alive) continue;
    if (silent_limit > 0) next = std::min(next, w.last_heard + silent_limit + 1);
    for (const auto& [batch_id, b] : w.inflight) next = std::min(next, b.deadline + 1);
  }
  return next;
}

std::vector<int32_t> WorkerPool::Overdue(Nanos now) const {
  std::vector<int32_t> out;
  for (const WorkerRecord& w : workers_) {
    if (!w.alive) continue;
    for (const auto& [batch_id, b] : w.inflight) {
      if (now > b.deadline) {
        out.push_back(w.id);
        break;
      }
    }
  }
  return out;
}

}  // namespace superserve
