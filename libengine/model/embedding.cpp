#include "libengine/model/embedding.h"

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/model/param_scope.h"

namespace zinf::model {

Embedding::Embedding(ParamTable& table, std::int64_t vocab, std::int64_t max_positions, std::int64_t channels,
                     std::int64_t tiles, bool positions)
    : vocab_(vocab), wpe_(kNoPositions) {
  ZINF_CHECK(tiles >= 1 && tiles <= vocab, "Embedding: tiles outside [1, vocab]");
  for (std::int64_t k = 0; k < tiles; ++k) {
    const std::int64_t begin = k * vocab / tiles;
    const std::int64_t end = (k + 1) * vocab / tiles;
    begins_.push_back(begin);
    wte_.push_back(table.add({.name = tiles == 1 ? std::string("wte") : fmt::format("wte.tile{}", k),
                              .shape = Shape{end - begin, channels},
                              .group = 0,
                              .init = ParamInit::kNormal,
                              .init_std = 0.02f,
                              .weight_decay = true}));
  }
  if (!positions) return;
  wpe_ = table.add({.name = "wpe",
                    .shape = Shape{max_positions, channels},
                    .group = 0,
                    .init = ParamInit::kNormal,
                    .init_std = 0.02f,
                    .weight_decay = true});
}

Status Embedding::forward(device::Ops& ops, ParamSource& params, Tensor out, std::span<const std::int32_t> tokens,
                          Tensor zero_positions) const {
  if (!has_positions()) {
    for (std::size_t k = 0; k < wte_.size(); ++k) {
      ZINF_ASSIGN_OR_RETURN(ScopedParam wte, ScopedParam::acquire(params, wte_[k]));
      ops.embedding_forward_rows(out, tokens, wte.tensor(), begins_[k], zero_positions);
    }
    return Status::ok();
  }
  if (wte_.size() == 1) {
    ZINF_ASSIGN_OR_RETURN(ScopedParam wte, ScopedParam::acquire(params, wte_[0]));
    ZINF_ASSIGN_OR_RETURN(ScopedParam wpe, ScopedParam::acquire(params, wpe_));
    ops.embedding_forward(out, tokens, wte.tensor(), wpe.tensor());
    return Status::ok();
  }
  // One tile at a time next to the position table: two parameters held at once, as untiled.
  for (std::size_t k = 0; k < wte_.size(); ++k) {
    ZINF_ASSIGN_OR_RETURN(ScopedParam wte, ScopedParam::acquire(params, wte_[k]));
    ZINF_ASSIGN_OR_RETURN(ScopedParam wpe, ScopedParam::acquire(params, wpe_));
    ops.embedding_forward_rows(out, tokens, wte.tensor(), begins_[k], wpe.tensor());
  }
  return Status::ok();
}

Status Embedding::backward(device::Ops& ops, GradSink& grads, Tensor dout, std::span<const std::int32_t> tokens) const {
  if (!has_positions()) {
    for (std::size_t k = 0; k < wte_.size(); ++k) {
      ZINF_ASSIGN_OR_RETURN(Tensor dwte, grads.grad_buffer(wte_[k]));
      ops.embedding_backward_rows(dwte, begins_[k], Tensor(), dout, tokens, vocab_);
      ZINF_RETURN_IF_ERROR(grads.commit(wte_[k]));
    }
    return Status::ok();
  }
  ZINF_ASSIGN_OR_RETURN(Tensor dwpe, grads.grad_buffer(wpe_));
  if (wte_.size() == 1) {
    ZINF_ASSIGN_OR_RETURN(Tensor dwte, grads.grad_buffer(wte_[0]));
    ops.embedding_backward(dwte, dwpe, dout, tokens);
    ZINF_RETURN_IF_ERROR(grads.commit(wpe_));
    return grads.commit(wte_[0]);
  }
  for (std::size_t k = 0; k < wte_.size(); ++k) {
    ZINF_ASSIGN_OR_RETURN(Tensor dwte, grads.grad_buffer(wte_[k]));
    // The position table's gradient once, with the last tile (every position, in order).
    ops.embedding_backward_rows(dwte, begins_[k], k + 1 == wte_.size() ? dwpe : Tensor(), dout, tokens, vocab_);
    if (k + 1 == wte_.size()) ZINF_RETURN_IF_ERROR(grads.commit(wpe_));
    ZINF_RETURN_IF_ERROR(grads.commit(wte_[k]));
  }
  return Status::ok();
}

}  // namespace zinf::model
