// The blocked (flash-attention style) causal attention of kernels/cpu/attention.cpp, written once
// and compiled once per instruction set: attention.cpp includes this file three times, inside the
// namespaces scalar, avx2 and avx512 (the last two under a target pragma), after defining there the
// vector operations it uses:
//   Vec, kWidth (floats per Vec), kMaxVectors (Vecs per micro-tile row), zero(), load(p),
//   store(p, v), broadcast(x), fma(a, b, c) = a * b + c rounded once, add, sub, mul, max,
//   select_lt(a, b, t, f) = a < b ? t : f per lane, and exp_flushed(x) with the bits of
//   simd::exp_approx_flushed in every lane.
// It relies on attention.cpp's Shape, ForwardArgs, BackwardArgs, Buffer, Rows, ForwardScratch, BackwardScratch,
// kBlockRows, kBlockCols, kTileRows, kLanes, kLaneIndex and lane_dot being declared before it. Not
// a public header, and not a header in the usual sense: no include guard, on purpose.
//
// Why a re-included body rather than templates on an "ops" type: GCC attaches target attributes to
// a function where it is defined, so a template cannot be AVX2 in one instantiation and AVX-512 in
// another, and an always_inline intrinsic refuses to inline into a function without its target.
//
// Every matrix product here goes through one register-tiled micro-kernel,
//   c[m][n] (+)= sum_{k in [k_begin, k_end)} a(m, k) * b[k][n],   m < MR (<= kTileRows)
// with a(m, k) read through two strides (so a tile and its transpose are both operands) and b
// contiguous in n. Each c element is one chain of fused multiply-adds over k in increasing order,
// whatever the vector width: the width only decides how many elements run side by side. The row
// groups (kTileRows rows) and therefore every k range are the same in all variants, so the
// variants agree bit for bit.

// ---- Micro-kernel -------------------------------------------------------------------------------

