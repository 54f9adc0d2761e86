// CPU causal multi-head self-attention, forward and backward (attention.h has the formulas and the
// contract), blocked like flash attention. Per (batch, head) pair the sequence is cut into blocks
// of kBlockRows query rows and kBlockCols keys; a (query block, key block) tile's scores S = Q Kᵀ,
// probabilities and P V (forward), or S, P, dP = dO Vᵀ, dS and the three gradient products
// (backward) are computed in per-thread scratch that stays in L1/L2, with one register-tiled SIMD
// micro-kernel (kernels/cpu/attention_tiles.h) and a vector exp with simd::exp_approx_flushed's
// bits in every lane. Scratch lives in a per-thread arena reused across calls. Tiles wholly
// above the diagonal are skipped, and so are the masked corners of diagonal tiles at the
// micro-kernel's granularity. Per-thread scratch is O(T * hs), never a T x T matrix: the pair's
// keys (and, backward, values) transposed per key block, once per pair; dQ of the pair (backward);
// q, k, v and dout rows are read in place when hs is a multiple of 16 and copied (padded) otherwise.
//
// Threading: the forward pass's work items are (pair, query block), cut into contiguous runs of
// equal estimated cost (a query block costs as many tiles as it sees key blocks), one per thread.
// The backward pass runs whole pairs per thread when there are enough pairs to keep every thread
// busy; otherwise it splits each pair into independent items, (pair, key block) for dK and dV and
// (pair, query block) for dQ, at the price of computing P and dS twice. Both ways add the same
// products in the same order, so the bits do not depend on the thread count; and each variant runs
// the same chains of fused multiply-adds (the scalar one through std::fma), the same elementwise
// fp32 code (the file is built with -ffp-contract=off) and the same fixed-lane sums, so they do not
// depend on the instruction set either.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_rope.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

// Block sizes: a 64 x 64 fp32 tile is 16 KiB, so a tile of scores, the key block it multiplies and
// the queries' rows fit in L1 together. Fixed (not per ISA): they decide the online softmax's
// rescaling steps, hence the bits.
constexpr std::size_t kBlockRows = 64;
constexpr std::size_t kBlockCols = 64;
// Rows per micro-kernel call, the same for every ISA because the masked k ranges depend on it.
constexpr std::size_t kTileRows = 6;
// Fixed lanes of the elementwise sums and maxima: element c goes to lane c % kLanes.
constexpr std::size_t kLanes = 16;
static_assert(kBlockCols % kLanes == 0 && kLanes == 16, "key blocks are whole chunks of 16-float vectors");
// 0, 1, ..., kLanes - 1: the column index of each lane of a chunk, for the causal mask.
alignas(64) constexpr float kLaneIndex[kLanes] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
// Below this much work (about B * T * T * C / 2 multiply-adds) a pass runs on the calling thread.
constexpr std::size_t kMinParallelWork = std::size_t{1} << 15;
// The backward pass's split items redo S, P, dP and dS: 8 instead of 5 products per tile.
constexpr double kSplitBackwardCost = 8.0 / 5.0;

