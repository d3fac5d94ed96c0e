#ifndef SUPERSERVE_NAS_PROFILER_PARETO_H_
#define SUPERSERVE_NAS_PROFILER_PARETO_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace superserve::nas {

// One measured candidate subnet.
struct CandidatePoint {
  int64_t key = 0;        // caller's handle (index into its candidate list)
  double accuracy = 0;    // higher is better
  double latency_us = 0;  // lower is better
};

// The accuracy-latency Pareto frontier: the candidates no other candidate
// dominates (another with latency <= and accuracy >=, one of them strictly).
// Returned sorted by latency ascending, so accuracy is strictly increasing
// along it. Exact duplicates (same latency and accuracy) keep the lowest key.
std::vector<CandidatePoint> ParetoFrontier(std::vector<CandidatePoint> points);

// Thins a frontier to at most `max_points`, always keeping both ends and
// choosing the rest evenly spaced in latency (so the scheduler's latency
// buckets stay evenly populated).
std::vector<CandidatePoint> ThinFrontier(const std::vector<CandidatePoint>& frontier,
                                         size_t max_points);

}  // namespace superserve::nas

#endif  // SUPERSERVE_NAS_PROFILER_PARETO_H_
