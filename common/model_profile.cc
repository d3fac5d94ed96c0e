#include "common/model_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/small_file.h"
#include "common/tensor_codec.h"
#include "google/protobuf/util/json_util.h"
#include "superserve/v1/profile.pb.h"

namespace superserve {
namespace {

// A profiled latency in nanoseconds, rounded to the nearest one (Micros()
// truncates, and 514.883 us * 1000 is 514882.99.. in binary, so a profile lost
// a nanosecond per save and load). Callers check the range first; this
// clamps only so that an out-of-range value compares as out of range without
// an undefined float-to-integer conversion.
Nanos LatencyNanos(double us) {
  const double ns = std::round(us * kNanosPerMicro);
  if (!(ns < 9.2e18)) return std::numeric_limits<Nanos>::max();
  if (!(ns > -9.2e18)) return std::numeric_limits<Nanos>::min();
  return static_cast<Nanos>(ns);
}

std::string Where(const v1::ModelProfile& p) {
  return absl::StrCat("profile \"", p.model(), "\": ");
}

std::string SubnetWhere(const v1::ModelProfile& p, int index) {
  return absl::StrCat(Where(p), "subnet id=", p.subnets(index).id(), " (index ", index, "): ");
}

absl::Status ValidateHistogram(const v1::ApplicationHistogram& h, const std::string& where);

absl::Status ValidateHistogram(const v1::ModelProfile& p, int index) {
  const auto& h = p.dynamic().applications(index);
  return ValidateHistogram(
      h, absl::StrCat(Where(p), "dynamic.applications[", index, "] \"", h.application(), "\": "));
}

absl::Status ValidateHistogram(const v1::ApplicationHistogram& h, const std::string& where) {
  if (h.application().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "field application is empty"));
  }
  if (h.counts_size() == 0 || h.bin_edges_us_size() != h.counts_size() + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "field bin_edges_us has ", h.bin_edges_us_size(), " entries; counts has ",
        h.counts_size(), " (need counts >= 1 and bin_edges_us = counts + 1)"));
  }
  for (int i = 0; i < h.bin_edges_us_size(); ++i) {
    double e = h.bin_edges_us(i);
    if (!std::isfinite(e) || e < 0 || (i > 0 && e <= h.bin_edges_us(i - 1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "field bin_edges_us[", i, "] = ", e, " must be finite, >= 0 and increasing"));
    }
  }
  double sum = 0;
  for (int i = 0; i < h.counts_size(); ++i) {
    double c = h.counts(i);
    if (!std::isfinite(c) || c < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "field counts[", i, "] = ", c, " must be finite and >= 0"));
    }
    sum += c;
  }
  if (sum <= 0) return absl::InvalidArgumentError(absl::StrCat(where, "field counts sums to 0"));
  if (h.has_accuracy() &&
      (!std::isfinite(h.accuracy()) || h.accuracy() < 0 || h.accuracy() > 100)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "field accuracy = ", h.accuracy(), " must be a top-1 accuracy in [0, 100] percent"));
  }
  return absl::OkStatus();
}

// dynamic.default_threshold and dynamic.thresholds (see model_profile.h).
// `exits` as ValidateExitAccuracy's.
absl::Status ValidateExitAccuracy(const google::protobuf::RepeatedField<double>& acc,
                                  const std::string& field, int* exits);

