#ifndef SUPERSERVE_COMMON_INIT_H_
#define SUPERSERVE_COMMON_INIT_H_

#include <string>
#include <vector>

namespace superserve {

// Every binary's first call. Sets the usage text, answers --help / -h (prints
// the usage and this project's flags, exits 0), parses Abseil flags (a bad
// flag prints the error and exits 2), applies --cpus (CPU affinity; a bad
// list exits 2) and returns the positional arguments
// (argv[0] first).
std::vector<std::string> InitMain(int argc, char** argv, const std::string& usage);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_INIT_H_
