// Memory model: how many bytes each kind of training state takes, following the ZeRO-Infinity
// paper (Rajbhandari et al., SC21, §3), with exact parameter counts for real shapes.
//
// The paper's formulas are exposed one by one (so tests can check them against hand-computed
// values); ModelMemory applies them to a shape and a training setup. Where the bytes go — which
// tier, per GPU or per node — is the placement's business (placement.h), not this file's.
#pragma once

#include <cstdint>

#include "libengine/spec/model_shape.h"
#include "libengine/spec/training_spec.h"

namespace zinf::planner {

// 12·nl·hd²: the paper's parameter estimate for a transformer with nl layers of hidden hd.
double paper_parameter_estimate(std::int64_t layers, std::int64_t hidden);

// 2·bsz·seq·hd·⌈nl/ci⌉ bytes: one half-precision checkpoint of the hidden state every ci layers
// (the paper writes nl/ci; a partial last interval still needs its checkpoint).
double activation_checkpoint_bytes(std::int64_t micro_batch, std::int64_t seq, std::int64_t hidden, std::int64_t layers,
                                   std::int64_t ckpt_interval);

// Model-state working memory: the parameters and gradients of the largest operator, gathered on
// the GPU at once, divided by the tiling factor. With half precision (2+2 bytes) and the MLP's
// 4·hd² parameters this is the paper's 16·hd²/tiling.
double model_state_working_bytes(std::uint64_t largest_operator_params, double param_plus_grad_bytes,
                                 std::int64_t tiling);

// bsz·seq·ci·(16·hd + 2·heads·seq) bytes: activations of the ci layers being recomputed between
// two checkpoints, attention scores included.
double activation_working_bytes(std::int64_t micro_batch, std::int64_t seq, std::int64_t ckpt_interval,
                                std::int64_t hidden, std::int64_t heads);

// 2·4·bsz·seq·params FLOPs per GPU per step: forward (2), backward (4) and the recompute of
// activation checkpointing (2), as in the paper; 2·3·bsz·seq·params without checkpointing.
double flops_per_gpu_per_step(std::int64_t micro_batch, std::int64_t seq, double params,
                              bool activation_checkpointing = true);

// Everything the placement needs to know about one model under one training setup.
struct ModelMemory {
  std::uint64_t params = 0;
  std::uint64_t largest_operator_params = 0;
  spec::StateBytesPerParam bytes_per_param;
  double params_bytes = 0;     // whole model, compute-precision parameters
  double grads_bytes = 0;      // whole model, compute-precision gradients
  double optimizer_bytes = 0;  // whole model, everything the optimizer owns
  double activation_checkpoint_bytes_per_gpu = 0;
  double model_state_working_bytes_per_gpu = 0;
  double activation_working_bytes_per_gpu = 0;  // without checkpointing: every layer's activations
  double flops_per_gpu_per_step = 0;
  double forward_flops_per_gpu = 0;  // 2·bsz·seq·P; the rest of flops_per_gpu_per_step runs in backward
  bool activation_checkpointing = true;
  // Times each parameter is brought to the GPU per step: forward, recompute (with checkpointing), backward.
  double parameter_loads() const { return activation_checkpointing ? 3.0 : 2.0; }
};

// Preconditions: validate(shape) and validate(training) are ok.
ModelMemory model_memory(const spec::ModelShape& shape, const spec::TrainingSpec& training);

}  // namespace zinf::planner
