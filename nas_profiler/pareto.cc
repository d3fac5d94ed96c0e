#include "nas_profiler/pareto.h"

#include <algorithm>
#include <cmath>

namespace superserve::nas {

std::vector<CandidatePoint> ParetoFrontier(std::vector<CandidatePoint> points) {
  // Sort by latency, then by accuracy descending, then key: a sweep keeps a
  // point iff its accuracy beats everything faster (or equally fast) before it.
  std::sort(points.begin(), points.end(), [](const CandidatePoint& a, const CandidatePoint& b) {
    if (a.latency_us != b.latency_us) return a.latency_us < b.latency_us;
    if (a.accuracy != b.accuracy) return a.accuracy > b.accuracy;
    return a.key < b.key;
  });
  std::vector<CandidatePoint> frontier;
  double best = -INFINITY;
  for (const auto& p : points) {
    if (p.accuracy > best) {
      frontier.push_back(p);
      best = p.accuracy;
    }
  }
  return frontier;
}

std::vector<CandidatePoint> ThinFrontier(const std::vector<CandidatePoint>& frontier,
                                         size_t max_points) {
  if (frontier.size() <= max_points || max_points < 2) return frontier;
  std::vector<CandidatePoint> out;
  const double lo = frontier.front().latency_us, hi = frontier.back().latency_us;
  size_t next = 0;
  for (size_t k = 0; k < max_points; ++k) {
    double target = lo + (hi - lo) * static_cast<double>(k) / (max_points - 1);
    // Closest remaining point at or after `next` to the target latency.
    size_t best = next;
    for (size_t i = next; i < frontier.size(); ++i) {
      if (std::abs(frontier[i].latency_us - target) < std::abs(frontier[best].latency_us - target)) {
        best = i;
      }
      if (frontier[i].latency_us > target) break;
    }
    // Leave enough points for the remaining targets.
    best = std::min(best, frontier.size() - (max_points - k));
    out.push_back(frontier[best]);
    next = best + 1;
  }
  return out;
}

}  // namespace superserve::nas
