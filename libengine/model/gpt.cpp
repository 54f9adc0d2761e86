#include "libengine/model/gpt.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "kernels/rope.h"
#include "libengine/core/check.h"
#include "libengine/spec/sizing/activation_layout.h"
#include "libengine/spec/sizing/model_flops.h"

namespace zinf::model {
namespace {

std::vector<Block> make_blocks(ParamTable& table, const GptConfig& config) {
  std::vector<Block> blocks;
  blocks.reserve(static_cast<std::size_t>(config.shape.layers));
  const spec::OperatorTiling tiles = tiles_of(config);
  for (std::int64_t i = 0; i < config.shape.layers; ++i) blocks.emplace_back(table, i, config.shape, tiles);
  return blocks;
}

Status check_ids(std::span<const std::int32_t> ids, std::string_view what, std::int64_t expected, std::int64_t vocab) {
  if (static_cast<std::int64_t>(ids.size()) != expected) {
    return Status::invalid_argument(fmt::format("{}: {} ids given, batch*seq is {}", what, ids.size(), expected));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return Status::invalid_argument(
          fmt::format("{}[{}]: {} is not a token id (allowed: 0..{}, model.vocab - 1)", what, i, ids[i], vocab - 1));
    }
  }
  return Status::ok();
}

}  // namespace

Status validate(const GptConfig& config) {
  const spec::ModelShape& s = config.shape;
  ZINF_RETURN_IF_ERROR(spec::validate(s));
  if (s.norm == spec::NormKind::kLayerNorm && !s.norm_bias) {
    return Status::invalid_argument(
        "model.norm_bias: false is not implemented for layernorm by the model (allowed: true, or norm rmsnorm)");
  }
  // OpenBLAS takes int dimensions; every matrix dimension the model multiplies must fit one.
  constexpr std::int64_t kMaxDim = std::numeric_limits<std::int32_t>::max();
  if (config.batch < 1 || config.batch > kMaxDim) {
    return Status::invalid_argument(fmt::format("batch: {} is not in 1..{}", config.batch, kMaxDim));
  }
  if (config.seq < 1 || config.seq > s.max_positions) {
    return Status::invalid_argument(
        fmt::format("seq: {} is not in 1..{} (model.max_positions)", config.seq, s.max_positions));
  }
  if (config.batch * config.seq > kMaxDim) {
    return Status::invalid_argument(
        fmt::format("batch*seq: {} exceeds {} rows (reduce batch or seq)", config.batch * config.seq, kMaxDim));
  }
  const std::int64_t widest = std::max({s.vocab, s.ffn_hidden, 3 * s.heads * s.head_dim, s.hidden});
  if (widest > kMaxDim) {
    return Status::invalid_argument(fmt::format("model: a matrix dimension of {} exceeds {}", widest, kMaxDim));
  }
  if (config.offload_checkpoints && !config.activation_checkpointing) {
    return Status::invalid_argument(
        "offload_checkpoints: needs activation_checkpointing (only checkpointed block inputs can live in host memory)");
  }
  if (config.operator_tiling) return spec::validate_tiling(*config.operator_tiling, s, "operator_tiling");
  // Every tiled linear needs at least one output feature per tile.
  const std::int64_t max_tiling = spec::max_tiling(s);
  if (config.tiling < 1 || config.tiling > max_tiling) {
    return Status::invalid_argument(
        fmt::format("tiling: {} is not in 1..{} (at most the output features of the smallest tiled linear)",
                    config.tiling, max_tiling));
  }
  return Status::ok();
}

spec::OperatorTiling tiles_of(const GptConfig& config) {
  if (config.operator_tiling) return *config.operator_tiling;
  return spec::OperatorTiling::uniform(config.tiling, config.shape.tied_embeddings);
}

