#include "libengine/spec/sizing/activation_layout.h"

#include <algorithm>

namespace zinf::sizing {
namespace {

ActivationTensor tensor(std::initializer_list<std::int64_t> dims, bool fp32 = false) {
  ActivationTensor t;
  for (std::int64_t d : dims) t.dims[static_cast<std::size_t>(t.rank++)] = d;
  t.fp32 = fp32;
  return t;
}

ActivationTensor stats(std::int64_t rows) { return tensor({rows}, /*fp32=*/true); }

std::uint64_t sum_bytes(std::initializer_list<const ActivationTensor*> tensors, std::size_t compute_dtype_bytes) {
  std::uint64_t bytes = 0;
  for (const ActivationTensor* t : tensors) bytes += t->carved_bytes(compute_dtype_bytes);
  return bytes;
}

}  // namespace

std::int64_t ActivationTensor::numel() const {
  std::int64_t n = rank > 0 ? 1 : 0;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<std::size_t>(i)];
  return n;
}

std::uint64_t ActivationTensor::carved_bytes(std::size_t compute_dtype_bytes) const {
  const auto bytes = static_cast<std::uint64_t>(numel()) * (fp32 ? 4 : compute_dtype_bytes);
  return (bytes + kCarveAlignBytes - 1) / kCarveAlignBytes * kCarveAlignBytes;
}

std::uint64_t BlockActivationLayout::bytes(std::size_t e) const {
  return sum_bytes(
      {&ln1_out, &ln1_mean, &ln1_rstd, &qkv, &attn, &lse, &mid, &ln2_out, &ln2_mean, &ln2_rstd, &fc, &gate, &act}, e);
}

std::uint64_t BlockScratchLayout::bytes(std::size_t e) const { return sum_bytes({&dln, &dwide, &dmid, &dgate}, e); }

std::int64_t qkv_width(const spec::ModelShape& shape) { return (shape.heads + 2 * shape.kv_heads) * shape.head_dim; }

std::int64_t core_width(const spec::ModelShape& shape) { return shape.heads * shape.head_dim; }

BlockActivationLayout block_activation_layout(const spec::ModelShape& shape, std::int64_t b, std::int64_t t) {
  const std::int64_t c = shape.hidden, f = shape.ffn_hidden, r = b * t;
  const bool layer_norm = shape.norm == spec::NormKind::kLayerNorm;
  BlockActivationLayout a;
  a.ln1_out = tensor({b, t, c});
  if (layer_norm) a.ln1_mean = stats(r);
  a.ln1_rstd = stats(r);
  a.qkv = tensor({b, t, qkv_width(shape)});
  a.attn = tensor({b, t, core_width(shape)});
  a.lse = tensor({b, shape.heads, t}, /*fp32=*/true);
  a.mid = tensor({b, t, c});
  a.ln2_out = tensor({b, t, c});
  if (layer_norm) a.ln2_mean = stats(r);
  a.ln2_rstd = stats(r);
  a.fc = tensor({b, t, f});
  if (shape.mlp == spec::MlpKind::kGated) a.gate = tensor({b, t, f});
  a.act = tensor({b, t, f});
  return a;
}

BlockScratchLayout block_scratch_layout(const spec::ModelShape& shape, std::int64_t b, std::int64_t t) {
  const std::int64_t c = shape.hidden, f = shape.ffn_hidden, r = b * t;
  BlockScratchLayout s;
  s.dln = tensor({b, t, c});
  s.dwide = tensor({r * std::max(qkv_width(shape), f)});
  s.dmid = tensor({r * std::max(core_width(shape), f)});
  if (shape.mlp == spec::MlpKind::kGated) s.dgate = tensor({b, t, f});
  return s;
}

ActivationBytes activation_bytes(const spec::ModelShape& shape, const ActivationRun& run) {
  const std::int64_t b = run.batch, t = run.seq, c = shape.hidden, r = b * t;
  const std::size_t e = run.compute_dtype_bytes;
  ActivationBytes out;
  out.ids = static_cast<std::uint64_t>(2 * r) * sizeof(std::int32_t);
  // The block inputs: L+1 checkpoints of [B,T,C], all on the device or a ring of device slots.
  const std::int64_t checkpoints = shape.layers + 1;
  const bool offloaded = run.offload_checkpoints && run.checkpointing && checkpoints > kCheckpointDeviceSlots;
  const std::uint64_t checkpoint = tensor({b, t, c}).carved_bytes(e);
  const std::int64_t device_slots = offloaded ? kCheckpointDeviceSlots : checkpoints;
  out.block_inputs = static_cast<std::uint64_t>(device_slots) * checkpoint;
  out.host_checkpoints = offloaded ? static_cast<std::uint64_t>(checkpoints - device_slots) * checkpoint : 0;
  const std::int64_t kept = run.checkpointing ? 1 : shape.layers;
  out.blocks = static_cast<std::uint64_t>(kept) * block_activation_layout(shape, b, t).bytes(e);
  const bool layer_norm = shape.norm == spec::NormKind::kLayerNorm;
  out.final_norm = tensor({b, t, c}).carved_bytes(e) + (layer_norm ? 2 : 1) * stats(r).carved_bytes(e);
  if (shape.position == spec::PositionKind::kRotary) {
    const ActivationTensor table = tensor({t, spec::rotary_dim(shape) / 2}, /*fp32=*/true);
    out.rotary = 2 * table.carved_bytes(e) + tensor({t, c}).carved_bytes(e);
  }
  out.logits = tensor({b, t, shape.vocab}).carved_bytes(e);
  out.workspace = tensor({b, t, c}).carved_bytes(e) + block_scratch_layout(shape, b, t).bytes(e);
  return out;
}

std::uint64_t one_block_activation_bytes(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq,
                                         std::size_t compute_dtype_bytes) {
  return block_activation_layout(shape, batch, seq).bytes(compute_dtype_bytes) +
         block_scratch_layout(shape, batch, seq).bytes(compute_dtype_bytes);
}

}  // namespace zinf::sizing
