#ifndef SUPERSERVE_COMMON_PROCESS_CPU_H_
#define SUPERSERVE_COMMON_PROCESS_CPU_H_

#include <sys/types.h>

#include "absl/status/statusor.h"
#include "common/time.h"

namespace superserve {

// The CPU time (user + system, all threads, including threads that have
// exited) that process `pid` has used so far, from the utime and stime fields
// of /proc/<pid>/stat, converted with sysconf(_SC_CLK_TCK): a resolution of
// one clock tick (10 ms on usual kernels), so measure spans of seconds. A pid
// that does not exist (or has been reaped) is a NotFound error; an unreadable
// or malformed stat file is an Internal error that quotes it.
absl::StatusOr<Nanos> ProcessCpuTime(pid_t pid);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_PROCESS_CPU_H_