template <std::size_t MR, std::size_t NV>
[[gnu::always_inline]] inline void micro_tile(float* c, std::size_t ldc, const float* a, std::size_t a_m,
                                              std::size_t a_k, const float* b, std::size_t ldb, std::size_t k_begin,
                                              std::size_t k_end, bool accumulate) {
  Vec acc[MR][NV];
#pragma GCC unroll 8
  for (std::size_t m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (std::size_t v = 0; v < NV; ++v) acc[m][v] = accumulate ? load(c + m * ldc + v * kWidth) : zero();
  }
  for (std::size_t k = k_begin; k < k_end; ++k) {
    const float* b_row = b + k * ldb;
    const float* a_col = a + k * a_k;
    Vec bv[NV];
#pragma GCC unroll 8
    for (std::size_t v = 0; v < NV; ++v) bv[v] = load(b_row + v * kWidth);
#pragma GCC unroll 8
    for (std::size_t m = 0; m < MR; ++m) {
      const Vec av = broadcast(a_col[m * a_m]);
#pragma GCC unroll 8
      for (std::size_t v = 0; v < NV; ++v) acc[m][v] = fma(av, bv[v], acc[m][v]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (std::size_t v = 0; v < NV; ++v) store(c + m * ldc + v * kWidth, acc[m][v]);
  }
}

// The last columns of a row group: `vectors` (< kMaxVectors) Vecs.
template <std::size_t MR, std::size_t NV>
[[gnu::always_inline]] inline void micro_tail(std::size_t vectors, float* c, std::size_t ldc, const float* a,
                                              std::size_t a_m, std::size_t a_k, const float* b, std::size_t ldb,
                                              std::size_t k_begin, std::size_t k_end, bool accumulate) {
  if constexpr (NV >= 1) {
    if (vectors == NV) {
      micro_tile<MR, NV>(c, ldc, a, a_m, a_k, b, ldb, k_begin, k_end, accumulate);
    } else {
      micro_tail<MR, NV - 1>(vectors, c, ldc, a, a_m, a_k, b, ldb, k_begin, k_end, accumulate);
    }
  }
}

// Columns [0, n_end) of MR rows; n_end is a multiple of kWidth.
template <std::size_t MR>
void gemm_rows(float* c, std::size_t ldc, const float* a, std::size_t a_m, std::size_t a_k, const float* b,
               std::size_t ldb, std::size_t k_begin, std::size_t k_end, std::size_t n_end, bool accumulate) {
  constexpr std::size_t kStep = kMaxVectors * kWidth;
  std::size_t n = 0;
  for (; n + kStep <= n_end; n += kStep) {
    micro_tile<MR, kMaxVectors>(c + n, ldc, a, a_m, a_k, b + n, ldb, k_begin, k_end, accumulate);
  }
  if (n < n_end) {
    micro_tail<MR, kMaxVectors - 1>((n_end - n) / kWidth, c + n, ldc, a, a_m, a_k, b + n, ldb, k_begin, k_end,
                                    accumulate);
  }
}

// One row group of `rows` (1..kTileRows) rows: c[m][n] (+)= sum_k a[m * a_m + k * a_k] * b[k * ldb + n]
// for m < rows, n < n_end (a multiple of kWidth), k in [k_begin, k_end). accumulate=false starts
// from zero (then an empty k range writes zeros).
void gemm_group(std::size_t rows, float* c, std::size_t ldc, const float* a, std::size_t a_m, std::size_t a_k,
                const float* b, std::size_t ldb, std::size_t k_begin, std::size_t k_end, std::size_t n_end,
                bool accumulate) {
  static_assert(kTileRows == 6, "gemm_group dispatches 1..6 rows");
  switch (rows) {
    case 1:
      gemm_rows<1>(c, ldc, a, a_m, a_k, b, ldb, k_begin, k_end, n_end, accumulate);
      break;
    case 2:
      gemm_rows<2>(c, ldc, a, a_m, a_k, b, ldb, k_begin, k_end, n_end, accumulate);
      break;
    case 3:
      gemm_rows<3>(c, ldc, a, a_m, a_k, b, ldb, k_begin, k_end, n_end, accumulate);
      break;
    case 4:
      gemm_rows<4>(c, ldc, a, a_m, a_k, b, ldb, k_begin, k_end, n_end, accumulate);
      break;
    case 5:
      gemm_rows<5>(c, ldc, a, a_m, a_k, b, ldb, k_begin, k_end, n_end, accumulate);
      break;
    default:
      gemm_rows<6>(c, ldc, a, a_m, a_k, b, ldb, k_begin, k_end, n_end, accumulate);
      break;
  }
}

std::size_t round_to_width(std::size_t n) { return (n + kWidth - 1) / kWidth * kWidth; }

// kLanes floats are kVecsPerLanes Vecs: the elementwise code below works on kLanes-wide chunks, and
// a running sum keeps one accumulator per lane (element c in lane c % kLanes) whatever the width.
constexpr std::size_t kVecsPerLanes = kLanes / kWidth;

// The column indices chunk .. chunk + kLanes - 1 as floats, one Vec per kWidth of them.
[[gnu::always_inline]] inline void column_indices(Vec (&index)[kVecsPerLanes], std::size_t chunk) {
  const Vec base = broadcast(static_cast<float>(chunk));
#pragma GCC unroll 16
  for (std::size_t v = 0; v < kVecsPerLanes; ++v) index[v] = add(load(kLaneIndex + v * kWidth), base);
}

// ---- Packing ------------------------------------------------------------------------------------

// Prefetches the cache lines of n floats from p on: rows of one head are a qkv row apart, so the
// hardware prefetchers do not run ahead of a walk down them.
[[gnu::always_inline]] inline void prefetch_floats(const float* p, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
}

// How many rows ahead the packing loops prefetch.
constexpr std::size_t kPrefetchRows = 8;

// The K/V pair's keys (and, when `values_t` is set, values) transposed per key block: kt[(j * hs + d)
// * kBlockCols + c] = k[j * kBlockCols + c][d]; padding columns past T stay zero. k_base and
// v_base point at the pair's first k and v row. Prefetches the v rows too, for the forward pass,
// which reads them in place.
// With a fused rotation (s.rope) each k row is first rotated into `rotated` ([hs]).
void pack_transposed(float* kt, float* values_t, const float* k_base, const float* v_base, const Shape& s,
                     float* rotated) {
  const std::size_t row = s.row;
  const std::size_t hs = s.head_size;
  for (std::size_t t = 0; t < s.seq_len; ++t) {
    if (t + kPrefetchRows < s.seq_len) {
      prefetch_floats(k_base + (t + kPrefetchRows) * row, hs);
      prefetch_floats(v_base + (t + kPrefetchRows) * row, hs);
    }
    const std::size_t block = t / kBlockCols;
    const std::size_t col = t % kBlockCols;
    const float* k = k_base + t * row;
    if (s.rope.active()) {
      attention_rope::rotate<true>(rotated, k, s.rope, s.rope.pos_offset + t, hs);
      k = rotated;
    }
    const float* v = v_base + t * row;
    for (std::size_t d = 0; d < hs; ++d) kt[(block * hs + d) * kBlockCols + col] = k[d];
    if (values_t != nullptr) {
      for (std::size_t d = 0; d < hs; ++d) values_t[(block * hs + d) * kBlockCols + col] = v[d];
    }
  }
}

// n rows of hs floats, `stride` apart, as a Rows view: in place when hs is a whole number of
// vectors, else copied into `packed` ([n, hsp], columns hs..hsp-1 zero).
Rows rows_view(const float* rows, std::size_t stride, std::size_t n, const Shape& s, const Buffer& packed) {
  if (s.head_size == s.head_padded) return {rows, stride};
  for (std::size_t t = 0; t < n; ++t) {
    std::copy(rows + t * stride, rows + t * stride + s.head_size, packed.data() + t * s.head_padded);
  }
  return {packed.data(), s.head_padded};
}

// The query or key rows of a head (n rows from position 0, `stride` apart) as the tiles read them:
// rotated into `packed` when the rotation is fused (s.rope), else rows_view's.
Rows qk_rows_view(const float* rows, std::size_t stride, std::size_t n, const Shape& s, const Buffer& packed) {
  if (!s.rope.active()) return rows_view(rows, stride, n, s, packed);
  for (std::size_t t = 0; t < n; ++t) {
    attention_rope::rotate<true>(packed.data() + t * s.head_padded, rows + t * stride, s.rope, s.rope.pos_offset + t,
                                 s.head_size);
  }
  return {packed.data(), s.head_padded};
}

// ---- Rows of a score tile ------------------------------------------------------------------------
// kMasked: the row sees only its first `valid` columns (a diagonal or last tile); otherwise all
// kBlockCols, and the mask is not evaluated at all.

// max over the row's visible raw scores.
template <bool kMasked>
[[gnu::always_inline]] inline float raw_max(const float* row, std::size_t valid) {
  const Vec valid_v = broadcast(static_cast<float>(valid));
  const Vec minus_inf = broadcast(-std::numeric_limits<float>::infinity());
  Vec lanes[kVecsPerLanes];
#pragma GCC unroll 16
  for (std::size_t v = 0; v < kVecsPerLanes; ++v) lanes[v] = minus_inf;
  for (std::size_t chunk = 0; chunk < kBlockCols; chunk += kLanes) {
    Vec index[kVecsPerLanes];
    if constexpr (kMasked) column_indices(index, chunk);
#pragma GCC unroll 16
    for (std::size_t v = 0; v < kVecsPerLanes; ++v) {
      Vec x = load(row + chunk + v * kWidth);
      if constexpr (kMasked) x = select_lt(index[v], valid_v, x, minus_inf);
      lanes[v] = max(lanes[v], x);
    }
  }
  float lane_values[kLanes];
#pragma GCC unroll 16
  for (std::size_t v = 0; v < kVecsPerLanes; ++v) store(lane_values + v * kWidth, lanes[v]);
  float result = lane_values[0];
  for (std::size_t l = 1; l < kLanes; ++l) result = result > lane_values[l] ? result : lane_values[l];
  return result;
}

// out[c] = exp(scale * in[c] - offset) (fused multiply-add) where visible, exactly 0 where masked;
// returns their sum, in kLanes fixed lanes added in order. in and out may be the same row.
template <bool kMasked>
[[gnu::always_inline]] inline float exp_row(float* out, const float* in, std::size_t valid, float scale, float offset) {
  const Vec valid_v = broadcast(static_cast<float>(valid));
  const Vec scale_v = broadcast(scale);
  const Vec minus_offset = broadcast(-offset);
  Vec lanes[kVecsPerLanes];
#pragma GCC unroll 16
  for (std::size_t v = 0; v < kVecsPerLanes; ++v) lanes[v] = zero();
  for (std::size_t chunk = 0; chunk < kBlockCols; chunk += kLanes) {
    Vec index[kVecsPerLanes];
    if constexpr (kMasked) column_indices(index, chunk);
#pragma GCC unroll 16
    for (std::size_t v = 0; v < kVecsPerLanes; ++v) {
      const std::size_t c = chunk + v * kWidth;
      Vec e = exp_flushed(fma(load(in + c), scale_v, minus_offset));
      if constexpr (kMasked) e = select_lt(index[v], valid_v, e, zero());
      store(out + c, e);
      lanes[v] = add(lanes[v], e);
    }
  }
  float lane_values[kLanes];
#pragma GCC unroll 16
  for (std::size_t v = 0; v < kVecsPerLanes; ++v) store(lane_values + v * kWidth, lanes[v]);
  float sum = 0.0f;
  for (std::size_t l = 0; l < kLanes; ++l) sum += lane_values[l];
  return sum;
}

// dS row of the backward pass: ds[c] = scale * p[c] * (dp[c] - delta) where visible, 0 where
// masked; dp and ds may be the same row.
template <bool kMasked>
[[gnu::always_inline]] inline void dscore_row(float* ds, const float* p, const float* dp, std::size_t valid,
                                              float scale, float delta) {
  const Vec valid_v = broadcast(static_cast<float>(valid));
  const Vec scale_v = broadcast(scale);
  const Vec delta_v = broadcast(delta);
  for (std::size_t chunk = 0; chunk < kBlockCols; chunk += kLanes) {
    Vec index[kVecsPerLanes];
    if constexpr (kMasked) column_indices(index, chunk);
#pragma GCC unroll 16
    for (std::size_t v = 0; v < kVecsPerLanes; ++v) {
      const std::size_t c = chunk + v * kWidth;
      Vec g = mul(mul(load(p + c), sub(load(dp + c), delta_v)), scale_v);
      if constexpr (kMasked) g = select_lt(index[v], valid_v, g, zero());
      store(ds + c, g);
    }
  }
}

// ---- Forward ------------------------------------------------------------------------------------

// One query block: rows [r0, r0 + br) of pair `pair`, against key blocks 0 .. the diagonal.
void forward_block(const ForwardArgs& args, ForwardScratch& w, std::size_t pair, std::size_t r0) {
  const Shape& s = args.shape;
  const std::size_t row = s.row;
  const std::size_t hs = s.head_size;
  const std::size_t hsp = s.head_padded;
  const std::size_t b = pair / s.heads;
  const std::size_t h = pair % s.heads;
  const std::size_t br = std::min(kBlockRows, s.seq_len - r0);
  // The query block, copied (with prefetch) so the score products read it from L1.
  const float* q_rows = args.qkv + (b * s.seq_len + r0) * row + h * hs;
  float* q = w.queries.data();
  for (std::size_t m = 0; m < br; ++m) {
    if (m + kPrefetchRows < br) prefetch_floats(q_rows + (m + kPrefetchRows) * row, hs);
    if (s.rope.active()) {
      attention_rope::rotate<true>(q + m * hsp, q_rows + m * row, s.rope, s.rope.pos_offset + r0 + m, hs);
    } else {
      std::copy(q_rows + m * row, q_rows + m * row + hs, q + m * hsp);
    }
  }
  float* sc = w.scores.data();
  float* o = w.acc.data();
  std::fill(o, o + br * hsp, 0.0f);
  std::fill(w.row_max.begin(), w.row_max.end(), -std::numeric_limits<float>::infinity());
  std::fill(w.row_sum.begin(), w.row_sum.end(), 0.0f);

  for (std::size_t c0 = 0, j = 0; c0 < r0 + br; c0 += kBlockCols, ++j) {
    const std::size_t bc = std::min(kBlockCols, s.seq_len - c0);
    // S = Q Kᵀ for the columns some row of each group may see.
    for (std::size_t m0 = 0; m0 < br; m0 += kTileRows) {
      const std::size_t rows = std::min(kTileRows, br - m0);
      const std::size_t last = r0 + m0 + rows - 1;
      if (last < c0) continue;
      const std::size_t cols = std::min(bc, last - c0 + 1);
      gemm_group(rows, sc + m0 * kBlockCols, kBlockCols, q + m0 * hsp, hsp, 1, w.keys_t.data() + j * hs * kBlockCols,
                 kBlockCols, 0, hs, round_to_width(cols), false);
    }
    // Online softmax: P = exp(scale * S - new max) in place of S, masked entries exactly 0.
    for (std::size_t m = 0; m < br; ++m) {
      const std::size_t r = r0 + m;
      float* p = sc + m * kBlockCols;
      const std::size_t valid = r >= c0 ? std::min(bc, r - c0 + 1) : 0;
      if (valid == 0) {
        std::fill(p, p + kBlockCols, 0.0f);
        continue;
      }
      // Scaling by scale > 0 is monotonic in fp32, so the max of the scaled scores is the scaled max.
      const float tile_max = (valid == kBlockCols ? raw_max<false>(p, valid) : raw_max<true>(p, valid)) * s.scale;
      const float old_max = w.row_max[m];
      const float new_max = std::max(old_max, tile_max);
      const float tile_sum = valid == kBlockCols ? exp_row<false>(p, p, valid, s.scale, new_max)
                                                 : exp_row<true>(p, p, valid, s.scale, new_max);
      // The first tile of a row has old_max = -inf: correction 0 against the zero accumulator.
      const float correction = simd::exp_approx_flushed(old_max - new_max);
      w.row_max[m] = new_max;
      w.row_sum[m] = w.row_sum[m] * correction + tile_sum;
      if (correction != 1.0f) {
        float* o_row = o + m * hsp;
        const Vec correction_v = broadcast(correction);
        for (std::size_t d = 0; d < hsp; d += kWidth) store(o_row + d, mul(load(o_row + d), correction_v));
      }
    }
    // O += P V over the keys each row group may see.
    for (std::size_t m0 = 0; m0 < br; m0 += kTileRows) {
      const std::size_t rows = std::min(kTileRows, br - m0);
      const std::size_t last = r0 + m0 + rows - 1;
      if (last < c0) continue;
      const std::size_t keys = std::min(bc, last - c0 + 1);
      gemm_group(rows, o + m0 * hsp, hsp, sc + m0 * kBlockCols, kBlockCols, 1, w.value_rows.row(c0),
                 w.value_rows.stride, 0, keys, hsp, true);
    }
  }

  for (std::size_t m = 0; m < br; ++m) {
    const std::size_t r = r0 + m;
    const float inv_sum = 1.0f / w.row_sum[m];
    float* out = args.out + (b * s.seq_len + r) * s.channels + h * hs;
    const float* o_row = o + m * hsp;
    for (std::size_t d = 0; d < hs; ++d) out[d] = o_row[d] * inv_sum;
    if (args.lse != nullptr) args.lse[pair * s.seq_len + r] = w.row_max[m] + std::log(w.row_sum[m]);
  }
}

// The first k and v row of K/V pair `kv` (batch kv / NKV, K/V head kv % NKV) in qkv.
const float* key_base(const float* qkv, const Shape& s, std::size_t kv) {
  return qkv + kv / s.kv_heads * s.seq_len * s.row + s.k_offset() + kv % s.kv_heads * s.head_size;
}
const float* value_base(const float* qkv, const Shape& s, std::size_t kv) {
  return qkv + kv / s.kv_heads * s.seq_len * s.row + s.v_offset() + kv % s.kv_heads * s.head_size;
}

// Work items [begin, end) of the forward pass; item = pair * query_blocks + query block. The query
// heads of one group are consecutive pairs, so a thread packs their shared keys once.
void forward_items(const ForwardArgs& args, ForwardScratch& w, std::size_t begin, std::size_t end) {
  const Shape& s = args.shape;
  const std::size_t blocks = s.query_blocks;
  for (std::size_t item = begin; item < end; ++item) {
    const std::size_t pair = item / blocks;
    const std::size_t kv = s.kv_pair_of(pair);
    if (kv != w.packed_kv) {
      pack_transposed(w.keys_t.data(), nullptr, key_base(args.qkv, s, kv), value_base(args.qkv, s, kv), s,
                      w.rotated.data());
      w.value_rows = rows_view(value_base(args.qkv, s, kv), s.row, s.seq_len, s, w.values);
      w.packed_kv = kv;
    }
    forward_block(args, w, pair, (item % blocks) * kBlockRows);
  }
}

// ---- Backward -----------------------------------------------------------------------------------

// Packs what the tiles of `pair` read: its K/V pair's keys and values (unless already packed) and
// its own queries, dout rows and D.
void backward_pack(const BackwardArgs& args, BackwardScratch& w, std::size_t pair) {
  const Shape& s = args.shape;
  const std::size_t kv = s.kv_pair_of(pair);
  if (kv != w.packed_kv) {
    pack_transposed(w.keys_t.data(), w.values_t.data(), key_base(args.qkv, s, kv), value_base(args.qkv, s, kv), s,
                    w.rotated.data());
    w.key_rows = qk_rows_view(key_base(args.qkv, s, kv), s.row, s.seq_len, s, w.keys);
    w.packed_kv = kv;
  }
  if (pair == w.packed_pair) return;
  const std::size_t b = pair / s.heads;
  const std::size_t h = pair % s.heads;
  const float* dout = args.dout + b * s.seq_len * s.channels + h * s.head_size;
  const float* out = args.out + b * s.seq_len * s.channels + h * s.head_size;
  w.query_rows = qk_rows_view(args.qkv + b * s.seq_len * s.row + h * s.head_size, s.row, s.seq_len, s, w.queries);
  for (std::size_t t = 0; t < s.seq_len; ++t) {
    if (t + kPrefetchRows < s.seq_len) {
      prefetch_floats(dout + (t + kPrefetchRows) * s.channels, s.head_size);
      prefetch_floats(out + (t + kPrefetchRows) * s.channels, s.head_size);
    }
    w.delta[t] = lane_dot(dout + t * s.channels, out + t * s.channels, s.head_size);
  }
  w.dout_rows = rows_view(dout, s.channels, s.seq_len, s, w.dout);
  w.packed_pair = pair;
}

// Tile (query block starting at r0, key block j) of the packed pair: recompute P and dS, then
// dV_j += Pᵀ dO and dK_j += dSᵀ Q into w.dk/w.dv (want_dkv), dQ += dS K into w.dq (want_dq).
void backward_tile(const BackwardArgs& args, BackwardScratch& w, std::size_t pair, std::size_t r0, std::size_t j,
                   bool want_dkv, bool want_dq) {
  const Shape& s = args.shape;
  const std::size_t hs = s.head_size;
  const std::size_t hsp = s.head_padded;
  const std::size_t c0 = j * kBlockCols;
  const std::size_t br = std::min(kBlockRows, s.seq_len - r0);
  const std::size_t bc = std::min(kBlockCols, s.seq_len - c0);
  float* p = w.probs.data();
  float* ds = w.dscores.data();
  const Rows& q = w.query_rows;
  const Rows& dout = w.dout_rows;
  for (std::size_t m0 = 0; m0 < br; m0 += kTileRows) {
    const std::size_t rows = std::min(kTileRows, br - m0);
    const std::size_t last = r0 + m0 + rows - 1;
    if (last < c0) continue;
    const std::size_t cols = round_to_width(std::min(bc, last - c0 + 1));
    // S = Q Kᵀ and dP = dO Vᵀ.
    gemm_group(rows, p + m0 * kBlockCols, kBlockCols, q.row(r0 + m0), q.stride, 1,
               w.keys_t.data() + j * hs * kBlockCols, kBlockCols, 0, hs, cols, false);
    gemm_group(rows, ds + m0 * kBlockCols, kBlockCols, dout.row(r0 + m0), dout.stride, 1,
               w.values_t.data() + j * hs * kBlockCols, kBlockCols, 0, hs, cols, false);
  }
  // P = exp(scale * S - lse) and dS = scale * P * (dP - D), both exactly 0 where masked.
  const float* lse = args.lse + pair * s.seq_len;
  for (std::size_t m = 0; m < br; ++m) {
    const std::size_t r = r0 + m;
    const std::size_t valid = r >= c0 ? std::min(bc, r - c0 + 1) : 0;
    const float row_lse = lse[r];
    const float row_delta = w.delta[r];
    float* p_row = p + m * kBlockCols;
    float* ds_row = ds + m * kBlockCols;
    if (valid == kBlockCols) {
      exp_row<false>(p_row, p_row, valid, s.scale, row_lse);
      dscore_row<false>(ds_row, p_row, ds_row, valid, s.scale, row_delta);
    } else {
      exp_row<true>(p_row, p_row, valid, s.scale, row_lse);
      dscore_row<true>(ds_row, p_row, ds_row, valid, s.scale, row_delta);
    }
  }
  if (want_dkv) {
    // Key rows [c0 + g0, ...) see query rows from c0 + g0 on.
    for (std::size_t g0 = 0; g0 < bc; g0 += kTileRows) {
      const std::size_t rows = std::min(kTileRows, bc - g0);
      const std::size_t first = c0 + g0 > r0 ? c0 + g0 - r0 : 0;
      if (first >= br) continue;
      gemm_group(rows, w.dv.data() + g0 * hsp, hsp, p + g0, 1, kBlockCols, dout.row(r0), dout.stride, first, br, hsp,
                 true);
      gemm_group(rows, w.dk.data() + g0 * hsp, hsp, ds + g0, 1, kBlockCols, q.row(r0), q.stride, first, br, hsp, true);
    }
  }
  if (want_dq) {
    for (std::size_t m0 = 0; m0 < br; m0 += kTileRows) {
      const std::size_t rows = std::min(kTileRows, br - m0);
      const std::size_t last = r0 + m0 + rows - 1;
      if (last < c0) continue;
      const std::size_t keys = std::min(bc, last - c0 + 1);
      gemm_group(rows, w.dq.data() + (r0 + m0) * hsp, hsp, ds + m0 * kBlockCols, kBlockCols, 1, w.key_rows.row(c0),
                 w.key_rows.stride, 0, keys, hsp, true);
    }
  }
}

// dqkv[batch b, rows t0 .. t0 + n, columns column .. column + hs) += acc rows 0 .. n; with
// `unrotate` (a q or k head's gradient under a fused rotation) each acc row is first turned back
// by rope_backward's rotation into `rotated` ([hs]).
void add_rows(const BackwardArgs& args, std::size_t b, std::size_t column, std::size_t t0, std::size_t n,
              const float* acc, bool unrotate, float* rotated) {
  const Shape& s = args.shape;
  for (std::size_t i = 0; i < n; ++i) {
    float* dst = args.dqkv + (b * s.seq_len + t0 + i) * s.row + column;
    const float* src = acc + i * s.head_padded;
    if (unrotate) {
      attention_rope::rotate<false>(rotated, src, s.rope, s.rope.pos_offset + t0 + i, s.head_size);
      src = rotated;
    }
    for (std::size_t d = 0; d < s.head_size; ++d) dst[d] += src[d];
  }
}

// dQ of the whole pair (w.dq) into dqkv.
void add_query_rows(const BackwardArgs& args, BackwardScratch& w, std::size_t pair, std::size_t t0, std::size_t n,
                    const float* acc) {
  const Shape& s = args.shape;
  add_rows(args, pair / s.heads, pair % s.heads * s.head_size, t0, n, acc, s.rope.active(), w.rotated.data());
}

// dK and dV of key block j summed over the group (w.group_dk, w.group_dv, rows c0 ..) into dqkv.
void add_key_value_rows(const BackwardArgs& args, BackwardScratch& w, std::size_t kv, std::size_t j) {
  const Shape& s = args.shape;
  const std::size_t c0 = j * kBlockCols;
  const std::size_t bc = std::min(kBlockCols, s.seq_len - c0);
  const std::size_t b = kv / s.kv_heads;
  const std::size_t g = kv % s.kv_heads;
  add_rows(args, b, s.k_offset() + g * s.head_size, c0, bc, w.group_dk.data() + c0 * s.head_padded, s.rope.active(),
           w.rotated.data());
  add_rows(args, b, s.v_offset() + g * s.head_size, c0, bc, w.group_dv.data() + c0 * s.head_padded, false, nullptr);
}

// dK and dV of key block j for one query head (pair): every query block that sees it, in
// increasing order, into w.dk/w.dv; then into the group's sums: the first head of the group
// copies (member 0), the next ones add in head order. That is gqa_reduce's order (fp32, head by
// head), so the bits are those of expanding K/V, attending and reducing.
void backward_key_block(const BackwardArgs& args, BackwardScratch& w, std::size_t pair, std::size_t j, bool want_dq) {
  const Shape& s = args.shape;
  const std::size_t c0 = j * kBlockCols;
  const std::size_t bc = std::min(kBlockCols, s.seq_len - c0);
  std::fill(w.dk.begin(), w.dk.end(), 0.0f);
  std::fill(w.dv.begin(), w.dv.end(), 0.0f);
  for (std::size_t r0 = c0 / kBlockRows * kBlockRows; r0 < s.seq_len; r0 += kBlockRows) {
    backward_tile(args, w, pair, r0, j, true, want_dq);
  }
  const bool first = pair % s.heads % s.group == 0;
  const std::size_t hsp = s.head_padded;
  for (std::size_t i = 0; i < bc; ++i) {
    float* gk = w.group_dk.data() + (c0 + i) * hsp;
    float* gv = w.group_dv.data() + (c0 + i) * hsp;
    const float* k = w.dk.data() + i * hsp;
    const float* v = w.dv.data() + i * hsp;
    if (first) {
      std::copy(k, k + hsp, gk);
      std::copy(v, v + hsp, gv);
    } else {
      for (std::size_t d = 0; d < hsp; ++d) gk[d] += k[d];
      for (std::size_t d = 0; d < hsp; ++d) gv[d] += v[d];
    }
  }
}

// dQ of the query block at r0: every key block it sees, in increasing order.
void backward_query_block(const BackwardArgs& args, BackwardScratch& w, std::size_t pair, std::size_t r0) {
  const Shape& s = args.shape;
  const std::size_t br = std::min(kBlockRows, s.seq_len - r0);
  float* dq = w.dq.data() + r0 * s.head_padded;
  std::fill(dq, dq + br * s.head_padded, 0.0f);
  for (std::size_t j = 0; j * kBlockCols < r0 + br; ++j) backward_tile(args, w, pair, r0, j, false, true);
  add_query_rows(args, w, pair, r0, br, dq);
}

// Whole (batch, K/V head) pairs [begin, end): for each query head of the group in order, one sweep
// (key blocks outside, query blocks inside) with dQ of the whole sequence accumulated in scratch
// and dK/dV added into the group's sums; then the sums into dqkv. The same sums in the same order
// as the split items below.
void backward_pairs(const BackwardArgs& args, BackwardScratch& w, std::size_t begin, std::size_t end) {
  const Shape& s = args.shape;
  for (std::size_t kv = begin; kv < end; ++kv) {
    const std::size_t first_pair = kv / s.kv_heads * s.heads + kv % s.kv_heads * s.group;
    for (std::size_t pair = first_pair; pair < first_pair + s.group; ++pair) {
      backward_pack(args, w, pair);
      std::fill(w.dq.begin(), w.dq.end(), 0.0f);
      for (std::size_t j = 0; j < s.key_blocks; ++j) backward_key_block(args, w, pair, j, true);
      add_query_rows(args, w, pair, 0, s.seq_len, w.dq.data());
    }
    for (std::size_t j = 0; j < s.key_blocks; ++j) add_key_value_rows(args, w, kv, j);
  }
}

// Split work items [begin, end): first kv_pairs * key_blocks items (K/V pair, key block) giving dK
// and dV summed over the group, then pairs * query_blocks items (pair, query block) giving dQ. Each
// item writes its own rows of one part of dqkv, so all items can run at once; P and dS are computed
// twice (once per kind).
void backward_items(const BackwardArgs& args, BackwardScratch& w, std::size_t begin, std::size_t end) {
  const Shape& s = args.shape;
  const std::size_t key_items = s.batch * s.kv_heads * s.key_blocks;
  for (std::size_t item = begin; item < end; ++item) {
    if (item < key_items) {
      const std::size_t kv = item / s.key_blocks;
      const std::size_t j = item % s.key_blocks;
      const std::size_t first_pair = kv / s.kv_heads * s.heads + kv % s.kv_heads * s.group;
      for (std::size_t pair = first_pair; pair < first_pair + s.group; ++pair) {
        backward_pack(args, w, pair);
        backward_key_block(args, w, pair, j, false);
      }
      add_key_value_rows(args, w, kv, j);
    } else {
      const std::size_t pair = (item - key_items) / s.query_blocks;
      backward_pack(args, w, pair);
      backward_query_block(args, w, pair, (item - key_items) % s.query_blocks * kBlockRows);
    }
  }
}
