// exp_flushed for the vector variants of the attention kernels: simd::exp_approx_flushed step for
// step (see there), so every lane has the scalar variant's bits. Included inside each ISA namespace
// of attention.cpp after its primitives (broadcast, min, max, add, sub, mul, select_lt, zero, pow2),
// under that ISA's target pragma, like attention_tiles.h. MINPS/MAXPS return the second operand when
// the first does not win, which is std::min(x, hi) and std::max(lo, .) with the operands in this
// order, NaN included.
// No include guard and no #pragma once: it is meant to be included once per ISA namespace.

[[gnu::always_inline]] inline Vec exp_flushed(Vec x) {
  const Vec clamped = max(min(broadcast(88.3762626647949f), x), broadcast(-87.0f));
  const Vec round = broadcast(12582912.0f);
  const Vec n = sub(add(mul(clamped, broadcast(1.44269504088896341f)), round), round);
  Vec r = sub(clamped, mul(n, broadcast(0.693359375f)));
  r = sub(r, mul(n, broadcast(-2.12194440e-4f)));
  Vec p = broadcast(1.9875691500e-4f);
  p = add(mul(p, r), broadcast(1.3981999507e-3f));
  p = add(mul(p, r), broadcast(8.3334519073e-3f));
  p = add(mul(p, r), broadcast(4.1665795894e-2f));
  p = add(mul(p, r), broadcast(1.6666665459e-1f));
  p = add(mul(p, r), broadcast(5.0000001201e-1f));
  const Vec e = add(add(mul(p, mul(r, r)), r), broadcast(1.0f));
  return select_lt(x, broadcast(-87.0f), zero(), mul(e, pow2(n)));
}
