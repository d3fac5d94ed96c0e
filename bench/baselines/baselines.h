#ifndef SUPERSERVE_BENCH_BASELINES_BASELINES_H_
#define SUPERSERVE_BENCH_BASELINES_BASELINES_H_

namespace superserve {

// Registers the paper baselines with RegisterPolicy (policies/policy_factory.h)
// so that MakePolicy and --policy know them by name: slackfit, maxbatch,
// maxacc, infaas, clipper+ (the product's fixed-subnet under the paper's name)
// and, for dynamic models, clockwork and nexus. Explicit, not a static
// initialiser that a static link may drop: every binary that offers the
// baselines calls it in main (superserve-sim, superserve-repro,
// superserve-symphony-repro, superserve-router, superserve-bench, the tests
// and fuzzers that run them). Idempotent and thread-safe.
void RegisterBaselinePolicies();

}  // namespace superserve

#endif  // SUPERSERVE_BENCH_BASELINES_BASELINES_H_
