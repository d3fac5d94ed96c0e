#include "common/init.h"

#include <cstdlib>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/internal/program_name.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/cpu_affinity.h"
#include "common/dashed_flags.h"
#include "common/logging.h"

ABSL_FLAG(std::string, log_level, "info", "Minimum log level: debug, info, warning, error.");
ABSL_FLAG(std::string, cpus, "",
          "Pin this process (all its threads, and the processes it starts) to these CPUs, "
          "e.g. 0 or 0-3,6 (empty = no pinning). On small shared machines pinning the "
          "router to one CPU cuts its added latency (docs/engine.md).");

namespace superserve {

std::vector<std::string> InitMain(int argc, char** argv, const std::string& usage) {
  AcceptDashedFlagNames(argc, argv);
  // Debian's Abseil checks lock-order cycles on every Mutex::Lock (a debug
  // aid that gRPC's internal locks pay for too): 3-9 % of the CPU of the
  // router, the emulated workers and the load generator at high query rates.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(usage);
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-h" || a == "--helpfull" || a == "-help") {
      // FlagsHelp starts with the program's name, which Abseil only learns
      // in ParseCommandLine ("UNKNOWN" before it).
      absl::flags_internal::SetProgramInvocationName(argv[0]);
      // Sources are compiled with __FILE__ rewritten to "superserve/<folder>/..."
      // (see the top-level CMakeLists), so this lists our flags and not
      // Abseil's internal ones.
      absl::flags_internal::FlagsHelp(std::cout, a == "--helpfull" ? "" : "superserve/",
                                      absl::flags_internal::HelpFormat::kHumanReadable, usage);
      std::cout.flush();
      std::exit(0);
    }
  }
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  // SetLogLevel takes an unknown name for "info": a typo'd --log_level=eror
  // then logged everything without a word.
  if (const std::string level = absl::GetFlag(FLAGS_log_level);
      level != "debug" && level != "info" && level != "warning" && level != "warn" &&
      level != "error") {
    std::cerr << "--log_level=" << level << ": expected debug, info, warning or error\n";
    std::exit(2);
  }
  SetLogLevel(absl::GetFlag(FLAGS_log_level));
  if (const std::string spec = absl::GetFlag(FLAGS_cpus); !spec.empty()) {
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(spec);
    absl::Status st = cpus.ok() ? PinProcessToCpus(*cpus) : cpus.status();
    if (!st.ok()) {
      std::cerr << "--cpus=" << spec << ": " << st.message() << "\n";
      std::exit(2);
    }
  }
  return {positional.begin(), positional.end()};
}

}  // namespace superserve
