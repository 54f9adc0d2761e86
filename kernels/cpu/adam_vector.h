// The Adam/AdamW step of one vector variant (adam.cpp has the formulas and the rounding rules):
// included inside each ISA namespace of adam.cpp, after that ISA's primitives (Vec, kWidth, set1,
// load, store, add, mul, div, sqrt, fmadd, load_bf16, load_f16, store_bf16, store_f16) and under its
// target pragma. No include guard: it is meant to be included once per ISA namespace.
//
// Why the loop looks as it does (measured on a 2-core AMD EPYC, AVX2, 16 Mi parameters, against
// DeepSpeedCPUAdam's loop compiled the same way; docs/peers.md has the figures):
// - The per-step choices (a gradient scale other than 1, Adam's L2 term, AdamW's decay) are template
//   parameters, so the loop carries no branch and no multiply by 1: the step is memory-bound, but
//   every extra operation in flight delays the loads of the next elements.
// - kStepElements elements (128 bytes of each fp32 array) per iteration, and a software prefetch
//   kPrefetchElements ahead on every array: the hardware prefetchers stop at each 4 KiB page, and
//   four streams restart there together; the prefetch keeps the next page's lines coming.
// Neither changes a bit of the result: the operations and their order per element are the same.

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

// The weight decay of one step: none, Adam's L2 term in the gradient, or AdamW's decoupled decay.
enum class Decay { kNone, kL2, kDecoupled };

// One vector of kWidth elements.
template <GradKind G, OutKind O, bool kScale, Decay D>
[[gnu::always_inline]] inline void adam_block(const Consts& c, float* param, float* exp_avg, float* exp_avg_sq,
                                              const GradT<G>* grad, std::uint16_t* param_half) {
  Vec g;
  if constexpr (G == GradKind::kF32) {
    g = load(grad);
  } else if constexpr (G == GradKind::kBF16) {
    g = load_bf16(grad);
  } else {
    g = load_f16(grad);
  }
  // g * 1 is g bit for bit, so skipping the multiply for a scale of 1 changes nothing.
  if constexpr (kScale) g = mul(g, c.grad_scale);
  Vec p = load(param);
  if constexpr (D == Decay::kL2) g = fmadd(p, c.weight_decay, g);
  if constexpr (D == Decay::kDecoupled) p = mul(p, c.decay);
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

// Elements per loop iteration (two 64-byte lines of each fp32 array) and the prefetch distance
// (1 KiB of each fp32 array ahead; a quarter of a 4 KiB page). Both multiples of every kWidth.
constexpr std::size_t kStepElements = 32;
constexpr std::size_t kPrefetchElements = 256;
constexpr std::size_t kLineBytes = 64;

// Asks for the lines of [at + ahead, at + ahead + bytes). The address is computed as an integer
// (it may lie past the end of the array, where a pointer may not point) and a prefetch never
// faults, so running past the end is harmless.
[[gnu::always_inline]] inline void prefetch_lines(const void* at, std::size_t ahead, std::size_t bytes) {
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(at) + ahead;
  for (std::size_t offset = 0; offset < bytes; offset += kLineBytes) {
    __builtin_prefetch(reinterpret_cast<const void*>(base + offset), 0, 3);
  }
}

// n elements: kStepElements at a time, then whole vectors, then a tail through the same vector code
// on zero-padded stack copies.
template <GradKind G, OutKind O, bool kScale, Decay D>
void adam_loop(const StepScalars& s, float* param, float* exp_avg, float* exp_avg_sq, const GradT<G>* grad,
               std::uint16_t* param_half, std::size_t n) {
  const Consts c = consts(s);
  std::size_t i = 0;
  for (; i + kStepElements <= n; i += kStepElements) {
    prefetch_lines(param + i, kPrefetchElements * sizeof(float), kStepElements * sizeof(float));
    prefetch_lines(exp_avg + i, kPrefetchElements * sizeof(float), kStepElements * sizeof(float));
    prefetch_lines(exp_avg_sq + i, kPrefetchElements * sizeof(float), kStepElements * sizeof(float));
    prefetch_lines(grad + i, kPrefetchElements * sizeof(GradT<G>), kStepElements * sizeof(GradT<G>));
    for (std::size_t k = 0; k < kStepElements; k += kWidth) {
      adam_block<G, O, kScale, D>(c, param + i + k, exp_avg + i + k, exp_avg_sq + i + k, grad + i + k,
                                  O == OutKind::kNone ? nullptr : param_half + i + k);
    }
  }
  for (; i + kWidth <= n; i += kWidth) {
    adam_block<G, O, kScale, D>(c, param + i, exp_avg + i, exp_avg_sq + i, grad + i,
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
  adam_block<G, O, kScale, D>(c, p, m, v, g, half);
  std::memcpy(param + i, p, rest * sizeof(float));
  std::memcpy(exp_avg + i, m, rest * sizeof(float));
  std::memcpy(exp_avg_sq + i, v, rest * sizeof(float));
  if constexpr (O != OutKind::kNone) std::memcpy(param_half + i, half, rest * sizeof(std::uint16_t));
}

template <GradKind G, OutKind O, bool kScale>
void adam_loop_decay(const StepScalars& s, float* param, float* exp_avg, float* exp_avg_sq, const GradT<G>* grad,
                     std::uint16_t* param_half, std::size_t n) {
  if (s.apply_l2) {
    adam_loop<G, O, kScale, Decay::kL2>(s, param, exp_avg, exp_avg_sq, grad, param_half, n);
  } else if (s.apply_decay) {
    adam_loop<G, O, kScale, Decay::kDecoupled>(s, param, exp_avg, exp_avg_sq, grad, param_half, n);
  } else {
    adam_loop<G, O, kScale, Decay::kNone>(s, param, exp_avg, exp_avg_sq, grad, param_half, n);
  }
}

// The kernel the dispatch table points at: picks the loop for this step's choices.
template <GradKind G, OutKind O>
void adam_run(const StepScalars& s, float* param, float* exp_avg, float* exp_avg_sq, const void* grad_bytes,
              std::uint16_t* param_half, std::size_t n) {
  const auto* grad = static_cast<const GradT<G>*>(grad_bytes);
  if (s.grad_scale == 1.0f) {
    adam_loop_decay<G, O, false>(s, param, exp_avg, exp_avg_sq, grad, param_half, n);
  } else {
    adam_loop_decay<G, O, true>(s, param, exp_avg, exp_avg_sq, grad, param_half, n);
  }
}
