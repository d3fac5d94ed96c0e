#include "common/control_tuple.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "superserve/v1/profile.pb.h"

namespace superserve {

std::string ControlTuple::DebugString() const {
  std::string s = absl::StrCat("subnet ", subnet_id, " d=[", absl::StrJoin(depths, ","), "] e=[",
                               absl::StrJoin(expand_ratios, ","), "] w=[",
                               absl::StrJoin(width_multipliers, ","), "]");
  if (!kernel_sizes.empty()) absl::StrAppend(&s, " k=[", absl::StrJoin(kernel_sizes, ","), "]");
  if (exit_threshold != 0) absl::StrAppend(&s, " exit_threshold=", exit_threshold);
  return s;
}

ControlTuple ControlTupleFromProto(const v1::ControlTuple& p) {
  ControlTuple c;
  c.subnet_id = p.subnet_id();
  c.depths.assign(p.depths().begin(), p.depths().end());
  c.expand_ratios.assign(p.expand_ratios().begin(), p.expand_ratios().end());
  c.width_multipliers.assign(p.width_multipliers().begin(), p.width_multipliers().end());
  c.kernel_sizes.assign(p.kernel_sizes().begin(), p.kernel_sizes().end());
  c.exit_threshold = p.exit_threshold();
  return c;
}

void ControlTupleToProto(const ControlTuple& c, v1::ControlTuple* p) {
  p->Clear();
  p->set_subnet_id(c.subnet_id);
  for (auto d : c.depths) p->add_depths(d);
  for (auto e : c.expand_ratios) p->add_expand_ratios(e);
  for (auto w : c.width_multipliers) p->add_width_multipliers(w);
  for (auto k : c.kernel_sizes) p->add_kernel_sizes(k);
  if (c.exit_threshold != 0) p->set_exit_threshold(c.exit_threshold);
}

}  // namespace superserve
