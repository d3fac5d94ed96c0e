#ifndef SUPERSERVE_NAS_PROFILER_NAS_CONFIGS_H_
#define SUPERSERVE_NAS_PROFILER_NAS_CONFIGS_H_

// Named supernet configurations the NAS profiler trains. Torch-free.
//   fmnist  OfaResNetConfig::FashionMnist(), the bundled default model's family.
//   tiny    a two-stage toy for tests (trains a step in milliseconds).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/ofa_resnet_config.h"

namespace superserve::nas {

absl::StatusOr<models::OfaResNetConfig> NamedConfig(const std::string& name);
std::vector<std::string> ConfigNames();

}  // namespace superserve::nas

#endif  // SUPERSERVE_NAS_PROFILER_NAS_CONFIGS_H_
