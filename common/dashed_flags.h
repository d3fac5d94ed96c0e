#ifndef SUPERSERVE_COMMON_DASHED_FLAGS_H_
#define SUPERSERVE_COMMON_DASHED_FLAGS_H_

namespace superserve {

// Lets users spell Abseil flags with dashes ("--model-repo DIR") as well as
// underscores ("--model_repo=DIR"): rewrites the name part of every "--a-b"
// argument in place, up to "=" or a lone "--". Call before InitMain.
void AcceptDashedFlagNames(int argc, char** argv);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_DASHED_FLAGS_H_
