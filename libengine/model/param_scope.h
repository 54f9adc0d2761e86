// ScopedParam: one parameter acquired from a ParamSource for the length of a scope, released when
// the scope ends (also on an early error return), so every module follows acquire → use → release
// without bookkeeping of its own. Move-only; not thread-safe (the model's thread owns it).
#pragma once

#include <utility>

#include "libengine/core/status.h"
#include "libengine/model/param_source.h"

namespace zinf::model {

class ScopedParam {
 public:
  // Acquires `id` from `source`; on failure nothing is held and the source's Status is returned.
  static Result<ScopedParam> acquire(ParamSource& source, ParamId id) {
    ZINF_ASSIGN_OR_RETURN(Tensor tensor, source.acquire(id));
    return ScopedParam(source, id, tensor);
  }
  ScopedParam(ScopedParam&& other) noexcept
      : source_(std::exchange(other.source_, nullptr)), id_(other.id_), tensor_(other.tensor_) {}
  ScopedParam& operator=(ScopedParam&&) = delete;
  ScopedParam(const ScopedParam&) = delete;
  ScopedParam& operator=(const ScopedParam&) = delete;
  ~ScopedParam() {
    if (source_ != nullptr) source_->release(id_);
  }

  // The view the source handed out (compute dtype); valid while this object lives.
  const Tensor& tensor() const { return tensor_; }

 private:
  ScopedParam(ParamSource& source, ParamId id, Tensor tensor) : source_(&source), id_(id), tensor_(tensor) {}
  ParamSource* source_;
  ParamId id_;
  Tensor tensor_;
};

}  // namespace zinf::model