absl::Status ValidateThresholds(const v1::ModelProfile& p, double max_batch, int* exits) {
  const auto& d = p.dynamic();
  const double dt = d.default_threshold();
  if (d.thresholds_size() == 0) {
    if (dt != 0 && !(dt > 0 && dt <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(p), "field dynamic.default_threshold = ", dt, " must be 0 or in (0, 1]"));
    }
    return absl::OkStatus();
  }
  bool found = false;
  for (int t = 0; t < d.thresholds_size(); ++t) {
    const auto& th = d.thresholds(t);
    const std::string where = absl::StrCat(Where(p), "dynamic.thresholds[", t, "]: ");
    if (!(th.threshold() > 0 && th.threshold() <= 1) ||
        (t > 0 && !(th.threshold() > d.thresholds(t - 1).threshold()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "field threshold = ", th.threshold(), " must be in (0, 1] and increasing"));
    }
    if (!std::isfinite(th.accuracy()) || th.accuracy() < 0 || th.accuracy() > 100) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "field accuracy = ", th.accuracy(), " must be a top-1 accuracy in [0, 100] percent"));
    }
    if (th.threshold() == dt) found = true;
    if (th.applications_size() != d.applications_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "has ", th.applications_size(), " applications where dynamic.applications has ",
          d.applications_size(), " (the same, in the same order)"));
    }
    for (int i = 0; i < th.applications_size(); ++i) {
      const auto& h = th.applications(i);
      const std::string hw = absl::StrCat(where, "applications[", i, "] \"", h.application(), "\": ");
      if (h.application() != d.applications(i).application()) {
        return absl::InvalidArgumentError(absl::StrCat(
            hw, "field application differs from dynamic.applications[", i, "] \"",
            d.applications(i).application(), "\" (the same, in the same order)"));
      }
      if (auto st = ValidateHistogram(h, hw); !st.ok()) return st;
      const double slowest = d.batch_overhead_us() + d.per_request_factor() * max_batch *
                                                         h.bin_edges_us(h.bin_edges_us_size() - 1);
      if (!(slowest <= static_cast<double>(kMaxQueryTimeout / kNanosPerMicro))) {
        return absl::InvalidArgumentError(
            absl::StrCat(hw, "a batch at its largest bin edge would take more than a day"));
      }
      if (auto st = ValidateExitAccuracy(h.exit_accuracy(), absl::StrCat(hw, "field exit_accuracy"),
                                         exits);
          !st.ok()) {
        return st;
      }
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(p), "field dynamic.default_threshold = ", dt,
                     " is none of dynamic.thresholds (it names the one `applications` describes)"));
  }
  return absl::OkStatus();
}

// `field` names the list in errors; `exits` is the length every list given
// must share (0 until the first non-empty one sets it).
absl::Status ValidateExitAccuracy(const google::protobuf::RepeatedField<double>& acc,
                                  const std::string& field, int* exits) {
  if (acc.empty()) return absl::OkStatus();
  for (int i = 0; i < acc.size(); ++i) {
    if (!std::isfinite(acc[i]) || acc[i] < 0 || acc[i] > 100) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "] = ", acc[i], " must be a top-1 accuracy in [0, 100] percent"));
    }
  }
  if (*exits == 0) *exits = acc.size();
  if (acc.size() != *exits) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", acc.size(), " entries where another exit_accuracy has ",
                     *exits, " (one per exit)"));
  }
  return absl::OkStatus();
}

// Latencies are held as int64 nanoseconds: at least 1 ns, and at most
// kMaxQueryTimeout (a day), beyond which no query could be served and the
// conversion would overflow.
bool LatencyInRange(double us) {
  return std::isfinite(us) && LatencyNanos(us) >= 1 && LatencyNanos(us) <= kMaxQueryTimeout;
}

std::string LatencyRange() {
  return absl::StrCat("[0.001, ", ToMicros(kMaxQueryTimeout), "] us (1 ns to a day)");
}

