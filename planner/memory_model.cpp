#include "planner/memory_model.h"

#include <algorithm>

namespace zinf::planner {

double paper_parameter_estimate(std::int64_t layers, std::int64_t hidden) {
  const double hd = static_cast<double>(hidden);
  return 12.0 * static_cast<double>(layers) * hd * hd;
}

double activation_checkpoint_bytes(std::int64_t micro_batch, std::int64_t seq, std::int64_t hidden, std::int64_t layers,
                                   std::int64_t ckpt_interval) {
  const std::int64_t checkpoints = (layers + ckpt_interval - 1) / ckpt_interval;
  return 2.0 * static_cast<double>(micro_batch) * static_cast<double>(seq) * static_cast<double>(hidden) *
         static_cast<double>(checkpoints);
}

double model_state_working_bytes(std::uint64_t largest_operator_params, double param_plus_grad_bytes,
                                 std::int64_t tiling) {
  return param_plus_grad_bytes * static_cast<double>(largest_operator_params) / static_cast<double>(tiling);
}

double activation_working_bytes(std::int64_t micro_batch, std::int64_t seq, std::int64_t ckpt_interval,
                                std::int64_t hidden, std::int64_t heads) {
  const double s = static_cast<double>(seq);
  return static_cast<double>(micro_batch) * s * static_cast<double>(ckpt_interval) *
         (16.0 * static_cast<double>(hidden) + 2.0 * static_cast<double>(heads) * s);
}

double flops_per_gpu_per_step(std::int64_t micro_batch, std::int64_t seq, double params,
                              bool activation_checkpointing) {
  const double passes = activation_checkpointing ? 4.0 : 3.0;  // forward, backward (2), recompute
  return 2.0 * passes * static_cast<double>(micro_batch) * static_cast<double>(seq) * params;
}

ModelMemory model_memory(const spec::ModelShape& shape, const spec::TrainingSpec& training) {
  const spec::ParameterCount count = spec::count_parameters(shape);
  ModelMemory memory;
  memory.params = count.total;
  memory.largest_operator_params = count.largest_operator;
  memory.bytes_per_param = spec::state_bytes_per_param(training.accounting);
  const double params = static_cast<double>(count.total);
  memory.params_bytes = memory.bytes_per_param.params * params;
  memory.grads_bytes = memory.bytes_per_param.grads * params;
  memory.optimizer_bytes = memory.bytes_per_param.optimizer() * params;
  memory.activation_checkpointing = training.activation_checkpointing;
  // Without checkpointing there is nothing to offload: every layer's activations are working memory.
  memory.activation_checkpoint_bytes_per_gpu =
      training.activation_checkpointing ? activation_checkpoint_bytes(training.micro_batch, training.seq, shape.hidden,
                                                                      shape.layers, training.ckpt_interval)
                                        : 0.0;
  memory.model_state_working_bytes_per_gpu = model_state_working_bytes(
      count.largest_operator, memory.bytes_per_param.params + memory.bytes_per_param.grads, training.tiling);
  // A checkpoint interval longer than the model recomputes at most the whole model.
  const std::int64_t recomputed_layers =
      training.activation_checkpointing ? std::min(training.ckpt_interval, shape.layers) : shape.layers;
  memory.activation_working_bytes_per_gpu =
      activation_working_bytes(training.micro_batch, training.seq, recomputed_layers, shape.hidden, shape.heads);
  memory.flops_per_gpu_per_step =
      flops_per_gpu_per_step(training.micro_batch, training.seq, params, training.activation_checkpointing);
  memory.forward_flops_per_gpu = flops_per_gpu_per_step(training.micro_batch, training.seq, params) / 4.0;
  return memory;
}

}  // namespace zinf::planner