std::size_t round_up(std::size_t n, std::size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

struct Shape {
  std::size_t batch;
  std::size_t seq_len;
  std::size_t channels;  // NH * hs: out's row
  std::size_t heads;     // NH
  std::size_t kv_heads;  // NKV
  std::size_t group;     // NH / NKV query heads per K/V head
  std::size_t row;       // (NH + 2 NKV) * hs: qkv's row
  std::size_t head_size;
  std::size_t head_padded;   // head_size rounded up to 16 floats: packed rows are whole vectors
  std::size_t query_blocks;  // ceil(T / kBlockRows)
  std::size_t key_blocks;    // ceil(T / kBlockCols)
  float scale;
  AttentionRope rope;  // the rotation applied to q and k rows as they are loaded (none when inactive)
  // q and k rows are always copied (rotated) into scratch when the rotation is fused, else only when
  // hs is not a multiple of 16.
  bool copy_qk_rows() const { return head_size != head_padded || rope.active(); }
  // Column offsets in a qkv row: query head h at h * hs, K/V head g at k_offset / v_offset + g * hs.
  std::size_t k_offset() const { return heads * head_size; }
  std::size_t v_offset() const { return (heads + kv_heads) * head_size; }
  // A (batch, query head) pair's (batch, K/V head) pair: query head h reads K/V head h / group.
  std::size_t kv_pair_of(std::size_t pair) const { return pair / heads * kv_heads + pair % heads / group; }
};

struct ForwardArgs {
  float* out;
  float* lse;
  const float* qkv;
  Shape shape;
};

struct BackwardArgs {
  float* dqkv;
  const float* dout;
  const float* qkv;
  const float* out;
  const float* lse;
  Shape shape;
};

// A run of floats inside a thread's arena (see thread_arena below).
struct Buffer {
  float* ptr = nullptr;
  std::size_t size = 0;
  float* data() const { return ptr; }
  float* begin() const { return ptr; }
  float* end() const { return ptr + size; }
  float& operator[](std::size_t i) const { return ptr[i]; }
};

// T rows of one head's hs values, `stride` floats apart: either the caller's array, read in place
// when a row is a whole number of vectors (hs a multiple of 16), or a padded copy in scratch.
struct Rows {
  const float* data = nullptr;
  std::size_t stride = 0;
  const float* row(std::size_t t) const { return data + t * stride; }
};

// The calling thread's scratch memory, reused from call to call (OpenMP keeps its worker threads),
// so a pass neither maps fresh pages nor takes page faults on them. Holds the largest scratch the
// thread has needed so far, O(T * hs) floats.
std::vector<float>& thread_arena() {
  thread_local std::vector<float> arena;
  return arena;
}

// Hands out zeroed Buffers from the thread's arena; the arena is sized and zeroed once up front.
class Carver {
 public:
  explicit Carver(std::size_t total) : arena_(thread_arena()) { arena_.assign(total, 0.0f); }
  Buffer take(std::size_t n) {
    Buffer buffer{arena_.data() + used_, n};
    used_ += n;
    return buffer;
  }

 private:
  std::vector<float>& arena_;
  std::size_t used_ = 0;
};

// One thread's forward scratch. packed_kv names the (batch, K/V head) pair whose keys (and values)
// are packed: consecutive query heads of one group reuse them.
struct ForwardScratch {
  static std::size_t floats(const Shape& s) {
    return s.key_blocks * s.head_size * kBlockCols + (s.head_size == s.head_padded ? 0 : s.seq_len * s.head_padded) +
           kBlockRows * s.head_padded + kBlockRows * kBlockCols + kBlockRows * s.head_padded + 2 * kBlockRows +
           s.head_padded;
  }
  explicit ForwardScratch(const Shape& s) : carver(floats(s)) {
    keys_t = carver.take(s.key_blocks * s.head_size * kBlockCols);
    values = carver.take(s.head_size == s.head_padded ? 0 : s.seq_len * s.head_padded);
    queries = carver.take(kBlockRows * s.head_padded);
    scores = carver.take(kBlockRows * kBlockCols);
    acc = carver.take(kBlockRows * s.head_padded);
    row_max = carver.take(kBlockRows);
    row_sum = carver.take(kBlockRows);
    rotated = carver.take(s.head_padded);
  }
  Carver carver;
  Buffer keys_t;    // per key block j: [hs, kBlockCols], k transposed
  Buffer values;    // [T, hsp] when hs is not a multiple of 16, else empty
  Buffer queries;   // [kBlockRows, hsp]: the query block
  Buffer scores;    // [kBlockRows, kBlockCols]: S, then P in place
  Buffer acc;       // [kBlockRows, hsp]: unnormalised output rows
  Buffer row_max;   // [kBlockRows]: running max of the scaled scores
  Buffer row_sum;   // [kBlockRows]: running sum of exp(score - max)
  Buffer rotated;   // [hsp]: one rotated k row on its way into keys_t
  Rows value_rows;  // the K/V pair's v rows: in qkv or in `values`
  std::size_t packed_kv = std::numeric_limits<std::size_t>::max();
};

// One thread's backward scratch: the K/V pair named by packed_kv (keys_t, values_t, keys) and the
// query pair named by packed_pair (queries, dout, delta).
struct BackwardScratch {
  static std::size_t floats(const Shape& s) {
    const std::size_t rows = s.seq_len * s.head_padded;
    const std::size_t qk_rows = s.copy_qk_rows() ? 2 * rows : 0;
    const std::size_t dout_rows = s.head_size == s.head_padded ? 0 : rows;
    return 2 * s.key_blocks * s.head_size * kBlockCols + qk_rows + dout_rows + 3 * rows + s.seq_len +
           2 * kBlockRows * kBlockCols + 2 * kBlockCols * s.head_padded + s.head_padded;
  }
  explicit BackwardScratch(const Shape& s) : carver(floats(s)) {
    const std::size_t rows = s.seq_len * s.head_padded;
    keys_t = carver.take(s.key_blocks * s.head_size * kBlockCols);
    values_t = carver.take(s.key_blocks * s.head_size * kBlockCols);
    queries = carver.take(s.copy_qk_rows() ? rows : 0);
    keys = carver.take(s.copy_qk_rows() ? rows : 0);
    dout = carver.take(s.head_size == s.head_padded ? 0 : rows);
    dq = carver.take(s.seq_len * s.head_padded);
    delta = carver.take(s.seq_len);
    probs = carver.take(kBlockRows * kBlockCols);
    dscores = carver.take(kBlockRows * kBlockCols);
    dk = carver.take(kBlockCols * s.head_padded);
    dv = carver.take(kBlockCols * s.head_padded);
    group_dk = carver.take(s.seq_len * s.head_padded);
    group_dv = carver.take(s.seq_len * s.head_padded);
    rotated = carver.take(s.head_padded);
  }
  Carver carver;
  Buffer keys_t;    // per key block j: [hs, kBlockCols], k transposed
  Buffer values_t;  // per key block j: [hs, kBlockCols], v transposed
  Buffer queries;   // [T, hsp] when copy_qk_rows(), else empty (and likewise keys)
  Buffer dout;      // [T, hsp] when hs is not a multiple of 16, else empty
  Buffer keys;      // [T, hsp]
  Buffer dq;        // [T, hsp]: dQ accumulated over key blocks
  Buffer delta;     // [T]: D[t] = dot(dout[t], out[t])
  Buffer probs;     // [kBlockRows, kBlockCols]: S, then P in place
  Buffer dscores;   // [kBlockRows, kBlockCols]: dP, then dS in place
  Buffer dk;        // [kBlockCols, hsp]: dK of one key block
  Buffer dv;        // [kBlockCols, hsp]: dV of one key block
  Buffer group_dk;  // [T, hsp]: dK summed over the group's query heads, head by head in order
  Buffer group_dv;  // [T, hsp]: the same for dV
  Buffer rotated;   // [hsp]: one rotated row (a k row into keys_t, a dq or dk row into dqkv)
  Rows query_rows;  // the pair's q, k and dout rows: in the caller's arrays or in the copies above
  Rows key_rows;
  Rows dout_rows;
  std::size_t packed_kv = std::numeric_limits<std::size_t>::max();
  std::size_t packed_pair = std::numeric_limits<std::size_t>::max();
};

// dot(a, b) over n elements in kLanes fixed lanes (element d in lane d % kLanes, lanes added in
// order): vectorises without reassociating, so every variant gives the same bits.
[[gnu::always_inline]] inline float lane_dot(const float* a, const float* b, std::size_t n) {
  float lanes[kLanes] = {};
  for (std::size_t d = 0; d < n; ++d) lanes[d % kLanes] += a[d] * b[d];
  float total = 0.0f;
  for (std::size_t l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

// ---- The three compilations of attention_tiles.h --------------------------------------------------

namespace scalar {
using Vec = float;
constexpr std::size_t kWidth = 1;
constexpr std::size_t kMaxVectors = 4;
[[gnu::always_inline]] inline Vec zero() { return 0.0f; }
[[gnu::always_inline]] inline Vec load(const float* p) { return *p; }
[[gnu::always_inline]] inline void store(float* p, Vec v) { *p = v; }
[[gnu::always_inline]] inline Vec broadcast(float x) { return x; }
// Fused like the vector variants' FMA instructions, so all agree bit for bit.
[[gnu::always_inline]] inline Vec fma(Vec a, Vec b, Vec c) { return std::fma(a, b, c); }
[[gnu::always_inline]] inline Vec add(Vec a, Vec b) { return a + b; }
[[gnu::always_inline]] inline Vec sub(Vec a, Vec b) { return a - b; }
[[gnu::always_inline]] inline Vec mul(Vec a, Vec b) { return a * b; }
// MAXPS's rule (the second operand unless the first is greater), so a max of -0 and +0 comes out
// with the same sign as in the vector variants.
[[gnu::always_inline]] inline Vec max(Vec a, Vec b) { return a > b ? a : b; }
[[gnu::always_inline]] inline Vec select_lt(Vec a, Vec b, Vec if_less, Vec otherwise) {
  return a < b ? if_less : otherwise;
}
[[gnu::always_inline]] inline Vec exp_flushed(Vec x) { return simd::exp_approx_flushed(x); }
#include "kernels/cpu/attention_tiles.h"  // NOLINT(build/include): compiled once per ISA
}  // namespace scalar

#if ZINF_KERNELS_X86
// The target strings are those of ZINF_TARGET_AVX2 and ZINF_TARGET_AVX512 (simd.h).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace avx2 {
using Vec = __m256;
constexpr std::size_t kWidth = 8;
constexpr std::size_t kMaxVectors = 2;  // 6 x 2 accumulators + 2 loads + 1 broadcast of 16 registers
[[gnu::always_inline]] inline Vec zero() { return _mm256_setzero_ps(); }
[[gnu::always_inline]] inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
[[gnu::always_inline]] inline void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
[[gnu::always_inline]] inline Vec broadcast(float x) { return _mm256_set1_ps(x); }
[[gnu::always_inline]] inline Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
[[gnu::always_inline]] inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
[[gnu::always_inline]] inline Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
[[gnu::always_inline]] inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
[[gnu::always_inline]] inline Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
[[gnu::always_inline]] inline Vec select_lt(Vec a, Vec b, Vec if_less, Vec otherwise) {
  return _mm256_blendv_ps(otherwise, if_less, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
[[gnu::always_inline]] inline Vec min(Vec a, Vec b) { return _mm256_min_ps(a, b); }
// 2^n for whole-numbered n in [-126, 127], from the exponent bits.
[[gnu::always_inline]] inline Vec pow2(Vec n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23));
}
#include "kernels/cpu/attention_vector_exp.h"  // NOLINT(build/include): compiled once per ISA
// attention_tiles.h uses exp_flushed from attention_vector_exp.h: keep this order.
#include "kernels/cpu/attention_tiles.h"  // NOLINT(build/include): compiled once per ISA
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")
#endif
namespace avx512 {
using Vec = __m512;
constexpr std::size_t kWidth = 16;
constexpr std::size_t kMaxVectors = 4;  // 6 x 4 accumulators + 4 loads + 1 broadcast of 32 registers
[[gnu::always_inline]] inline Vec zero() { return _mm512_setzero_ps(); }
[[gnu::always_inline]] inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
[[gnu::always_inline]] inline void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
[[gnu::always_inline]] inline Vec broadcast(float x) { return _mm512_set1_ps(x); }
[[gnu::always_inline]] inline Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
[[gnu::always_inline]] inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
[[gnu::always_inline]] inline Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
[[gnu::always_inline]] inline Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
[[gnu::always_inline]] inline Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
[[gnu::always_inline]] inline Vec select_lt(Vec a, Vec b, Vec if_less, Vec otherwise) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), otherwise, if_less);
}
[[gnu::always_inline]] inline Vec min(Vec a, Vec b) { return _mm512_min_ps(a, b); }
[[gnu::always_inline]] inline Vec pow2(Vec n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23));
}
#include "kernels/cpu/attention_vector_exp.h"  // NOLINT(build/include): compiled once per ISA
// attention_tiles.h uses exp_flushed from attention_vector_exp.h: keep this order.
#include "kernels/cpu/attention_tiles.h"  // NOLINT(build/include): compiled once per ISA
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // ZINF_KERNELS_X86