// One subnet's latency: a table (latency_us) or the linear form (alpha_us,
// beta_us), exactly one of the two. A table's dips are not errors (FromProto
// raises them).
absl::Status ValidateSubnetLatency(const v1::ModelProfile& p, int s) {
  const auto& sn = p.subnets(s);
  const bool table = sn.latency_us_size() > 0;
  const bool linear = sn.has_alpha_us() || sn.has_beta_us();
  if (table && linear) {
    return absl::InvalidArgumentError(
        absl::StrCat(SubnetWhere(p, s), "gives both latency_us (", sn.latency_us_size(),
                     " entries) and the linear form (alpha_us/beta_us); give one of the two"));
  }
  if (!table && !linear) {
    return absl::InvalidArgumentError(
        absl::StrCat(SubnetWhere(p, s), "gives neither latency_us (one latency per batch size, ",
                     p.batch_sizes_size(), ") nor the linear form (alpha_us and beta_us)"));
  }
  if (linear) {
    if (!sn.has_alpha_us() || !sn.has_beta_us()) {
      return absl::InvalidArgumentError(absl::StrCat(
          SubnetWhere(p, s), "field ", sn.has_alpha_us() ? "beta_us" : "alpha_us",
          " is missing: the linear form latency(b) = alpha_us * b + beta_us needs both (0 is "
          "allowed)"));
    }
    const double a = sn.alpha_us(), b = sn.beta_us();
    if (!std::isfinite(a) || a < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(SubnetWhere(p, s), "field alpha_us = ", a, " must be finite and >= 0"));
    }
    if (!std::isfinite(b) || b < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(SubnetWhere(p, s), "field beta_us = ", b, " must be finite and >= 0"));
    }
    if (!(a + b > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(SubnetWhere(p, s), "fields alpha_us = ", a, " and beta_us = ", b,
                       ": alpha_us + beta_us must be > 0 (a batch of one would take no time)"));
    }
    // Non-decreasing in b, so the smallest and the largest batch bound all.
    for (int i : {0, p.batch_sizes_size() - 1}) {
      const double l = a * p.batch_sizes(i) + b;
      if (!LatencyInRange(l)) {
        return absl::InvalidArgumentError(absl::StrCat(
            SubnetWhere(p, s), "fields alpha_us = ", a, ", beta_us = ", b, " give ", l,
            " us at batch ", p.batch_sizes(i), "; every latency must be in ", LatencyRange()));
      }
    }
    return absl::OkStatus();
  }
  if (sn.latency_us_size() != p.batch_sizes_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(SubnetWhere(p, s), "field latency_us has ", sn.latency_us_size(),
                     " entries; need exactly one per batch size (", p.batch_sizes_size(), ")"));
  }
  for (int b = 0; b < sn.latency_us_size(); ++b) {
    const double l = sn.latency_us(b);
    if (!LatencyInRange(l)) {
      return absl::InvalidArgumentError(absl::StrCat(SubnetWhere(p, s), "field latency_us[", b,
                                                     "] (batch ", p.batch_sizes(b), ") = ", l,
                                                     " must be finite and in ", LatencyRange()));
    }
  }
  return absl::OkStatus();
}

// True when `a` dominates `b`: at least as accurate and at least as fast at
// every batch size, strictly better in one of those.
bool Dominates(const SubnetProfile& a, const SubnetProfile& b) {
  if (a.accuracy < b.accuracy || a.latency.size() != b.latency.size()) return false;
  bool strictly = a.accuracy > b.accuracy;
  for (size_t i = 0; i < a.latency.size(); ++i) {
    if (a.latency[i] > b.latency[i]) return false;
    strictly = strictly || a.latency[i] < b.latency[i];
  }
  return strictly;
}

// Raises every table latency below the previous batch size's to it, with a
// warning each (timing noise in a measured profile).
void RaiseDips(ModelProfile* m) {
  for (SubnetProfile& s : m->subnets) {
    if (s.linear.has_value()) continue;  // alpha >= 0: never dips
    for (size_t b = 1; b < s.latency.size(); ++b) {
      if (s.latency[b] >= s.latency[b - 1]) continue;
      m->warnings.push_back(absl::StrCat(
          "profile \"", m->model, "\": subnet id=", s.id, ": latency_us[", b, "] (batch ",
          m->batch_sizes[b], ") = ", ToMicros(s.latency[b]), " is below batch ",
          m->batch_sizes[b - 1], "'s ", ToMicros(s.latency[b - 1]), "; raised to ",
          ToMicros(s.latency[b - 1]), " (latency must be non-decreasing in batch size)"));
      s.latency[b] = s.latency[b - 1];
    }
  }
}

