// Grouped-query attention on the CPU: the causal attention kernel (kernels/attention.h) on the
// packed [q | k | v] layout with NKV <= NH, against an fp64 reference that reads each query head's
// K/V head directly from the packed rows, forward, and backward against central finite differences
// of that reference; shapes with head_dim not a multiple of 8, MQA (one K/V head), groups of 1, 2,
// 3, 4 and 8, on every instruction set the machine runs (bit-identical across them and across
// thread counts). And the kernel's group sums against the layout kernels of kernels/gqa.h:
// gqa_expand, the kernel with one K/V per query head and gqa_reduce give the same bits, including
// sequences of several 64-row blocks and the backward's split work items. Also the reduction's
// fixed summation order, bit for bit.
#include "kernels/gqa.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using test_support::count_misses;
using test_support::finite_difference;
using test_support::scale_of;
using test_support::uniform_values;
using test_support::widen;

struct Dims {
  std::size_t batch, seq_len, heads, kv_heads, head_dim;
  std::size_t packed_width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::size_t rows() const { return batch * seq_len; }
  GqaShape gqa() const { return {rows(), heads, kv_heads, head_dim}; }
};

// out [B,T,NH*hd] of causal attention where query head h attends with K/V head h / (NH/NKV), read
// straight from the packed rows.
std::vector<double> reference_forward(const std::vector<double>& packed, const Dims& d) {
  const std::size_t width = d.packed_width(), q = d.heads * d.head_dim, kv = d.kv_heads * d.head_dim;
  const std::size_t group = d.heads / d.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.head_dim));
  std::vector<double> out(d.rows() * q, 0.0);
  std::vector<double> p(d.seq_len);
  for (std::size_t b = 0; b < d.batch; ++b) {
    for (std::size_t h = 0; h < d.heads; ++h) {
      const std::size_t g = h / group;
      const auto row = [&](std::size_t t) { return packed.data() + (b * d.seq_len + t) * width; };
      for (std::size_t t = 0; t < d.seq_len; ++t) {
        double max = -std::numeric_limits<double>::infinity();
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          double s = 0.0;
          for (std::size_t i = 0; i < d.head_dim; ++i)
            s += row(t)[h * d.head_dim + i] * row(t2)[q + g * d.head_dim + i];
          p[t2] = s * scale;
          max = std::max(max, p[t2]);
        }
        double sum = 0.0;
        for (std::size_t t2 = 0; t2 <= t; ++t2) sum += std::exp(p[t2] - max);
        for (std::size_t i = 0; i < d.head_dim; ++i) {
          double o = 0.0;
          for (std::size_t t2 = 0; t2 <= t; ++t2)
            o += std::exp(p[t2] - max) / sum * row(t2)[q + kv + g * d.head_dim + i];
          out[(b * d.seq_len + t) * q + h * d.head_dim + i] = o;
        }
      }
    }
  }
  return out;
}

using cpu::Isa;
using test_support::supported_isas;

struct Run {
  std::vector<float> out, dpacked;
};

// The kernel on the packed rows, fp32, with `threads` threads: forward, then backward of
// sum(out * probe) into a dpacked that starts at `start` (the kernel accumulates).
Run run_packed(Isa isa, const std::vector<float>& packed, const std::vector<float>& probe, const Dims& d, int threads,
               float start = 0.0f) {
  const std::size_t q = d.heads * d.head_dim;
  std::vector<float> out(d.rows() * q), lse(d.batch * d.heads * d.seq_len);
  cpu::attention_forward(isa, out.data(), lse.data(), packed.data(), d.batch, d.seq_len, q, d.heads, d.kv_heads,
                         threads);
  std::vector<float> dpacked(packed.size(), start);
  cpu::attention_backward(isa, dpacked.data(), probe.data(), packed.data(), out.data(), lse.data(), d.batch, d.seq_len,
                          q, d.heads, d.kv_heads, threads);
  return {out, dpacked};
}

// The same through the layout kernels: expand, attention with one K/V per query head, reduce.
Run run_expanded(const std::vector<float>& packed, const std::vector<float>& probe, const Dims& d, int threads) {
  const std::size_t q = d.heads * d.head_dim;
  std::vector<float> full(d.rows() * 3 * q), out(d.rows() * q), lse(d.batch * d.heads * d.seq_len);
  cpu::gqa_expand(full.data(), packed.data(), d.gqa(), threads);
  cpu::attention_forward(out.data(), lse.data(), full.data(), d.batch, d.seq_len, q, d.heads, d.heads, threads);
  std::vector<float> dfull(full.size(), 0.0f), dpacked(packed.size(), -7.0f);  // reduce writes (=)
  cpu::attention_backward(dfull.data(), probe.data(), full.data(), out.data(), lse.data(), d.batch, d.seq_len, q,
                          d.heads, d.heads, threads);
  cpu::gqa_reduce(dpacked.data(), dfull.data(), d.gqa(), threads);
  return {out, dpacked};
}

