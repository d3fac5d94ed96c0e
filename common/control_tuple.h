#ifndef SUPERSERVE_COMMON_CONTROL_TUPLE_H_
#define SUPERSERVE_COMMON_CONTROL_TUPLE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace superserve {

namespace v1 {
class ControlTuple;
}

// Which subnet of a supernet to actuate. subnet_id indexes the SubnetNorm
// statistics (a "slot"); the vectors say which layers/channels are active.
// Plain data so that policies can carry it without protobuf or torch.
struct ControlTuple {
  int32_t subnet_id = -1;
  std::vector<int32_t> depths;           // extra depth per stage
  std::vector<float> expand_ratios;      // per block
  std::vector<float> width_multipliers;  // per stage
  std::vector<int32_t> kernel_sizes;     // per block, families with elastic kernels
  // Early-exit models: the exit confidence threshold, (0, 1]; 0 = the
  // model's own.
  float exit_threshold = 0;

  bool operator==(const ControlTuple& o) const {
    return subnet_id == o.subnet_id && depths == o.depths && expand_ratios == o.expand_ratios &&
           width_multipliers == o.width_multipliers && kernel_sizes == o.kernel_sizes &&
           exit_threshold == o.exit_threshold;
  }
  bool operator!=(const ControlTuple& o) const { return !(*this == o); }

  // e.g. "subnet 3 d=[0,1,2,0] e=[0.2,...] w=[0.65,...]".
  std::string DebugString() const;
};

ControlTuple ControlTupleFromProto(const v1::ControlTuple& p);
void ControlTupleToProto(const ControlTuple& c, v1::ControlTuple* p);

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_CONTROL_TUPLE_H_