// Moves dominated subnets from m->subnets to m->left_out, with a warning each naming
// a subnet that dominates it and is kept (dominance is transitive, so one
// always is).
void DropDominated(ModelProfile* m) {
  const size_t n = m->subnets.size();
  if (n < 2) return;
  std::vector<uint8_t> dominated(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n && !dominated[i]; ++j) {
      if (j != i && Dominates(m->subnets[j], m->subnets[i])) dominated[i] = 1;
    }
  }
  if (std::find(dominated.begin(), dominated.end(), 1) == dominated.end()) return;
  std::vector<SubnetProfile> kept;
  for (size_t i = 0; i < n; ++i) {
    (dominated[i] ? m->left_out : kept).push_back(m->subnets[i]);
  }
  // One warning per subnet, or one line for them all when there are many
  // (a measured profile of a hundred subnets may have most dominated).
  constexpr int kOneLineFrom = 4;
  const auto count = std::count(dominated.begin(), dominated.end(), 1);
  std::string all;
  for (size_t i = 0; i < n; ++i) {
    if (!dominated[i]) continue;
    const SubnetProfile& s = m->subnets[i];
    for (const SubnetProfile& k : kept) {
      if (!Dominates(k, s)) continue;
      if (count >= kOneLineFrom) {
        absl::StrAppend(&all, all.empty() ? "" : ", ", s.id, " (by ", k.id, ")");
      } else {
        m->warnings.push_back(absl::StrCat(
            "profile \"", m->model, "\": subnet id=", s.id, " (accuracy ", s.accuracy,
            "%) is dominated by subnet id=", k.id, " (accuracy ", k.accuracy,
            "%, at least as fast at every batch size); left out of the choices"));
      }
      break;
    }
  }
  if (!all.empty()) {
    m->warnings.push_back(absl::StrCat(
        "profile \"", m->model, "\": ", count, " of ", n,
        " subnets are dominated (another at least as accurate and at least as fast at every "
        "batch size) and left out of the choices: ids ", all));
  }
  m->subnets = std::move(kept);
}

}  // namespace

int32_t DynamicModelProfile::default_threshold_index() const {
  for (size_t t = 0; t < thresholds.size(); ++t) {
    if (thresholds[t].threshold == default_threshold) return static_cast<int32_t>(t);
  }
  return -1;
}

const std::vector<ApplicationHistogram>& DynamicModelProfile::ApplicationsAt(int32_t t) const {
  if (t < 0 || static_cast<size_t>(t) >= thresholds.size()) return applications;
  return thresholds[static_cast<size_t>(t)].applications;
}

double DynamicModelProfile::ExpectedAccuracy(std::string_view application, int32_t t) const {
  for (const ApplicationHistogram& a : ApplicationsAt(t)) {
    if (a.application == application && a.accuracy.has_value()) return *a.accuracy;
  }
  if (t < 0) t = default_threshold_index();
  return t >= 0 && static_cast<size_t>(t) < thresholds.size()
             ? thresholds[static_cast<size_t>(t)].accuracy
             : 0;
}

double DynamicModelProfile::ExitAccuracy(std::string_view application, int32_t exit,
                                         int32_t threshold_index) const {
  if (exit < 0) return 0;
  const auto at = [exit](const std::vector<double>& acc) {
    return static_cast<size_t>(exit) < acc.size() ? acc[static_cast<size_t>(exit)] : 0.0;
  };
  if (!application.empty()) {
    for (const ApplicationHistogram& a : ApplicationsAt(threshold_index)) {
      if (a.application == application && !a.exit_accuracy.empty()) return at(a.exit_accuracy);
    }
  }
  return at(exit_accuracy);
}

