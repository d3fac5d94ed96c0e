#ifndef SUPERSERVE_COMMON_DASHED_FLAGS_H_
#define SUPERSERVE_COMMON_DASHED_FLAGS_H_

#include <string>
#include <vector>

namespace superserve {

// Lets users spell Abseil flags with dashes ("--model-repo DIR") as well as
// underscores ("--model_repo=DIR"): rewrites the name part of every "--a-b"
// argument in place, up to "=" or a lone "--". InitMain calls it, so every
// binary accepts both spellings.
void AcceptDashedFlagNames(int argc, char** argv);

// Lets a list flag be repeated (--fail_worker_at 12 --fail_worker_at 24) as
// well as comma-separated: Abseil keeps only the last occurrence, so all
// occurrences are folded into one "--name=a,b" argument. Rewrites *argc and
// *argv to point into `storage` (which must outlive flag parsing). Call after
// AcceptDashedFlagNames and before InitMain.
void MergeRepeatedListFlag(const char* name, int* argc, char*** argv,
                           std::vector<std::string>* storage);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_DASHED_FLAGS_H_