Gpt::Gpt(const GptConfig& config, device::Device& device)
    : config_(config),
      device_(device),
      embedding_(table_, config.shape.vocab, config.shape.max_positions, config.shape.hidden,
                 tiles_of(config).embedding, config.shape.position == spec::PositionKind::kLearned),
      blocks_(make_blocks(table_, config)),
      lnf_(table_, "lnf", config.shape.hidden, static_cast<std::int32_t>(config.shape.layers + 1), config.shape.norm,
           static_cast<float>(config.shape.norm_eps)) {
  const spec::ModelShape& s = config.shape;
  if (s.tied_embeddings) {
    head_ = TiledLinear::shared(embedding_.wte_tiles(), embedding_.tile_begins(), s.hidden, s.vocab);
  } else {
    head_.emplace(table_, "head", s.hidden, s.vocab, /*bias=*/false, static_cast<std::int32_t>(s.layers + 1), 0.02f,
                  tiles_of(config).head);
  }
}

Result<std::unique_ptr<Gpt>> Gpt::create(const GptConfig& config, device::Device& device) {
  ZINF_RETURN_IF_ERROR(validate(config));
  if (!device.ops().supports_compute_dtype(config.compute_dtype)) {
    return Status::invalid_argument(fmt::format("compute_dtype: {} is not supported on {} (allowed there: fp32)",
                                                dtype_name(config.compute_dtype), device.describe()));
  }
  std::unique_ptr<Gpt> gpt(new Gpt(config, device));
  ZINF_RETURN_IF_ERROR(gpt->allocate());
  return gpt;
}

Status Gpt::allocate() {
  const spec::ModelShape& s = config_.shape;
  const std::int64_t b = config_.batch, t = config_.seq, c = s.hidden, r = b * t;
  // Carves `layout` over a fresh device buffer sized by a counting pass of the same layout.
  const auto carve = [&](std::string_view what, const auto& layout) -> Status {
    TensorCarver counter(nullptr, config_.compute_dtype);
    layout(counter);
    ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer buffer, device_.allocate(counter.bytes(), what));
    TensorCarver carver(buffer.data(), config_.compute_dtype, &device_);
    layout(carver);
    activation_bytes_ += counter.bytes();
    buffers_.push_back(std::move(buffer));
    return Status::ok();
  };

  {
    const auto bytes = static_cast<std::size_t>(2 * r) * sizeof(std::int32_t);
    ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer ids, device_.allocate(bytes, "token and target ids"));
    tokens_ = static_cast<std::int32_t*>(ids.data());
    targets_ = tokens_ + r;
    activation_bytes_ += bytes;
    buffers_.push_back(std::move(ids));
  }
  ZINF_ASSIGN_OR_RETURN(checkpoints_, CheckpointStore::create(device_, config_.compute_dtype, {b, t, c}, s.layers + 1,
                                                              config_.offload_checkpoints));
  activation_bytes_ += checkpoints_->device_bytes();
  const std::int64_t kept = config_.activation_checkpointing ? 1 : s.layers;
  acts_.resize(static_cast<std::size_t>(kept));
  for (std::int64_t i = 0; i < kept; ++i) {
    const std::string what = config_.activation_checkpointing ? std::string("activations of the recomputed block")
                                                              : fmt::format("activations of block {}", i);
    ZINF_RETURN_IF_ERROR(carve(what, [&](TensorCarver& carver) {
      acts_[static_cast<std::size_t>(i)] = Block::carve_activations(carver, s, b, t);
    }));
  }
  ZINF_RETURN_IF_ERROR(carve("final layer norm activations", [&](TensorCarver& carver) {
    lnf_out_ = carver.take({b, t, c});
    if (s.norm == spec::NormKind::kLayerNorm) lnf_mean_ = carver.take_f32({r});
    lnf_rstd_ = carver.take_f32({r});
  }));
  if (s.position == spec::PositionKind::kRotary) ZINF_RETURN_IF_ERROR(upload_rotary_tables(carve));
  ZINF_RETURN_IF_ERROR(carve("logits", [&](TensorCarver& carver) { logits_ = carver.take({b, t, s.vocab}); }));
  const AttentionWork rotary = scratch_.attention;  // the tables, if any, set above
  ZINF_RETURN_IF_ERROR(carve("backward workspace", [&](TensorCarver& carver) {
    dres_ = carver.take({b, t, c});
    scratch_ = Block::carve_scratch(carver, s, b, t);
  }));
  scratch_.attention.rope_cos = rotary.rope_cos;
  scratch_.attention.rope_sin = rotary.rope_sin;
  // The planner and the scenario checks count these bytes from the sizing module's layout.
  sizing::ActivationRun run{b, t, config_.activation_checkpointing, config_.offload_checkpoints,
                            dtype_size_bytes(config_.compute_dtype)};
  ZINF_CHECK(activation_bytes_ == sizing::activation_bytes(s, run).device_total(),
             "Gpt: the activation buffers differ from spec/sizing/activation_layout.h");
  return Status::ok();
}