absl::Status ValidateModelProfile(const v1::ModelProfile& p) {
  if (p.model().empty()) {
    return absl::InvalidArgumentError("profile: field model (the model name) is empty");
  }
  if (p.batch_sizes_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(Where(p), "field batch_sizes is empty"));
  }
  for (int i = 0; i < p.batch_sizes_size(); ++i) {
    int b = p.batch_sizes(i);
    if (b < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(p), "field batch_sizes[", i, "] = ", b, " must be >= 1"));
    }
    if (b > kMaxBatchSize) {
      return absl::InvalidArgumentError(absl::StrCat(Where(p), "field batch_sizes[", i, "] = ", b,
                                                     " exceeds the largest batch, ", kMaxBatchSize));
    }
    if (i > 0 && b <= p.batch_sizes(i - 1)) {
      return absl::InvalidArgumentError(absl::StrCat(Where(p), "field batch_sizes[", i, "] = ", b,
                                                     " is not greater than batch_sizes[", i - 1,
                                                     "] = ", p.batch_sizes(i - 1),
                                                     " (must be strictly increasing)"));
    }
  }
  // A sample no request could carry (the wire's rank limit; past 2^29
  // elements, 2 GiB of float32, beyond the largest gRPC message) is refused
  // here rather than query by query.
  if (p.input_shape_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(Where(p), "field input_shape has ",
                                                   p.input_shape_size(),
                                                   " dimensions; at most ", kMaxRank));
  }
  constexpr int64_t kMaxSampleElements = int64_t{1} << 29;
  int64_t elements = 1;
  for (int i = 0; i < p.input_shape_size(); ++i) {
    if (p.input_shape(i) <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(Where(p), "field input_shape[", i, "] = ",
                                                     p.input_shape(i), " must be > 0"));
    }
    if (p.input_shape(i) > kMaxSampleElements / elements) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(p), "field input_shape: a sample of more than ", kMaxSampleElements,
          " elements (2 GiB of float32) cannot be sent; input_shape[", i, "] = ",
          p.input_shape(i)));
    }
    elements *= p.input_shape(i);
  }
  if (p.num_classes() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(p), "field num_classes = ", p.num_classes(), " must be >= 0"));
  }
  if (p.has_input_normalization()) {
    const auto& n = p.input_normalization();
    if (!std::isfinite(n.mean()) || !std::isfinite(n.std()) || n.std() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(p), "field input_normalization = {mean ", n.mean(), ", std ", n.std(),
          "}: mean must be finite and std finite and > 0"));
    }
  }
  const bool dynamic = p.has_dynamic() && p.dynamic().applications_size() > 0;
  if (p.subnets_size() == 0 && !dynamic) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(p), p.has_dynamic()
                      ? "field dynamic.applications is empty and so is subnets (a dynamic "
                        "model needs >= 1 application histogram, a supernet >= 1 subnet)"
                      : "field subnets is empty (a supernet profile needs >= 1 subnet)"));
  }
  // A model is scheduled either by subnet (supernet policies) or by
  // execution-time distribution (dynamic policies), never both.
  if (p.subnets_size() > 0 && dynamic) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(p), "has both subnets (", p.subnets_size(), ") and dynamic.applications (",
        p.dynamic().applications_size(),
        "): a profile is a supernet's or a dynamic model's, not both"));
  }
  std::unordered_set<int32_t> ids;
  for (int s = 0; s < p.subnets_size(); ++s) {
    const auto& sn = p.subnets(s);
    if (sn.id() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(SubnetWhere(p, s), "field id must be >= 0"));
    }
    if (!ids.insert(sn.id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(SubnetWhere(p, s), "field id is a duplicate (ids must be unique)"));
    }
    if (!std::isfinite(sn.accuracy()) || sn.accuracy() < 0 || sn.accuracy() > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat(SubnetWhere(p, s), "field accuracy = ", sn.accuracy(),
                       " is outside [0, 100] (accuracy is in percent)"));
    }
    if (auto st = ValidateSubnetLatency(p, s); !st.ok()) return st;
  }
  if (p.has_dynamic()) {
    const auto& d = p.dynamic();
    if (!std::isfinite(d.batch_overhead_us()) || d.batch_overhead_us() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(p), "field dynamic.batch_overhead_us = ", d.batch_overhead_us(), " must be >= 0"));
    }
    if (!std::isfinite(d.per_request_factor()) || d.per_request_factor() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(Where(p), "field dynamic.per_request_factor = ",
                                                     d.per_request_factor(), " must be > 0"));
    }
    int exits = 0;
    if (auto st = ValidateExitAccuracy(d.exit_accuracy(),
                                       absl::StrCat(Where(p), "field dynamic.exit_accuracy"), &exits);
        !st.ok()) {
      return st;
    }
    // The dynamic policies plan each batch at a listed size and drop a query
    // that fits none, so a lone query must have a size of its own.
    if (dynamic && p.batch_sizes(0) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(p), "field batch_sizes starts at ", p.batch_sizes(0),
          "; a dynamic model's must start at 1 (a query may have to run alone, and the dynamic "
          "policies plan every batch at a listed size)"));
    }
    // Every batch time must stay within a day, like a subnet's latency, so
    // that it converts to nanoseconds without overflow: the largest batch of
    // the slowest histogram edge, c0 + c1 * k * max(l).
    constexpr double kDayUs = static_cast<double>(kMaxQueryTimeout / kNanosPerMicro);
    if (d.batch_overhead_us() > kDayUs) {
      return absl::InvalidArgumentError(absl::StrCat(Where(p), "field dynamic.batch_overhead_us = ",
                                                     d.batch_overhead_us(), " exceeds a day (",
                                                     kDayUs, " us)"));
    }
    std::unordered_set<std::string> apps;
    for (int i = 0; i < d.applications_size(); ++i) {
      if (auto st = ValidateHistogram(p, i); !st.ok()) return st;
      const auto& h = d.applications(i);
      const double slowest = d.batch_overhead_us() + d.per_request_factor() *
                                                         p.batch_sizes(p.batch_sizes_size() - 1) *
                                                         h.bin_edges_us(h.bin_edges_us_size() - 1);
      if (!(slowest <= kDayUs)) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(p), "dynamic.applications[", i, "] \"", h.application(),
            "\": a batch of ", p.batch_sizes(p.batch_sizes_size() - 1), " at its largest bin edge (",
            h.bin_edges_us(h.bin_edges_us_size() - 1), " us) would take ", slowest,
            " us = batch_overhead_us + per_request_factor * batch * edge, more than a day (",
            kDayUs, " us)"));
      }
      if (auto st = ValidateExitAccuracy(
              d.applications(i).exit_accuracy(),
              absl::StrCat(Where(p), "dynamic.applications[", i, "] \"",
                           d.applications(i).application(), "\": field exit_accuracy"),
              &exits);
          !st.ok()) {
        return st;
      }
      if (!apps.insert(d.applications(i).application()).second) {
        return absl::InvalidArgumentError(absl::StrCat(Where(p), "dynamic.applications[", i,
                                                       "]: field application \"",
                                                       d.applications(i).application(),
                                                       "\" is a duplicate"));
      }
    }
    if (auto st = ValidateThresholds(p, p.batch_sizes_size() > 0
                                             ? p.batch_sizes(p.batch_sizes_size() - 1)
                                             : 1,
                                     &exits);
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

namespace {

// FromProto; `drop_dominated` false for stand-in latencies (they rank nothing).
absl::StatusOr<ModelProfile> Convert(const v1::ModelProfile& p, bool drop_dominated) {
  if (auto st = ValidateModelProfile(p); !st.ok()) return st;
  ModelProfile m;
  m.model = p.model();
  m.family = p.family();
  m.batch_sizes.assign(p.batch_sizes().begin(), p.batch_sizes().end());
  m.input_shape.assign(p.input_shape().begin(), p.input_shape().end());
  m.num_classes = p.num_classes();
  m.measured_on = p.measured_on();
  if (p.memory_bytes() < 0 || !(p.load_ms() >= 0) || p.load_ms() > 86400e3) {
    return absl::InvalidArgumentError(
        absl::StrCat("model \"", p.model(), "\": memory_bytes must be >= 0 and load_ms in [0, ",
                     "86400000]"));
  }
  m.memory_bytes = p.memory_bytes();
  m.load_time = static_cast<Nanos>(p.load_ms() * 1e6);
  if (p.has_input_normalization()) {
    m.input_mean = p.input_normalization().mean();
    m.input_std = p.input_normalization().std();
  }
  m.subnets.reserve(p.subnets_size());
  for (const auto& sn : p.subnets()) {
    SubnetProfile s;
    s.id = sn.id();
    s.accuracy = sn.accuracy();
    s.control = ControlTupleFromProto(sn.control());
    s.macs = sn.macs();
    if (sn.has_alpha_us()) {
      s.linear = LinearLatency{sn.alpha_us(), sn.beta_us()};
      for (int32_t b : p.batch_sizes()) {
        s.latency.push_back(LatencyNanos(sn.alpha_us() * b + sn.beta_us()));
      }
    } else {
      for (double l : sn.latency_us()) s.latency.push_back(LatencyNanos(l));
    }
    m.subnets.push_back(std::move(s));
  }
  RaiseDips(&m);
  if (drop_dominated) DropDominated(&m);
  if (p.has_dynamic()) {
    m.is_dynamic = p.dynamic().applications_size() > 0;
    m.dynamic.batch_overhead_us = p.dynamic().batch_overhead_us();
    m.dynamic.per_request_factor = p.dynamic().per_request_factor();
    m.dynamic.exit_accuracy.assign(p.dynamic().exit_accuracy().begin(),
                                   p.dynamic().exit_accuracy().end());
    const auto histogram = [](const v1::ApplicationHistogram& h) {
      ApplicationHistogram a;
      a.application = h.application();
      a.bin_edges_us.assign(h.bin_edges_us().begin(), h.bin_edges_us().end());
      a.counts.assign(h.counts().begin(), h.counts().end());
      a.exit_accuracy.assign(h.exit_accuracy().begin(), h.exit_accuracy().end());
      if (h.has_accuracy()) a.accuracy = h.accuracy();
      return a;
    };
    for (const auto& h : p.dynamic().applications()) {
      m.dynamic.applications.push_back(histogram(h));
    }
    m.dynamic.default_threshold = p.dynamic().default_threshold();
    for (const auto& th : p.dynamic().thresholds()) {
      ExitThresholdProfile t;
      t.threshold = th.threshold();
      t.accuracy = th.accuracy();
      for (const auto& h : th.applications()) t.applications.push_back(histogram(h));
      m.dynamic.thresholds.push_back(std::move(t));
    }
  }
  return m;
}

}  // namespace

absl::StatusOr<ModelProfile> ModelProfile::FromProto(const v1::ModelProfile& p) {
  return Convert(p, /*drop_dominated=*/true);
}

absl::StatusOr<ModelProfile> ModelProfile::FromJson(std::string_view json) {
  v1::ModelProfile p;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &p, opts);
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile: not a valid ModelProfile JSON: ", st.message().as_string()));
  }
  return FromProto(p);
}

