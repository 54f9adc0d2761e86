// Model FLOPs: 2 per multiply-accumulate of every matmul the GPT model runs, per block and for the
// head — the figure behind the train record's TFLOP/s and MFU (Gpt::flops_per_step) and the
// planner's compute time (planner/engine_model). Pure arithmetic on a ModelShape; thread-safe.
#pragma once

#include <cstdint>

#include "libengine/spec/model_shape.h"

namespace zinf::sizing {

// FLOPs of one forward pass of `batch` × `seq` tokens.
struct ForwardFlops {
  double block = 0;      // one block: the q|k|v projection C·Q, the attention output A·C, the MLP's
                         // two (three when gated) C·F per token, and causal attention
  double attention = 0;  // of block: QKᵀ and PV, B·T²·A together (the causal mask halves them)
  double head = 0;       // the head V·C per token
};
ForwardFlops forward_flops(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq);

// Model FLOPs of one step: forward + backward (= 2× forward), no recompute — the convention MFU is
// quoted in.
double model_flops_per_step(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq);

// FLOPs the step executes: the model's, plus with activation checkpointing the recompute of every
// block but the last (the model keeps the last block's activations from the forward pass and never
// recomputes the head).
double executed_flops_per_step(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq, bool checkpointing);

}  // namespace zinf::sizing
