#ifndef SUPERSERVE_COMMON_PROGRESS_H_
#define SUPERSERVE_COMMON_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "common/time.h"

namespace superserve {

// Wall seconds elapsed on the steady clock since `start`: the progress lines
// and reports of long offline jobs (training, search, profiling).
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Progress of a long job on stderr: a redrawn bar with rate and ETA when
// stderr is a terminal, otherwise one plain line every `plain_interval_s`
// (CI logs stay readable). Not thread-safe; call from one thread.
class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, double plain_interval_s = 5.0);
  ~ProgressBar();

  void Set(int64_t done, const std::string& note = "");
  void Add(int64_t n = 1, const std::string& note = "") { Set(done_ + n, note); }
  void Finish(const std::string& note = "");

 private:
  void Draw(bool force);

  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  std::string note_;
  bool tty_;
  bool finished_ = false;
  double plain_interval_s_;
  Nanos start_;
  Nanos last_draw_ = 0;
};

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_PROGRESS_H_
