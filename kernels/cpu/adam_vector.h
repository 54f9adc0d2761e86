// The Adam/AdamW step of one vector variant (adam.cpp has the formulas and the rounding rules):
// included inside each ISA namespace of adam.cpp, after that ISA's primitives (Vec, kWidth, set1,
// load, store, add, mul, div, sqrt, fmadd, load_bf16, load_f16, store_bf16, store_f16) and under its
// target pragma. No include guard: it is meant to be included once per ISA namespace.

struct Consts {
  Vec grad_scale, weight_decay, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps,
      neg_step_size;
};

[[gnu::always_inline]] inline Consts consts(const StepScalars& s) {
  return {set1(s.grad_scale),      set1(s.weight_decay),          set1(s.decay),
          set1(s.beta1),           set1(s.one_minus_beta1),       set1(s.beta2),
          set1(s.one_minus_beta2), set1(s.bias_correction2_sqrt), set1(s.eps),
          set1(s.neg_step_size)};
}

// One vector of kWidth elements.
template <GradKind G, OutKind O>
[[gnu::always_inline]] inline void adam_block(const StepScalars& s, const Consts& c, float* param, float* exp_avg,
                                              float* exp_avg_sq, const GradT<G>* grad, std::uint16_t* param_half) {
  Vec g;
  if constexpr (G == GradKind::kF32) {
    g = load(grad);
  } else if constexpr (G == GradKind::kBF16) {
    g = load_bf16(grad);
  } else {
    g = load_f16(grad);
  }
  g = mul(g, c.grad_scale);
  Vec p = load(param);
  if (s.apply_l2) g = fmadd(p, c.weight_decay, g);
  if (s.apply_decay) p = mul(p, c.decay);
  const Vec m = fmadd(g, c.one_minus_beta1, mul(load(exp_avg), c.beta1));
  const Vec v = add(mul(load(exp_avg_sq), c.beta2), mul(mul(c.one_minus_beta2, g), g));
  const Vec denom = add(div(sqrt(v), c.bias_correction2_sqrt), c.eps);
  p = add(p, div(mul(c.neg_step_size, m), denom));
  store(param, p);
  store(exp_avg, m);
  store(exp_avg_sq, v);
  if constexpr (O == OutKind::kBF16) store_bf16(param_half, p);
  if constexpr (O == OutKind::kF16) store_f16(param_half, p);
}

// n elements: whole vectors, then a tail through the same vector code on zero-padded stack copies.
template <GradKind G, OutKind O>
void adam_run(const StepScalars& s, float* param, float* exp_avg, float* exp_avg_sq, const void* grad_bytes,
              std::uint16_t* param_half, std::size_t n) {
  const auto* grad = static_cast<const GradT<G>*>(grad_bytes);
  const Consts c = consts(s);
  std::size_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    adam_block<G, O>(s, c, param + i, exp_avg + i, exp_avg_sq + i, grad + i,
                     O == OutKind::kNone ? nullptr : param_half + i);
  }
  if (i == n) return;
  const std::size_t rest = n - i;
  float p[kWidth] = {};
  float m[kWidth] = {};
  float v[kWidth] = {};
  GradT<G> g[kWidth] = {};
  std::uint16_t half[kWidth] = {};
  std::memcpy(p, param + i, rest * sizeof(float));
  std::memcpy(m, exp_avg + i, rest * sizeof(float));
  std::memcpy(v, exp_avg_sq + i, rest * sizeof(float));
  std::memcpy(g, grad + i, rest * sizeof(GradT<G>));
  adam_block<G, O>(s, c, p, m, v, g, half);
  std::memcpy(param + i, p, rest * sizeof(float));
  std::memcpy(exp_avg + i, m, rest * sizeof(float));
  std::memcpy(exp_avg_sq + i, v, rest * sizeof(float));
  if constexpr (O != OutKind::kNone) std::memcpy(param_half + i, half, rest * sizeof(std::uint16_t));
}
