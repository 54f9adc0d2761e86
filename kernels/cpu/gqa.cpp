// CPU grouped-query K/V expansion and its gradient's reduction (kernels/gqa.h has the layouts and
// the contract). Plain row copies and in-order fp32 sums; the compiler vectorises the inner loops.
#include "kernels/gqa.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/parallel.h"

namespace zinf::kernels::cpu {
namespace {

// Below this many elements per call a pass runs on the calling thread.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 16;

std::size_t packed_width(const GqaShape& s) { return (s.heads + 2 * s.kv_heads) * s.head_dim; }
std::size_t full_width(const GqaShape& s) { return 3 * s.heads * s.head_dim; }

template <typename Body>
void for_rows(const GqaShape& s, int num_threads, const Body& body) {
  const std::size_t min_rows = kMinParallelElements / std::max<std::size_t>(full_width(s), 1) + 1;
  parallel::for_each_range(s.rows, min_rows, 1, parallel::resolve_threads(num_threads), body);
}

}  // namespace

void gqa_expand(float* full, const float* packed, const GqaShape& s, int num_threads) {
  const std::size_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim, group = s.heads / s.kv_heads;
  const std::size_t hd = s.head_dim;
  for_rows(s, num_threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      const float* src = packed + r * packed_width(s);
      float* dst = full + r * full_width(s);
      std::memcpy(dst, src, q * sizeof(float));
      for (std::size_t part = 0; part < 2; ++part) {
        const float* from = src + q + part * kv;
        float* to = dst + q + part * q;
        for (std::size_t h = 0; h < s.heads; ++h) std::memcpy(to + h * hd, from + (h / group) * hd, hd * sizeof(float));
      }
    }
  });
}

void gqa_reduce(float* dpacked, const float* dfull, const GqaShape& s, int num_threads) {
  const std::size_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim, group = s.heads / s.kv_heads;
  const std::size_t hd = s.head_dim;
  for_rows(s, num_threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      const float* src = dfull + r * full_width(s);
      float* dst = dpacked + r * packed_width(s);
      std::memcpy(dst, src, q * sizeof(float));
      for (std::size_t part = 0; part < 2; ++part) {
        const float* from = src + q + part * q;
        float* to = dst + q + part * kv;
        for (std::size_t g = 0; g < s.kv_heads; ++g) {
          float* out = to + g * hd;
          std::memcpy(out, from + g * group * hd, hd * sizeof(float));
          for (std::size_t j = 1; j < group; ++j) {
            const float* add = from + (g * group + j) * hd;
            for (std::size_t d = 0; d < hd; ++d) out[d] += add[d];
          }
        }
      }
    }
  });
}

}  // namespace zinf::kernels::cpu
