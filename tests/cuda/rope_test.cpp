// cuda::rope_forward/backward against the CPU kernels (kernels/rope.h), in the fused qkv layout
// (NH query heads, NKV key heads, NKV value heads per row; the first NH + NKV rotate): head sizes 6,
// 18, 64 with rotary_dim 16, Phi-2's 80 with 32, 128, TinyLlama's 32/4 heads of 64; one row,
// position offsets; in place and out of place; every element type.
//
// Both sides do the same fp32 operations unfused (the GPU through __fmul_rn/__fadd_rn/__fsub_rn), on
// the same rounded inputs and the same fp32 tables, and round the fp32 result once to `elem`, so the
// results must be equal bit for bit, not merely close. Out of place, the value heads must stay as
// the poison left them (NaN), and the pass-through dimensions must be copied.
#include "kernels/rope.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

struct QkvShape {
  std::size_t batch, seq_len, q_heads, kv_heads, head_dim, rotary_dim, pos_offset;

  std::size_t row_stride() const { return (q_heads + 2 * kv_heads) * head_dim; }
  std::size_t size() const { return batch * seq_len * row_stride(); }
  std::size_t rotated() const { return (q_heads + kv_heads) * head_dim; }  // leading elements of a row
  kernels::cpu::RopeShape rope() const {
    return {batch, seq_len, row_stride(), q_heads + kv_heads, head_dim, rotary_dim, pos_offset};
  }
};

// Element-by-element equality where a row's rotated heads are compared, and NaN (untouched poison)
// required elsewhere when `poisoned_rest`.
void require_rotated_equal(const std::vector<float>& got, const std::vector<float>& want, const QkvShape& s,
                           bool poisoned_rest) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool rotated = i % s.row_stride() < s.rotated();
    if (rotated || !poisoned_rest) {
      if (got[i] != want[i]) {
        INFO("element " << i << ": got " << got[i] << ", expected " << want[i]);
        REQUIRE(got[i] == want[i]);
      }
    } else if (!std::isnan(got[i])) {
      INFO("element " << i << " outside the rotated heads was written: " << got[i]);
      REQUIRE(std::isnan(got[i]));
    }
  }
}

void check_rope(Elem elem, const QkvShape& s) {
  INFO("elem " << static_cast<int>(elem) << ", B " << s.batch << " T " << s.seq_len << " NH " << s.q_heads << " NKV "
               << s.kv_heads << " hd " << s.head_dim << " rd " << s.rotary_dim << " offset " << s.pos_offset);
  const std::size_t half = s.rotary_dim / 2;
  const std::size_t positions = s.pos_offset + s.seq_len;
  kernels::RopeFrequencies f;
  f.rotary_dim = s.rotary_dim;
  f.theta = 500000.0;
  f.scaling = kernels::RopeScaling::kLlama3;
  f.factor = 8.0;
  std::vector<float> inv(half);
  kernels::rope_inv_freq(inv.data(), f);
  std::vector<float> cos(positions * half);
  std::vector<float> sin(positions * half);
  kernels::rope_tables(cos.data(), sin.data(), inv.data(), half, positions);
  DeviceArray cos_d(cos);
  DeviceArray sin_d(sin);

  const std::vector<float> inp = round_to(elem, random_values(s.size(), 21 + s.head_dim, 2.0f));
  std::vector<float> want = inp;
  kernels::cpu::rope_forward(want.data(), want.data(), cos.data(), sin.data(), s.rope(), 1);
  want = round_to(elem, want);

  // Out of place into poison: rotated heads equal, value heads untouched.
  DeviceArray inp_d(inp, elem);
  DeviceArray out_d(elem, s.size());
  out_d.poison();
  REQUIRE(kernels::cuda::rope_forward(elem, out_d.data(), inp_d.data(), cos_d.f32(), sin_d.f32(), s.rope(), nullptr) ==
          0);
  require_rotated_equal(out_d.download(), want, s, true);
  // In place.
  REQUIRE(kernels::cuda::rope_forward(elem, inp_d.data(), inp_d.data(), cos_d.f32(), sin_d.f32(), s.rope(), nullptr) ==
          0);
  require_rotated_equal(inp_d.download(), want, s, false);

  // Backward, in place and out of place.
  const std::vector<float> dout = round_to(elem, random_values(s.size(), 31 + s.head_dim, 1.0f));
  std::vector<float> dwant = dout;
  kernels::cpu::rope_backward(dwant.data(), dwant.data(), cos.data(), sin.data(), s.rope(), 1);
  dwant = round_to(elem, dwant);
  DeviceArray dout_d(dout, elem);
  DeviceArray dinp_d(elem, s.size());
  dinp_d.poison();
  REQUIRE(kernels::cuda::rope_backward(elem, dinp_d.data(), dout_d.data(), cos_d.f32(), sin_d.f32(), s.rope(),
                                       nullptr) == 0);
  require_rotated_equal(dinp_d.download(), dwant, s, true);
  REQUIRE(kernels::cuda::rope_backward(elem, dout_d.data(), dout_d.data(), cos_d.f32(), sin_d.f32(), s.rope(),
                                       nullptr) == 0);
  require_rotated_equal(dout_d.download(), dwant, s, false);
}

TEST_CASE("cuda rope: forward and backward equal the CPU bit for bit", "[cuda][rope]") {
  const QkvShape shapes[] = {
      {2, 5, 3, 1, 6, 6, 0},       // head_dim 6, one K/V head
      {1, 1, 2, 2, 18, 18, 3},     // one row, head_dim 18, offset positions
      {2, 7, 4, 2, 64, 16, 11},    // partial: 16 of 64 rotate
      {1, 9, 2, 1, 80, 32, 100},   // Phi-2's head
      {3, 33, 4, 4, 128, 128, 0},  // head_dim 128
      {2, 70, 32, 4, 64, 64, 5},   // TinyLlama's heads
  };
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (const QkvShape& s : shapes) check_rope(elem, s);
  }
}

TEST_CASE("cuda rope: no rows does nothing, a bad rotary_dim is refused", "[cuda][rope]") {
  kernels::cpu::RopeShape empty{0, 4, 192, 2, 64, 64, 0};
  REQUIRE(kernels::cuda::rope_forward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, empty, nullptr) == 0);
  DeviceArray x(Elem::kF32, 4 * 192);
  DeviceArray table(Elem::kF32, 4 * 32);
  kernels::cpu::RopeShape odd{1, 4, 192, 2, 64, 63, 0};
  REQUIRE(kernels::cuda::rope_forward(Elem::kF32, x.data(), x.data(), table.f32(), table.f32(), odd, nullptr) != 0);
  kernels::cpu::RopeShape wide{1, 4, 192, 2, 64, 66, 0};
  REQUIRE(kernels::cuda::rope_backward(Elem::kF32, x.data(), x.data(), table.f32(), table.f32(), wide, nullptr) != 0);
}

}  // namespace
}  // namespace zinf::cuda_test