namespace {

// Every subnet of a non-dynamic profile leaves latency_us empty.
bool LatenciesLeftOut(const v1::ModelProfile& p) {
  if (p.subnets_size() == 0 || (p.has_dynamic() && p.dynamic().applications_size() > 0)) {
    return false;
  }
  for (const auto& sn : p.subnets()) {
    if (sn.latency_us_size() != 0 || sn.has_alpha_us() || sn.has_beta_us()) return false;
  }
  return true;
}

}  // namespace

namespace {

// Far above any real profile (the bundled one, 100 subnets: tens of KiB); a
// model repository or package is written by others than the operator.
constexpr size_t kMaxProfileBytes = size_t{64} << 20;

absl::StatusOr<std::string> ReadProfileFile(const std::string& path) {
  auto text = ReadSmallFile(path, kMaxProfileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("profile file ", text.status().message()));
  }
  return text;
}

}  // namespace

absl::StatusOr<ModelProfile> ModelProfile::LoadFileAllowingUnmeasured(const std::string& path) {
  auto text = ReadProfileFile(path);
  if (!text.ok()) return text.status();
  v1::ModelProfile p;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  if (!google::protobuf::util::JsonStringToMessage(*text, &p, opts).ok() ||
      !LatenciesLeftOut(p)) {
    return LoadFile(path);  // the usual rules and messages
  }
  // Every other rule is checked with stand-in latencies, which then go.
  for (auto& sn : *p.mutable_subnets()) {
    for (int b = 0; b < p.batch_sizes_size(); ++b) sn.add_latency_us(1.0 + b);
  }
  auto m = Convert(p, /*drop_dominated=*/false);
  if (!m.ok()) {
    return absl::Status(m.status().code(), absl::StrCat(path, ": ", m.status().message()));
  }
  for (SubnetProfile& s : m->subnets) s.latency.clear();
  m->latencies_measured = false;
  return m;
}

