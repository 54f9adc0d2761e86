#include "libengine/model/embedding.h"

#include "libengine/model/param_scope.h"

namespace zinf::model {

Embedding::Embedding(ParamTable& table, std::int64_t vocab, std::int64_t max_positions, std::int64_t channels) {
  wte_ = table.add({.name = "wte",
                    .shape = Shape{vocab, channels},
                    .group = 0,
                    .init = ParamInit::kNormal,
                    .init_std = 0.02f,
                    .weight_decay = true});
  wpe_ = table.add({.name = "wpe",
                    .shape = Shape{max_positions, channels},
                    .group = 0,
                    .init = ParamInit::kNormal,
                    .init_std = 0.02f,
                    .weight_decay = true});
}

Status Embedding::forward(device::Ops& ops, ParamSource& params, Tensor out,
                          std::span<const std::int32_t> tokens) const {
  ZINF_ASSIGN_OR_RETURN(ScopedParam wte, ScopedParam::acquire(params, wte_));
  ZINF_ASSIGN_OR_RETURN(ScopedParam wpe, ScopedParam::acquire(params, wpe_));
  ops.embedding_forward(out, tokens, wte.tensor(), wpe.tensor());
  return Status::ok();
}

Status Embedding::backward(device::Ops& ops, GradSink& grads, Tensor dout, std::span<const std::int32_t> tokens) const {
  ZINF_ASSIGN_OR_RETURN(Tensor dwte, grads.grad_buffer(wte_));
  ZINF_ASSIGN_OR_RETURN(Tensor dwpe, grads.grad_buffer(wpe_));
  ops.embedding_backward(dwte, dwpe, dout, tokens);
  ZINF_RETURN_IF_ERROR(grads.commit(wpe_));
  return grads.commit(wte_);
}

}  // namespace zinf::model