template <typename Carve>
Status Gpt::upload_rotary_tables(const Carve& carve) {
  const spec::ModelShape& s = config_.shape;
  const std::int64_t t = config_.seq, c = s.hidden, half = spec::rotary_dim(s) / 2;
  ZINF_RETURN_IF_ERROR(carve("rotary tables and zero positions", [&](TensorCarver& carver) {
    scratch_.attention.rope_cos = carver.take_f32({t, half});
    scratch_.attention.rope_sin = carver.take_f32({t, half});
    zero_positions_ = carver.take({t, c});
  }));
  const spec::RopeSettings& r = s.rope;
  kernels::RopeFrequencies frequencies;
  frequencies.rotary_dim = static_cast<std::size_t>(2 * half);
  frequencies.theta = r.theta;
  frequencies.scaling = r.scaling == spec::RopeScalingKind::kLinear   ? kernels::RopeScaling::kLinear
                        : r.scaling == spec::RopeScalingKind::kLlama3 ? kernels::RopeScaling::kLlama3
                                                                      : kernels::RopeScaling::kDefault;
  frequencies.factor = r.factor;
  frequencies.low_freq_factor = r.low_freq_factor;
  frequencies.high_freq_factor = r.high_freq_factor;
  frequencies.original_max_position_embeddings = r.original_max_positions;
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  kernels::rope_inv_freq(inv_freq.data(), frequencies);
  std::vector<float> cos(static_cast<std::size_t>(t * half)), sin(cos.size());
  kernels::rope_tables(cos.data(), sin.data(), inv_freq.data(), static_cast<std::size_t>(half),
                       static_cast<std::size_t>(t));
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  device_.copy(scratch_.attention.rope_cos.data(), cos.data(), cos.size() * sizeof(float),
               device::CopyKind::kHostToDevice, compute);
  device_.copy(scratch_.attention.rope_sin.data(), sin.data(), sin.size() * sizeof(float),
               device::CopyKind::kHostToDevice, compute);
  device_.ops().zero(zero_positions_);
  // The host tables go out of scope here: the copies must have read them.
  return compute.synchronize();
}

const BlockActivations& Gpt::activations_of(std::int64_t block) const {
  return acts_[config_.activation_checkpointing ? 0 : static_cast<std::size_t>(block)];
}

Status Gpt::upload(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets) {
  const std::int64_t r = config_.batch * config_.seq;
  ZINF_RETURN_IF_ERROR(check_ids(tokens, "tokens", r, config_.shape.vocab));
  ZINF_RETURN_IF_ERROR(check_ids(targets, "targets", r, config_.shape.vocab));
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  device_.copy(tokens_, tokens.data(), tokens.size_bytes(), device::CopyKind::kHostToDevice, compute);
  device_.copy(targets_, targets.data(), targets.size_bytes(), device::CopyKind::kHostToDevice, compute);
  return Status::ok();
}