absl::Status ModelProfile::FillLatencies(const std::map<int32_t, std::vector<double>>& latency_us) {
  v1::ModelProfile p;
  ToProto(&p);
  for (auto& sn : *p.mutable_subnets()) {
    auto it = latency_us.find(sn.id());
    if (it == latency_us.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no measured latencies for subnet id ", sn.id()));
    }
    if (it->second.size() != static_cast<size_t>(p.batch_sizes_size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "subnet id ", sn.id(), ": ", it->second.size(), " measured latencies for ",
          p.batch_sizes_size(), " batch sizes"));
    }
    sn.clear_latency_us();
    sn.clear_alpha_us();
    sn.clear_beta_us();
    for (double l : it->second) {
      const int n = sn.latency_us_size();
      if (n > 0 && std::isfinite(l) && l > 0 && l < sn.latency_us(n - 1)) l = sn.latency_us(n - 1);
      sn.add_latency_us(l);
    }
  }
  auto filled = FromProto(p);
  if (!filled.ok()) return filled.status();
  filled->warnings.insert(filled->warnings.begin(), warnings.begin(), warnings.end());
  *this = *std::move(filled);
  return absl::OkStatus();
}

absl::StatusOr<ModelProfile> ModelProfile::LoadFile(const std::string& path) {
  auto text = ReadProfileFile(path);
  if (!text.ok()) return text.status();
  auto m = FromJson(*text);
  if (!m.ok()) {
    return absl::Status(m.status().code(), absl::StrCat(path, ": ", m.status().message()));
  }
  return m;
}

