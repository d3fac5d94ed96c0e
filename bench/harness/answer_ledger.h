#ifndef SUPERSERVE_BENCH_HARNESS_ANSWER_LEDGER_H_
#define SUPERSERVE_BENCH_HARNESS_ANSWER_LEDGER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "common/time.h"
#include "router/client/inference_client.h"

namespace superserve {

// The client's side of the exactly-once count: every query sent gets an id
// here, and every answer (callback) is booked against it. A query with no
// answer is lost; every answer after a query's first is a duplicate.
class AnswerLedger {
 public:
  struct Entry {
    Nanos sent = 0;  // since the run's start
    Nanos slo = 0;
    Transport transport = Transport::kUnary;
    int answers = 0;
    // From the first answer:
    absl::StatusCode code = absl::StatusCode::kUnknown;
    Nanos latency = 0;
    bool in_slo = false;  // OK within the SLO
    double accuracy = 0;  // profiled accuracy of the serving subnet, percent
  };
  struct Counts {
    int64_t sent = 0;
    int64_t terminal = 0;    // queries with at least one answer
    int64_t lost = 0;        // sent - terminal
    int64_t duplicated = 0;  // answers beyond each query's first
    int64_t in_slo = 0;
    std::map<absl::StatusCode, int64_t> codes;  // first answers by status
    double slo_attainment() const { return sent > 0 ? double(in_slo) / double(sent) : 0; }
  };

  // Books a query about to be sent; returns its id for Answer.
  uint64_t Send(Nanos sent, Nanos slo, Transport transport);
  // Books one answer (any number may come; the first one counts).
  void Answer(uint64_t id, const InferenceClient::Result& result);
  // Waits until every query sent has an answer, at most `timeout`.
  bool WaitAllAnswered(Nanos timeout);

  Counts Count() const;
  std::vector<Entry> Entries() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> entries_;  // by id (stable references)
  int64_t terminal_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_HARNESS_ANSWER_LEDGER_H_
