#include "common/cpu_affinity.h"

#include <sched.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace superserve {
namespace {

std::vector<int> CpusOf(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view spec) {
  std::vector<int> cpus;
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return absl::InvalidArgumentError("empty CPU list");
  }
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(ends[0], &lo) || lo < 0 ||
        !absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &hi) || hi < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad CPU list entry \"", part, "\" (expected N or N-M, N >= 0)"));
    }
    if (hi < lo) {
      return absl::InvalidArgumentError(absl::StrCat("reversed CPU range \"", part, "\""));
    }
    if (hi >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(
          absl::StrCat("CPU ", hi, " is past the largest CPU number (", CPU_SETSIZE - 1, ")"));
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  return CpusOf(set);
}

absl::Status PinProcessToCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("no CPUs to pin to");
  cpu_set_t want, before, got;
  CPU_ZERO(&want);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return absl::InvalidArgumentError(absl::StrCat("bad CPU ", c));
    CPU_SET(c, &want);
  }
  // The kernel drops CPUs that are offline or outside the process's cpuset
  // (and refuses a mask with none left): try this thread first, compare, and
  // undo on a mismatch, so that a typo never half-pins the process.
  CPU_ZERO(&before);
  CPU_ZERO(&got);
  if (sched_getaffinity(0, sizeof(before), &before) != 0) {
    return absl::InternalError(absl::StrCat("sched_getaffinity: ", std::strerror(errno)));
  }
  const std::string requested = absl::StrJoin(cpus, ",");
  if (sched_setaffinity(0, sizeof(want), &want) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU(s) ", requested, " not available to this process (",
                     std::strerror(errno), ")"));
  }
  (void)sched_getaffinity(0, sizeof(got), &got);
  if (!CPU_EQUAL(&got, &want)) {
    (void)sched_setaffinity(0, sizeof(before), &before);
    return absl::InvalidArgumentError(
        absl::StrCat("of CPUs ", requested, " only ", absl::StrJoin(CpusOf(got), ","),
                     " are available to this process"));
  }
  // sched_setaffinity applies to one thread: set it on every thread that
  // exists now (libraries may already have started some); later ones
  // inherit it from their creator.
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    pid_t tid = 0;
    if (!absl::SimpleAtoi(task.path().filename().string(), &tid)) continue;
    if (sched_setaffinity(tid, sizeof(want), &want) != 0 && errno != ESRCH) {
      return absl::InternalError(
          absl::StrCat("sched_setaffinity(thread ", tid, "): ", std::strerror(errno)));
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("/proc/self/task: ", ec.message()));
  return absl::OkStatus();
}

}  // namespace superserve