using ForwardFn = void (*)(const ForwardArgs&, ForwardScratch&, std::size_t, std::size_t);
using BackwardFn = void (*)(const BackwardArgs&, BackwardScratch&, std::size_t, std::size_t);

constexpr ForwardFn forward_scalar = scalar::forward_items;
constexpr BackwardFn backward_pairs_scalar = scalar::backward_pairs;
constexpr BackwardFn backward_items_scalar = scalar::backward_items;
#if ZINF_KERNELS_X86
constexpr ForwardFn forward_avx2 = avx2::forward_items;
constexpr BackwardFn backward_pairs_avx2 = avx2::backward_pairs;
constexpr BackwardFn backward_items_avx2 = avx2::backward_items;
constexpr ForwardFn forward_avx512 = avx512::forward_items;
constexpr BackwardFn backward_pairs_avx512 = avx512::backward_pairs;
constexpr BackwardFn backward_items_avx512 = avx512::backward_items;
#endif

Shape make_shape(std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads, std::size_t kv_heads,
                 const AttentionRope& rope) {
  const std::size_t head_size = channels / heads;
  return {batch,
          seq_len,
          channels,
          heads,
          kv_heads,
          heads / kv_heads,
          (heads + 2 * kv_heads) * head_size,
          head_size,
          round_up(head_size, 16),
          (seq_len + kBlockRows - 1) / kBlockRows,
          (seq_len + kBlockCols - 1) / kBlockCols,
          static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_size))),
          rope};
}