Status Gpt::run_forward(ParamSource& params, bool for_backward) {
  const device::ProfilerRange range(device_, "forward");
  params.begin_phase(Phase::kForward);
  device::Ops& ops = device_.ops();
  CheckpointStore& store = *checkpoints_;
  const auto r = static_cast<std::size_t>(config_.batch * config_.seq);
  store.before_write(0);
  ZINF_RETURN_IF_ERROR(embedding_.forward(ops, params, store.at(0), {tokens_, r}, zero_positions_));
  store.written(0, for_backward);
  const auto layers = static_cast<std::int64_t>(blocks_.size());
  for (std::int64_t i = 0; i < layers; ++i) {
    store.before_write(i + 1);
    ZINF_RETURN_IF_ERROR(blocks_[static_cast<std::size_t>(i)].forward(ops, params, store.at(i), activations_of(i),
                                                                      scratch_, store.at(i + 1)));
    store.written(i + 1, for_backward);
  }
  ZINF_RETURN_IF_ERROR(lnf_.forward(ops, params, lnf_out_, lnf_mean_, lnf_rstd_, store.at(layers)));
  return head_->forward(ops, params, logits_, lnf_out_);
}

Result<double> Gpt::forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                            ParamSource& params) {
  ZINF_RETURN_IF_ERROR(upload(tokens, targets));
  ZINF_RETURN_IF_ERROR(run_forward(params, /*for_backward=*/false));
  const auto r = static_cast<std::size_t>(config_.batch * config_.seq);
  return device_.ops().cross_entropy_forward(logits_, {targets_, r});
}

Result<double> Gpt::forward_backward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                                     ParamSource& params, GradSink& grads, float loss_scale) {
  ZINF_RETURN_IF_ERROR(upload(tokens, targets));
  ZINF_RETURN_IF_ERROR(run_forward(params, /*for_backward=*/true));
  device::Ops& ops = device_.ops();
  const auto r = static_cast<std::size_t>(config_.batch * config_.seq);
  const std::span<const std::int32_t> targets_on_device(targets_, r);
  // The loss and its gradient in one pass (the backend may compute each row's softmax once); the
  // gradient replaces the logits in place: no second [B,T,V] buffer.
  const double loss = ops.cross_entropy_forward_backward(logits_, logits_, targets_on_device, loss_scale);
  const device::ProfilerRange range(device_, "backward");
  params.begin_phase(Phase::kBackward);

  // Head, then the final LayerNorm: its input gradient starts the residual stream's (dres = 0 +).
  ZINF_RETURN_IF_ERROR(
      head_->backward(ops, params, grads, scratch_.dln, device::GradMode::kOverwrite, logits_, lnf_out_));
  ops.zero(dres_);
  CheckpointStore& store = *checkpoints_;
  const auto layers = static_cast<std::int64_t>(blocks_.size());
  ZINF_RETURN_IF_ERROR(lnf_.backward(ops, params, grads, dres_, scratch_.dln, store.at(layers), lnf_mean_, lnf_rstd_));
  store.released(layers);

  for (std::int64_t i = layers - 1; i >= 0; --i) {
    const auto index = static_cast<std::size_t>(i);
    const BlockActivations& acts = activations_of(i);
    store.before_read(i);
    // With checkpointing the shared buffer still holds the last block's activations from the
    // forward pass; every earlier block is recomputed from its saved input (output not needed).
    if (config_.activation_checkpointing && i != layers - 1) {
      ZINF_RETURN_IF_ERROR(blocks_[index].forward(ops, params, store.at(i), acts, scratch_, Tensor()));
    }
    ZINF_RETURN_IF_ERROR(blocks_[index].backward(ops, params, grads, store.at(i), acts, scratch_, dres_));
    store.released(i);
  }
  ZINF_RETURN_IF_ERROR(embedding_.backward(ops, grads, dres_, {tokens_, r}));
  return loss;
}

double Gpt::flops_per_step() const { return sizing::model_flops_per_step(config_.shape, config_.batch, config_.seq); }

}  // namespace zinf::model
