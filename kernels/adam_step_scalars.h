// The per-step scalars of the Adam/AdamW step (kernels/adam.h), shared by the CPU kernel
// (kernels/cpu/adam.cpp) and the CUDA kernel (kernels/cuda/adam.cu) so that both start every
// element from the same fp32 constants: computed once per step in fp64 as PyTorch's Python code
// does, then rounded to fp32 where PyTorch hands them to an fp32 tensor operation. Host code only;
// internal to the kernels (the public contract is kernels/adam.h).
#pragma once

#include <cmath>

#include "kernels/adam.h"

namespace zinf::kernels {

struct AdamStepScalars {
  float grad_scale;
  float weight_decay;  // used by Adam (L2) only
  float decay;         // 1 - lr*wd, used by AdamW only
  bool apply_l2;
  bool apply_decay;
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;
  float eps;
  float neg_step_size;
};

inline AdamStepScalars adam_step_scalars(const AdamHyper& h) {
  const auto step = static_cast<double>(h.step);
  const double bias_correction1 = 1.0 - std::pow(h.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(h.beta2, step);
  AdamStepScalars s{};
  s.grad_scale = static_cast<float>(h.grad_scale);
  s.weight_decay = static_cast<float>(h.weight_decay);
  s.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  s.apply_l2 = !h.decoupled_weight_decay && h.weight_decay != 0.0;
  s.apply_decay = h.decoupled_weight_decay && h.weight_decay != 0.0;
  s.beta1 = static_cast<float>(h.beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - h.beta1);
  s.beta2 = static_cast<float>(h.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - h.beta2);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.eps = static_cast<float>(h.eps);
  s.neg_step_size = static_cast<float>(-(h.lr / bias_correction1));
  return s;
}

}  // namespace zinf::kernels
