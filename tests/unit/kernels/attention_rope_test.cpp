// The rotary embedding fused into the CPU attention (kernels/attention.h's AttentionRope): the
// fused forward and backward against the separate path the model ran before — rope_forward over the
// q and k heads in place, the attention, then the attention's backward into a zeroed dqkv and
// rope_backward over it in place — bit for bit (out, lse, dqkv), on every instruction set the
// machine runs and for 1, 2 and 3 threads (whole pairs and the backward's split items). Shapes:
// head sizes that are and are not a multiple of 16 (the unfused kernel reads the former in place),
// partial rotary dimensions, MQA and groups, several 64-row blocks, a position offset. The separate
// path itself is checked against fp64 in rope_test.cpp, attention_test.cpp and gqa_test.cpp.
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/rope.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using cpu::Isa;
using test_support::supported_isas;
using test_support::uniform_values;

struct Case {
  std::size_t batch, seq_len, heads, kv_heads, head_dim, rotary_dim, pos_offset;
  std::size_t width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::size_t rows() const { return batch * seq_len; }
  std::size_t channels() const { return heads * head_dim; }
};

struct Result {
  std::vector<float> out, lse, dqkv;
};

struct Tables {
  std::vector<float> cos, sin;
};

Tables tables(const Case& c) {
  RopeFrequencies f;
  f.rotary_dim = c.rotary_dim;
  f.theta = 500.0;  // turns fast enough that every dimension pair rotates visibly over 130 positions
  std::vector<float> inv(c.rotary_dim / 2);
  rope_inv_freq(inv.data(), f);
  const std::size_t positions = c.pos_offset + c.seq_len;
  Tables t{std::vector<float>(positions * inv.size()), std::vector<float>(positions * inv.size())};
  rope_tables(t.cos.data(), t.sin.data(), inv.data(), inv.size(), positions);
  return t;
}

Result separate(Isa isa, const std::vector<float>& qkv, const std::vector<float>& dout, const Tables& t, const Case& c,
                int threads) {
  const cpu::RopeShape shape{c.batch,    c.seq_len,    c.width(),   c.heads + c.kv_heads,
                             c.head_dim, c.rotary_dim, c.pos_offset};
  std::vector<float> rotated = qkv;
  cpu::rope_forward(isa, rotated.data(), rotated.data(), t.cos.data(), t.sin.data(), shape, threads);
  Result r{std::vector<float>(c.rows() * c.channels()), std::vector<float>(c.batch * c.heads * c.seq_len),
           std::vector<float>(qkv.size(), 0.0f)};
  cpu::attention_forward(isa, r.out.data(), r.lse.data(), rotated.data(), c.batch, c.seq_len, c.channels(), c.heads,
                         c.kv_heads, threads);
  cpu::attention_backward(isa, r.dqkv.data(), dout.data(), rotated.data(), r.out.data(), r.lse.data(), c.batch,
                          c.seq_len, c.channels(), c.heads, c.kv_heads, threads);
  cpu::rope_backward(isa, r.dqkv.data(), r.dqkv.data(), t.cos.data(), t.sin.data(), shape, threads);
  return r;
}

Result fused(Isa isa, const std::vector<float>& qkv, const std::vector<float>& dout, const Tables& t, const Case& c,
             int threads) {
  const cpu::AttentionRope rope{t.cos.data(), t.sin.data(), c.rotary_dim, c.pos_offset};
  Result r{std::vector<float>(c.rows() * c.channels()), std::vector<float>(c.batch * c.heads * c.seq_len),
           std::vector<float>(qkv.size(), 0.0f)};
  cpu::attention_forward(isa, r.out.data(), r.lse.data(), qkv.data(), c.batch, c.seq_len, c.channels(), c.heads,
                         c.kv_heads, rope, threads);
  cpu::attention_backward(isa, r.dqkv.data(), dout.data(), qkv.data(), r.out.data(), r.lse.data(), c.batch, c.seq_len,
                          c.channels(), c.heads, c.kv_heads, rope, threads);
  return r;
}

TEST_CASE("attention with RoPE fused into the Q/K load equals RoPE pass + attention bit for bit",
          "[model][attention][rope]") {
  const Case c = GENERATE(Case{1, 130, 8, 1, 10, 10, 0}, Case{2, 70, 6, 2, 16, 8, 3}, Case{1, 130, 4, 4, 64, 64, 0},
                          Case{2, 40, 4, 2, 64, 32, 5}, Case{1, 1, 2, 1, 6, 2, 0});
  std::mt19937_64 rng(7 + c.head_dim + c.seq_len);
  const auto qkv = uniform_values(c.rows() * c.width(), -1.5f, 1.5f, rng);
  const auto dout = uniform_values(c.rows() * c.channels(), -1.0f, 1.0f, rng);
  const Tables t = tables(c);
  const Result want = separate(Isa::kScalar, qkv, dout, t, c, 1);
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3}) {
      INFO("T=" << c.seq_len << " NH=" << c.heads << " NKV=" << c.kv_heads << " hd=" << c.head_dim
                << " rd=" << c.rotary_dim << ", " << cpu::isa_name(isa) << ", " << threads << " threads");
      const Result got = fused(isa, qkv, dout, t, c, threads);
      CHECK(got.out == want.out);
      CHECK(got.lse == want.lse);
      CHECK(got.dqkv == want.dqkv);
    }
  }
  // The rotation changes the result (the test would pass vacuously if the tables were identity).
  const cpu::AttentionRope none{};
  std::vector<float> plain(c.rows() * c.channels());
  cpu::attention_forward(Isa::kScalar, plain.data(), nullptr, qkv.data(), c.batch, c.seq_len, c.channels(), c.heads,
                         c.kv_heads, none, 1);
  if (c.seq_len > 1) CHECK(plain != want.out);
}

}  // namespace
}  // namespace zinf::kernels
