#include "bench/harness/answer_ledger.h"

namespace superserve {

uint64_t AnswerLedger::Send(Nanos sent, Nanos slo, Transport transport) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry e;
  e.sent = sent;
  e.slo = slo;
  e.transport = transport;
  entries_.push_back(e);
  return entries_.size() - 1;
}

void AnswerLedger::Answer(uint64_t id, const InferenceClient::Result& result) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= entries_.size()) return;
  Entry& e = entries_[id];
  if (++e.answers > 1) return;
  e.code = result.status.code();
  e.latency = result.latency;
  e.in_slo = result.status.ok() && result.latency <= e.slo;
  if (result.status.ok()) e.accuracy = result.response.served_by().accuracy();
  if (++terminal_ == static_cast<int64_t>(entries_.size())) cv_.notify_all();
}

bool AnswerLedger::WaitAllAnswered(Nanos timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::nanoseconds(timeout),
                      [&] { return terminal_ == static_cast<int64_t>(entries_.size()); });
}

AnswerLedger::Counts AnswerLedger::Count() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c;
  c.sent = static_cast<int64_t>(entries_.size());
  for (const Entry& e : entries_) {
    if (e.answers == 0) continue;
    ++c.terminal;
    c.duplicated += e.answers - 1;
    c.in_slo += e.in_slo ? 1 : 0;
    c.codes[e.code]++;
  }
  c.lost = c.sent - c.terminal;
  return c;
}

std::vector<AnswerLedger::Entry> AnswerLedger::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::vector<Entry>(entries_.begin(), entries_.end());
}

}  // namespace superserve
