#ifndef SUPERSERVE_COMMON_INIT_H_
#define SUPERSERVE_COMMON_INIT_H_

#include <string>
#include <vector>

namespace superserve {

// Every binary's first call. Sets the usage text, answers --help / -h (prints
// the usage and this project's flags, exits 0; --helpfull: every flag,
// Abseil's own included), parses Abseil flags (a bad flag prints the error
// and exits 2), applies --cpus (CPU affinity; a bad list exits 2) and
// returns the positional arguments (argv[0] first).
std::vector<std::string> InitMain(int argc, char** argv, const std::string& usage);

// One group of flags that --help shows, in the order given.
struct HelpSection {
  std::string title;
  std::vector<std::string> flags;  // names without dashes
};

// For a binary with many tuning flags (the router, the worker): --help prints
// the usage and these sections only, what a new user sets, then one line
// pointing to --helpfull for the rest (policy tuning, limits, timeouts).
// --helpfull then lists every flag (Abseil's format, by file).
// Call before InitMain. A name no flag has makes --help fail (exit 1), so a
// renamed flag cannot drop out of the help unnoticed.
void SetHelpSections(std::vector<HelpSection> sections);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_INIT_H_