TEST_CASE("gqa: the attention kernel on packed q|k|v matches an fp64 grouped reference and its finite differences",
          "[kernels][gqa]") {
  // head_dim 10, 6, 12, 5, 3 (none a multiple of 8); groups of 3, 4 (MQA), 2, 1 (MHA), 8 (MQA), 8.
  const Dims d = GENERATE(Dims{2, 7, 6, 2, 10}, Dims{1, 9, 4, 1, 6}, Dims{2, 5, 4, 2, 12}, Dims{1, 6, 3, 3, 10},
                          Dims{1, 5, 8, 1, 5}, Dims{1, 4, 16, 2, 3});
  std::mt19937_64 rng(7 + d.heads * 10 + d.kv_heads);
  const auto packed = uniform_values(d.rows() * d.packed_width(), -1.5f, 1.5f, rng);
  const auto probe = uniform_values(d.rows() * d.heads * d.head_dim, -1.0f, 1.0f, rng);
  std::vector<double> x = widen(packed);
  const std::vector<double> probe_d = widen(probe);
  const std::vector<double> out_ref = reference_forward(x, d);
  const std::vector<double> grad_ref = finite_difference(x, [&] {
    const auto out = reference_forward(x, d);
    double sum = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * probe_d[i];
    return sum;
  });
  const Run first = run_packed(supported_isas().front(), packed, probe, d, 1);
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 3}) {
      INFO("NH=" << d.heads << " NKV=" << d.kv_heads << " hd=" << d.head_dim << ", " << cpu::isa_name(isa) << ", "
                 << threads << " threads");
      const Run run = run_packed(isa, packed, probe, d, threads);
      CHECK(count_misses("out", run.out, out_ref, 1e-5, 1e-6 * scale_of(out_ref)) == 0);
      CHECK(count_misses("dpacked", run.dpacked, grad_ref, 1e-4, 1e-5 * scale_of(grad_ref)) == 0);
      CHECK(run.out == first.out);
      CHECK(run.dpacked == first.dpacked);
    }
  }
  // Accumulated, not written: starting from 1 adds exactly 1 (to the bits of 1 + g) everywhere.
  const Run from_one = run_packed(supported_isas().front(), packed, probe, d, 1, 1.0f);
  for (std::size_t i = 0; i < from_one.dpacked.size(); ++i) {
    if (from_one.dpacked[i] != 1.0f + first.dpacked[i]) FAIL_CHECK("dpacked[" << i << "] not accumulated");
  }
}

TEST_CASE("gqa: the kernel's group sums equal expand + attention + reduce bit for bit, over several blocks",
          "[kernels][gqa]") {
  // 130 rows: three 64-row blocks. Threads 1 (whole pairs), 2 and 3 (split items when the groups
  // are few: 1 x 8 heads over 1 K/V head).
  const Dims d = GENERATE(Dims{1, 130, 8, 1, 10}, Dims{2, 70, 6, 2, 16}, Dims{1, 130, 4, 4, 12});
  std::mt19937_64 rng(99 + d.kv_heads);
  const auto packed = uniform_values(d.rows() * d.packed_width(), -1.5f, 1.5f, rng);
  const auto probe = uniform_values(d.rows() * d.heads * d.head_dim, -1.0f, 1.0f, rng);
  const Run expanded = run_expanded(packed, probe, d, 1);
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3}) {
      INFO("T=" << d.seq_len << " NH=" << d.heads << " NKV=" << d.kv_heads << ", " << cpu::isa_name(isa) << ", "
                << threads << " threads");
      const Run run = run_packed(isa, packed, probe, d, threads);
      CHECK(run.out == expanded.out);
      CHECK(run.dpacked == expanded.dpacked);
    }
  }
  const std::vector<double> out_ref = reference_forward(widen(packed), d);
  CHECK(count_misses("out", expanded.out, out_ref, 1e-5, 1e-6 * scale_of(out_ref)) == 0);
}

TEST_CASE("gqa: expand copies, reduce sums each group in increasing order in fp32", "[kernels][gqa]") {
  const Dims d{1, 3, 6, 2, 5};
  std::mt19937_64 rng(5);
  const auto packed = uniform_values(d.rows() * d.packed_width(), -2.0f, 2.0f, rng);
  std::vector<float> full(d.rows() * 3 * d.heads * d.head_dim);
  cpu::gqa_expand(full.data(), packed.data(), d.gqa(), 1);
  const std::size_t q = d.heads * d.head_dim, kv = d.kv_heads * d.head_dim, group = d.heads / d.kv_heads;
  for (std::size_t r = 0; r < d.rows(); ++r) {
    for (std::size_t h = 0; h < d.heads; ++h) {
      for (std::size_t i = 0; i < d.head_dim; ++i) {
        const float* p = packed.data() + r * d.packed_width();
        const float* f = full.data() + r * 3 * q;
        CHECK(f[h * d.head_dim + i] == p[h * d.head_dim + i]);
        CHECK(f[q + h * d.head_dim + i] == p[q + (h / group) * d.head_dim + i]);
        CHECK(f[2 * q + h * d.head_dim + i] == p[q + kv + (h / group) * d.head_dim + i]);
      }
    }
  }
  const auto dfull = uniform_values(full.size(), -2.0f, 2.0f, rng);
  std::vector<float> dpacked(packed.size());
  cpu::gqa_reduce(dpacked.data(), dfull.data(), d.gqa(), 1);
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const float* f = dfull.data() + r * 3 * q;
    const float* p = dpacked.data() + r * d.packed_width();
    for (std::size_t part = 0; part < 2; ++part) {
      for (std::size_t g = 0; g < d.kv_heads; ++g) {
        for (std::size_t i = 0; i < d.head_dim; ++i) {
          float sum = f[q + part * q + g * group * d.head_dim + i];
          for (std::size_t j = 1; j < group; ++j) sum += f[q + part * q + (g * group + j) * d.head_dim + i];
          CHECK(p[q + part * kv + g * d.head_dim + i] == sum);
        }
      }
    }
    for (std::size_t i = 0; i < q; ++i) CHECK(p[i] == f[i]);
  }
}

}  // namespace
}  // namespace zinf::kernels
