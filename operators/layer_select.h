#ifndef SUPERSERVE_OPERATORS_LAYER_SELECT_H_
#define SUPERSERVE_OPERATORS_LAYER_SELECT_H_

// LayerSelect (SuperServe §3): wraps the block at position `index` of a stage.
// Given the stage's active depth it runs the block (index < depth) or passes
// the input through unchanged, so subnets of different depth share layers.

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <utility>

#include "operators/subnet_ops.h"

namespace superserve::ops {

// Block: a torch::nn::ModuleHolder whose forward(x, args...) returns a Tensor.
template <typename Block>
class LayerSelectImpl : public torch::nn::Module {
 public:
  LayerSelectImpl(int64_t index, Block block) : index_(index), block_(std::move(block)) {
    register_module("block", block_.ptr());
  }

  bool IsActive(int64_t active_depth) const { return LayerSelectActive(index_, active_depth); }

  template <typename... Args>
  torch::Tensor forward(const torch::Tensor& x, int64_t active_depth, Args&&... args) {
    return IsActive(active_depth) ? block_->forward(x, std::forward<Args>(args)...) : x;
  }

  int64_t index() const { return index_; }
  Block& block() { return block_; }
  const Block& block() const { return block_; }

 private:
  int64_t index_;
  Block block_;
};

template <typename Block>
std::shared_ptr<LayerSelectImpl<Block>> MakeLayerSelect(int64_t index, Block block) {
  return std::make_shared<LayerSelectImpl<Block>>(index, std::move(block));
}

}  // namespace superserve::ops

#endif  // SUPERSERVE_OPERATORS_LAYER_SELECT_H_
