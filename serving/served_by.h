// What an answer says served its query: the subnet (its id and profiled
// accuracy), or for an early-exit model the batch's exit threshold, the
// exit the query left at and that exit's profiled accuracy.
#ifndef SUPERSERVE_SERVING_SERVED_BY_H_
#define SUPERSERVE_SERVING_SERVED_BY_H_

#include <cstdint>
#include <string_view>

#include "common/model_profile.h"
#include "serving/query_handle.h"

namespace superserve {

// Sets a's subnet_id and accuracy, and for a dynamic model its
// exit_threshold and exit, for a batch run at `subnet_index` (-1: a dynamic
// model) and `threshold_index` (-1: the model's default threshold), the
// query of `application` having left at `exit` (-1: not reported, as
// emulated workers do: the application's expected accuracy at that
// threshold).
void DescribeServed(const ModelProfile& profile, int32_t subnet_index, int32_t threshold_index,
                    std::string_view application, int32_t exit, QueryAnswer* a);

}  // namespace superserve

#endif  // SUPERSERVE_SERVING_SERVED_BY_H_