void ModelProfile::ToProto(v1::ModelProfile* p) const {
  p->Clear();
  p->set_model(model);
  p->set_family(family);
  for (auto b : batch_sizes) p->add_batch_sizes(b);
  for (auto d : input_shape) p->add_input_shape(d);
  p->set_num_classes(num_classes);
  p->set_measured_on(measured_on);
  p->set_memory_bytes(memory_bytes);
  p->set_load_ms(static_cast<double>(load_time) / 1e6);
  if (input_mean != 0 || input_std != 1) {
    p->mutable_input_normalization()->set_mean(input_mean);
    p->mutable_input_normalization()->set_std(input_std);
  }
  for (const auto& s : subnets) {
    auto* sp = p->add_subnets();
    sp->set_id(s.id);
    sp->set_accuracy(s.accuracy);
    sp->set_macs(s.macs);
    ControlTupleToProto(s.control, sp->mutable_control());
    if (s.linear.has_value()) {
      sp->set_alpha_us(s.linear->alpha_us);
      sp->set_beta_us(s.linear->beta_us);
    } else {
      for (auto l : s.latency) sp->add_latency_us(ToMicros(l));
    }
  }
  if (is_dynamic || !dynamic.applications.empty()) {
    auto* d = p->mutable_dynamic();
    d->set_batch_overhead_us(dynamic.batch_overhead_us);
    d->set_per_request_factor(dynamic.per_request_factor);
    for (double x : dynamic.exit_accuracy) d->add_exit_accuracy(x);
    const auto histogram = [](const ApplicationHistogram& a, v1::ApplicationHistogram* h) {
      h->set_application(a.application);
      for (double e : a.bin_edges_us) h->add_bin_edges_us(e);
      for (double c : a.counts) h->add_counts(c);
      for (double x : a.exit_accuracy) h->add_exit_accuracy(x);
      if (a.accuracy.has_value()) h->set_accuracy(*a.accuracy);
    };
    for (const auto& a : dynamic.applications) histogram(a, d->add_applications());
    d->set_default_threshold(dynamic.default_threshold);
    for (const auto& t : dynamic.thresholds) {
      auto* th = d->add_thresholds();
      th->set_threshold(t.threshold);
      th->set_accuracy(t.accuracy);
      for (const auto& a : t.applications) histogram(a, th->add_applications());
    }
  }
}

std::string ModelProfile::ToJson() const {
  v1::ModelProfile p;
  ToProto(&p);
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(p, &out, opts);
  return out;
}

absl::Status ModelProfile::SaveFile(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write profile ", path));
  out << ToJson();
  if (!out) return absl::DataLossError(absl::StrCat("short write to profile ", path));
  return absl::OkStatus();
}

int ModelProfile::BatchIndex(int32_t batch) const {
  const auto it = std::lower_bound(batch_sizes.begin(), batch_sizes.end(), batch);
  return it != batch_sizes.end() && *it == batch ? static_cast<int>(it - batch_sizes.begin()) : -1;
}

int ModelProfile::PaddedBatchIndex(int64_t n) const {
  if (batch_sizes.empty() || n > batch_sizes.back()) return -1;
  if (n <= 1) return 0;
  return static_cast<int>(
      std::lower_bound(batch_sizes.begin(), batch_sizes.end(), static_cast<int32_t>(n)) -
      batch_sizes.begin());
}

int ModelProfile::SubnetIndex(int32_t id) const {
  for (size_t i = 0; i < subnets.size(); ++i) {
    if (subnets[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

std::vector<SubnetProfile> ModelProfile::EverySubnet() const {
  if (left_out.empty()) return subnets;
  std::vector<SubnetProfile> every = subnets;
  every.insert(every.end(), left_out.begin(), left_out.end());
  std::stable_sort(every.begin(), every.end(),
                   [](const SubnetProfile& a, const SubnetProfile& b) { return a.id < b.id; });
  return every;
}

}  // namespace superserve