// The thread count for a pass over `shape`: one thread when the work is too small to split.
int pass_threads(const Shape& shape, int num_threads) {
  const std::size_t work = shape.batch * shape.seq_len * shape.seq_len * shape.channels / 2;
  return work < kMinParallelWork ? 1 : parallel::resolve_threads(num_threads);
}

// Tiles a query block sees (forward, and the backward dQ items), and query blocks that see a key
// block (the backward dK/dV items): the cost estimates of the work items.
std::size_t tiles_of_query_block(std::size_t block) { return (block * kBlockRows + kBlockRows - 1) / kBlockCols + 1; }

// Runs fn(begin, end) over items [0, prefix.size()) on `threads` threads, each thread taking one
// contiguous run whose summed cost is about a 1/threads share; prefix[i] is the summed cost of
// items 0..i. Returns when all runs are done.
template <typename Fn>
void run_balanced(const std::vector<double>& prefix, int threads, const Fn& fn) {
  const std::size_t n = prefix.size();
  if (threads <= 1 || n < 2) {
    fn(std::size_t{0}, n);
    return;
  }
  parallel::run_team(threads, [&](std::size_t team, std::size_t index) {
    const double total = prefix.back();
    // The first item whose running total exceeds the share before it.
    const auto start_of = [&](std::size_t k) -> std::size_t {
      if (k == 0) return 0;
      if (k >= team) return n;
      const double share = total * static_cast<double>(k) / static_cast<double>(team);
      return static_cast<std::size_t>(std::upper_bound(prefix.begin(), prefix.end(), share) - prefix.begin());
    };
    const std::size_t begin = start_of(index);
    const std::size_t end = start_of(index + 1);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace

void attention_forward(Isa isa, float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq_len,
                       std::size_t channels, std::size_t heads, std::size_t kv_heads, const AttentionRope& rope,
                       int num_threads) {
  const ForwardFn fn = ZINF_KERNEL_VARIANT(isa, forward);
  const ForwardArgs args{out, lse, qkv, make_shape(batch, seq_len, channels, heads, kv_heads, rope)};
  const Shape& s = args.shape;
  std::vector<double> prefix(batch * heads * s.query_blocks);
  double total = 0.0;
  for (std::size_t item = 0; item < prefix.size(); ++item) {
    total += static_cast<double>(tiles_of_query_block(item % s.query_blocks));
    prefix[item] = total;
  }
  run_balanced(prefix, pass_threads(s, num_threads), [&](std::size_t begin, std::size_t end) {
    ForwardScratch scratch(s);
    fn(args, scratch, begin, end);
  });
}

void attention_backward(Isa isa, float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                        std::size_t kv_heads, const AttentionRope& rope, int num_threads) {
  const BackwardArgs args{dqkv, dout, qkv, out, lse, make_shape(batch, seq_len, channels, heads, kv_heads, rope)};
  const Shape& s = args.shape;
  const int threads = pass_threads(s, num_threads);
  const std::size_t pairs = batch * heads;
  const std::size_t kv_pairs = batch * kv_heads;
  // Whole K/V pairs (each the work of `group` query pairs) take ceil(kv_pairs / threads) rounds;
  // split items about kSplitBackwardCost * pairs / threads. Whole pairs win ties (no duplicated work).
  const double whole_rounds = static_cast<double>((kv_pairs + static_cast<std::size_t>(threads) - 1) /
                                                  static_cast<std::size_t>(threads) * s.group);
  const double split_rounds = kSplitBackwardCost * static_cast<double>(pairs) / threads;
  if (threads <= 1 || whole_rounds <= split_rounds) {
    const BackwardFn fn = ZINF_KERNEL_VARIANT(isa, backward_pairs);
    parallel::for_each_range(kv_pairs, 2, 1, threads, [&](std::size_t begin, std::size_t end) {
      BackwardScratch scratch(s);
      fn(args, scratch, begin, end);
    });
    return;
  }
  const BackwardFn fn = ZINF_KERNEL_VARIANT(isa, backward_items);
  std::vector<double> prefix;
  prefix.reserve(kv_pairs * s.key_blocks + pairs * s.query_blocks);
  double total = 0.0;
  for (std::size_t kv = 0; kv < kv_pairs; ++kv) {
    for (std::size_t j = 0; j < s.key_blocks; ++j) {
      // Query blocks from the one holding row j * kBlockCols to the end, for each head of the group.
      total += static_cast<double>((s.query_blocks - j * kBlockCols / kBlockRows) * s.group);
      prefix.push_back(total);
    }
  }
  for (std::size_t pair = 0; pair < pairs; ++pair) {
    for (std::size_t i = 0; i < s.query_blocks; ++i) {
      total += static_cast<double>(tiles_of_query_block(i));
      prefix.push_back(total);
    }
  }
  run_balanced(prefix, threads, [&](std::size_t begin, std::size_t end) {
    BackwardScratch scratch(s);
    fn(args, scratch, begin, end);
  });
}

void attention_forward(Isa isa, float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq_len,
                       std::size_t channels, std::size_t heads, std::size_t kv_heads, int num_threads) {
  attention_forward(isa, out, lse, qkv, batch, seq_len, channels, heads, kv_heads, AttentionRope{}, num_threads);
}

void attention_backward(Isa isa, float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                        std::size_t kv_heads, int num_threads) {
  attention_backward(isa, dqkv, dout, qkv, out, lse, batch, seq_len, channels, heads, kv_heads, AttentionRope{},
                     num_threads);
}

void attention_forward(float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq_len,
                       std::size_t channels, std::size_t heads, std::size_t kv_heads, int num_threads) {
  attention_forward(best_isa(), out, lse, qkv, batch, seq_len, channels, heads, kv_heads, num_threads);
}

void attention_forward(float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq_len,
                       std::size_t channels, std::size_t heads, std::size_t kv_heads, const AttentionRope& rope,
                       int num_threads) {
  attention_forward(best_isa(), out, lse, qkv, batch, seq_len, channels, heads, kv_heads, rope, num_threads);
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                        std::size_t kv_heads, const AttentionRope& rope, int num_threads) {
  attention_backward(best_isa(), dqkv, dout, qkv, out, lse, batch, seq_len, channels, heads, kv_heads, rope,
                     num_threads);
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                        std::size_t kv_heads, int num_threads) {
  attention_backward(best_isa(), dqkv, dout, qkv, out, lse, batch, seq_len, channels, heads, kv_heads, num_threads);
}

}  // namespace zinf::kernels::cpu
