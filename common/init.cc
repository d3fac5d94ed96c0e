#include "common/init.h"

#include <cstdlib>
#include <iostream>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/internal/program_name.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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
namespace {

std::vector<HelpSection>& HelpSections() {
  static auto* sections = new std::vector<HelpSection>();
  return *sections;
}

// `text` as lines of at most `width` columns, each after `indent`.
void PrintWrapped(std::ostream& out, absl::string_view text, int indent, size_t width) {
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out << std::string(indent, ' ') << line << "\n";
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line.append(word.data(), word.size());
  }
  if (!line.empty()) out << std::string(indent, ' ') << line << "\n";
}

// The short --help of SetHelpSections. Returns the exit code.
int PrintSectionHelp(std::ostream& out, const std::string& usage) {
  out << absl::flags_internal::ShortProgramInvocationName() << ": " << usage << "\n";
  absl::flat_hash_set<absl::string_view> shown;
  for (const HelpSection& section : HelpSections()) {
    out << "\n" << section.title << ":\n";
    for (const std::string& name : section.flags) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (flag == nullptr) {
        std::cerr << "internal error: --help names --" << name << ", which no flag has\n";
        return 1;
      }
      shown.insert(flag->Name());
      std::string def = flag->DefaultValue();
      if (flag->IsOfType<std::string>()) {
        def = absl::StrCat("\"", def, "\"");
      } else if (def.empty()) {
        def = "none";  // an empty list
      }
      out << "  --" << flag->Name() << " (default: " << def << ")\n";
      PrintWrapped(out, flag->Help(), 6, 78);
    }
  }
  int others = 0;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!shown.contains(name) && !flag->IsRetired() &&
        absl::StartsWith(flag->Filename(), "superserve/")) {
      ++others;
    }
  }
  out << "\n"
      << others
      << " more flags (policy tuning, limits, timeouts, testing): --helpfull lists every flag\n";
  return 0;
}

// Flag file names as --help groups and filters them: "superserve/<folder>/
// <file>". The compiler writes that for an absolute source path
// (-fmacro-prefix-map in the top-level CMakeLists), but a Ninja build in a
// folder inside the tree compiles "../common/init.cc", which the map does
// not match: --help then found no flag of ours ("No flags matched").
// Abseil's own files read "./absl/..." or "absl/..." and are left alone.
std::string NormalizeFlagFilename(absl::string_view file) {
  if (!absl::StartsWith(file, "../")) return std::string(file);
  while (absl::ConsumePrefix(&file, "../")) {
  }
  return absl::StrCat("superserve/", file);
}

}  // namespace

void SetHelpSections(std::vector<HelpSection> sections) { HelpSections() = std::move(sections); }

std::vector<std::string> InitMain(int argc, char** argv, const std::string& usage) {
  AcceptDashedFlagNames(argc, argv);
  // Debian's Abseil checks lock-order cycles on every Mutex::Lock (a debug
  // aid that gRPC's internal locks pay for too): 3-9 % of the CPU of the
  // router, the emulated workers and the load generator at high query rates.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.normalize_filename = NormalizeFlagFilename;
  absl::SetFlagsUsageConfig(config);
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-h" || a == "--helpfull" || a == "-help") {
      // FlagsHelp starts with the program's name, which Abseil only learns
      // in ParseCommandLine ("UNKNOWN" before it).
      absl::flags_internal::SetProgramInvocationName(argv[0]);
      if (a != "--helpfull" && !HelpSections().empty()) {
        const int code = PrintSectionHelp(std::cout, usage);
        std::cout.flush();
        std::exit(code);
      }
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
