#include "libengine/model/block.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace zinf::model {
namespace {

std::string block_prefix(std::int64_t index) { return "blocks." + std::to_string(index); }

// GPT-2 scales the init of the projections that write into the residual stream by 1/sqrt(2L)
// (two such projections per block), so the stream's variance does not grow with depth.
float residual_init_std(const spec::ModelShape& shape) {
  return static_cast<float>(0.02 / std::sqrt(2.0 * static_cast<double>(shape.layers)));
}

}  // namespace

Block::Block(ParamTable& table, std::int64_t index, const spec::ModelShape& shape, const spec::OperatorTiling& tiling)
    : ln1_(table, block_prefix(index) + ".ln1", shape.hidden, static_cast<std::int32_t>(index + 1), shape.norm,
           static_cast<float>(shape.norm_eps)),
      attn_(table, block_prefix(index) + ".attn", shape, static_cast<std::int32_t>(index + 1),
            residual_init_std(shape)),
      ln2_(table, block_prefix(index) + ".ln2", shape.hidden, static_cast<std::int32_t>(index + 1), shape.norm,
           static_cast<float>(shape.norm_eps)),
      mlp_(table, block_prefix(index) + ".mlp", shape.hidden, shape.ffn_hidden, shape.mlp_bias,
           static_cast<std::int32_t>(index + 1), residual_init_std(shape), tiling.mlp_fc, tiling.mlp_proj, shape.mlp) {}

BlockActivations Block::carve_activations(TensorCarver& carver, const spec::ModelShape& shape, std::int64_t batch,
                                          std::int64_t seq) {
  // The layout is the sizing module's, so what the planner counts is what is carved here.
  const sizing::BlockActivationLayout l = sizing::block_activation_layout(shape, batch, seq);
  BlockActivations a;
  for (auto [tensor, layout] :
       {std::pair{&a.ln1_out, &l.ln1_out}, std::pair{&a.ln1_mean, &l.ln1_mean}, std::pair{&a.ln1_rstd, &l.ln1_rstd},
        std::pair{&a.qkv, &l.qkv}, std::pair{&a.attn, &l.attn}, std::pair{&a.lse, &l.lse}, std::pair{&a.mid, &l.mid},
        std::pair{&a.ln2_out, &l.ln2_out}, std::pair{&a.ln2_mean, &l.ln2_mean}, std::pair{&a.ln2_rstd, &l.ln2_rstd},
        std::pair{&a.fc, &l.fc}, std::pair{&a.gate, &l.gate}, std::pair{&a.act, &l.act}}) {
    *tensor = carver.take_layout(*layout);
  }
  return a;
}

BlockScratch Block::carve_scratch(TensorCarver& carver, const spec::ModelShape& shape, std::int64_t batch,
                                  std::int64_t seq) {
  const sizing::BlockScratchLayout l = sizing::block_scratch_layout(shape, batch, seq);
  BlockScratch s;
  for (auto [tensor, layout] : {std::pair{&s.dln, &l.dln}, std::pair{&s.dwide, &l.dwide}, std::pair{&s.dmid, &l.dmid},
                                std::pair{&s.dgate, &l.dgate}}) {
    *tensor = carver.take_layout(*layout);
  }
  return s;
}

Status Block::forward(device::Ops& ops, ParamSource& params, Tensor x, const BlockActivations& acts,
                      const BlockScratch& scratch, Tensor out) const {
  ZINF_RETURN_IF_ERROR(ln1_.forward(ops, params, acts.ln1_out, acts.ln1_mean, acts.ln1_rstd, x));
  // The output projection writes into `mid`, then the residual is added in place.
  ZINF_RETURN_IF_ERROR(
      attn_.forward(ops, params, acts.mid, acts.qkv, acts.attn, acts.lse, acts.ln1_out, scratch.attention));
  ops.residual_forward(acts.mid, acts.mid, x);
  ZINF_RETURN_IF_ERROR(ln2_.forward(ops, params, acts.ln2_out, acts.ln2_mean, acts.ln2_rstd, acts.mid));
  ZINF_RETURN_IF_ERROR(mlp_.forward(ops, params, out, acts.fc, acts.gate, acts.act, acts.ln2_out));
  if (out.data() != nullptr) ops.residual_forward(out, out, acts.mid);
  return Status::ok();
}

Status Block::backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor x, const BlockActivations& acts,
                       const BlockScratch& scratch, Tensor dres) const {
  const Shape wide = acts.fc.shape();    // [B,T,F]
  const Shape core = acts.attn.shape();  // [B,T,A]
  const Shape fused = acts.qkv.shape();  // [B,T,Q]
  const auto prefix = [](const Tensor& t, const Shape& shape) {
    return Tensor(t.data(), t.dtype(), shape, t.device());
  };
  // MLP half: out = mid + mlp(ln2(mid)). dres = d(out) is also d(mid) through the residual; the
  // LayerNorm's backward adds the other path on top of it.
  ZINF_RETURN_IF_ERROR(mlp_.backward(ops, params, grads, scratch.dln, dres, acts.ln2_out, acts.fc, acts.gate, acts.act,
                                     prefix(scratch.dwide, wide), scratch.dgate, prefix(scratch.dmid, wide)));
  ZINF_RETURN_IF_ERROR(ln2_.backward(ops, params, grads, dres, scratch.dln, acts.mid, acts.ln2_mean, acts.ln2_rstd));
  // Attention half: mid = x + attn(ln1(x)); the same in-place pattern.
  ZINF_RETURN_IF_ERROR(attn_.backward(ops, params, grads, scratch.dln, dres, acts.ln1_out, acts.qkv, acts.attn,
                                      acts.lse, prefix(scratch.dwide, fused), prefix(scratch.dmid, core),
                                      scratch.attention));
  return ln1_.backward(ops, params, grads, dres, scratch.dln, x, acts.ln1_mean, acts.ln1_rstd);
}

}  // namespace zinf::model
