// CPU causal multi-head self-attention (kernels/attention.h): the forward pass against an fp64
// reference that builds the full masked [T,T] softmax per head explicitly, the backward pass
// against central finite differences of that reference for L = sum(out * probe) (probe random)
// at small sizes, and at sizes spanning several 64-row blocks (a partial last block included)
// against an fp64 analytic backward that the finite differences validate; causality; and every
// instruction-set variant and several thread counts bit for bit, including the backward pass's
// split items (fewer (batch, head) pairs than threads). Head sizes that are and are not multiples
// of the 16-float vectors run both the in-place and the padded-copy paths.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using test_support::count_misses;
using test_support::finite_difference;
using test_support::scale_of;
using test_support::supported_isas;
using test_support::uniform_values;
using test_support::widen;

using cpu::Isa;

struct Dims {
  std::size_t batch;
  std::size_t seq_len;
  std::size_t channels;
  std::size_t heads;
};

struct Reference {
  std::vector<double> out;  // [B,T,C]
  std::vector<double> lse;  // [B,NH,T]
};

// The textbook computation: per (b, h) the full [T,T] score matrix, masked above the diagonal with
// -inf, softmax per row (max subtracted), then P @ V.
Reference attention_reference(const std::vector<double>& qkv, const Dims& dims) {
  const std::size_t T = dims.seq_len;
  const std::size_t C = dims.channels;
  const std::size_t hs = C / dims.heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  Reference ref{std::vector<double>(dims.batch * T * C), std::vector<double>(dims.batch * dims.heads * T)};
  std::vector<double> scores(T * T);
  for (std::size_t b = 0; b < dims.batch; ++b) {
    for (std::size_t h = 0; h < dims.heads; ++h) {
      const auto at = [&](std::size_t t, std::size_t part, std::size_t d) {
        return qkv[(b * T + t) * 3 * C + part * C + h * hs + d];
      };
      for (std::size_t t = 0; t < T; ++t) {
        for (std::size_t t2 = 0; t2 < T; ++t2) {
          double s = -std::numeric_limits<double>::infinity();
          if (t2 <= t) {
            s = 0.0;
            for (std::size_t d = 0; d < hs; ++d) s += at(t, 0, d) * at(t2, 1, d);
            s *= scale;
          }
          scores[t * T + t2] = s;
        }
      }
      for (std::size_t t = 0; t < T; ++t) {
        double* row = scores.data() + t * T;
        const double max = *std::max_element(row, row + T);
        double sum = 0.0;
        for (std::size_t t2 = 0; t2 < T; ++t2) sum += std::exp(row[t2] - max);
        for (std::size_t t2 = 0; t2 < T; ++t2) row[t2] = std::exp(row[t2] - max) / sum;
        ref.lse[(b * dims.heads + h) * T + t] = max + std::log(sum);
        for (std::size_t d = 0; d < hs; ++d) {
          double o = 0.0;
          for (std::size_t t2 = 0; t2 < T; ++t2) o += row[t2] * at(t2, 2, d);
          ref.out[(b * T + t) * C + h * hs + d] = o;
        }
      }
    }
  }
  return ref;
}

// The backward pass from the textbook formulas, in fp64 with full [T,T] matrices: with P the masked
// softmax, dV = Pᵀ dO, dP = dO Vᵀ, dS = P * (dP - rowsum(P * dP)), dQ = scale dS K, dK = scale dSᵀ Q.
// Returns dqkv (not accumulated).
std::vector<double> attention_backward_reference(const std::vector<double>& qkv, const std::vector<double>& dout,
                                                 const Dims& dims) {
  const std::size_t T = dims.seq_len;
  const std::size_t C = dims.channels;
  const std::size_t hs = C / dims.heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> dqkv(qkv.size(), 0.0);
  std::vector<double> p(T * T);
  std::vector<double> ds(T * T);
  for (std::size_t b = 0; b < dims.batch; ++b) {
    for (std::size_t h = 0; h < dims.heads; ++h) {
      const auto at = [&](std::size_t t, std::size_t part, std::size_t d) {
        return qkv[(b * T + t) * 3 * C + part * C + h * hs + d];
      };
      const auto grad_out = [&](std::size_t t, std::size_t d) { return dout[(b * T + t) * C + h * hs + d]; };
      const auto grad = [&](std::size_t t, std::size_t part, std::size_t d) -> double& {
        return dqkv[(b * T + t) * 3 * C + part * C + h * hs + d];
      };
      for (std::size_t t = 0; t < T; ++t) {
        double max = -std::numeric_limits<double>::infinity();
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          double s = 0.0;
          for (std::size_t d = 0; d < hs; ++d) s += at(t, 0, d) * at(t2, 1, d);
          p[t * T + t2] = s * scale;
          max = std::max(max, s * scale);
        }
        double sum = 0.0;
        for (std::size_t t2 = 0; t2 <= t; ++t2) sum += std::exp(p[t * T + t2] - max);
        double row_dot = 0.0;
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          p[t * T + t2] = std::exp(p[t * T + t2] - max) / sum;
          double dp = 0.0;
          for (std::size_t d = 0; d < hs; ++d) dp += grad_out(t, d) * at(t2, 2, d);
          ds[t * T + t2] = dp;
          row_dot += p[t * T + t2] * dp;
        }
        for (std::size_t t2 = 0; t2 <= t; ++t2) ds[t * T + t2] = p[t * T + t2] * (ds[t * T + t2] - row_dot);
      }
      for (std::size_t t = 0; t < T; ++t) {
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const double pv = p[t * T + t2];
          const double g = ds[t * T + t2] * scale;
          for (std::size_t d = 0; d < hs; ++d) {
            grad(t, 0, d) += g * at(t2, 1, d);
            grad(t2, 1, d) += g * at(t, 0, d);
            grad(t2, 2, d) += pv * grad_out(t, d);
          }
        }
      }
    }
  }
  return dqkv;
}

std::size_t qkv_size(const Dims& d) { return d.batch * d.seq_len * 3 * d.channels; }
std::size_t out_size(const Dims& d) { return d.batch * d.seq_len * d.channels; }
std::size_t lse_size(const Dims& d) { return d.batch * d.heads * d.seq_len; }

// One variant and thread count against the fp64 references: forward out and lse, and the dqkv the
// backward adds to dqkv0 for upstream gradient `dout`.
void check_variant(Isa isa, int threads, const Dims& dims, const std::vector<float>& qkv,
                   const std::vector<float>& dout, const std::vector<float>& dqkv0, const Reference& ref,
                   const std::vector<double>& dqkv_ref) {
  std::vector<float> out(out_size(dims));
  std::vector<float> lse(lse_size(dims));
  cpu::attention_forward(isa, out.data(), lse.data(), qkv.data(), dims.batch, dims.seq_len, dims.channels, dims.heads,
                         dims.heads, threads);
  CHECK(count_misses("out", out, ref.out, 1e-5, 1e-6 * scale_of(ref.out)) == 0);
  CHECK(count_misses("lse", lse, ref.lse, 1e-5, 1e-6 * scale_of(ref.lse)) == 0);
  std::vector<float> dqkv = dqkv0;
  cpu::attention_backward(isa, dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), dims.batch, dims.seq_len,
                          dims.channels, dims.heads, dims.heads, threads);
  std::vector<float> delta(dqkv.size());
  for (std::size_t i = 0; i < dqkv.size(); ++i) delta[i] = dqkv[i] - dqkv0[i];
  CHECK(count_misses("dqkv", delta, dqkv_ref, 1e-4, 1e-5 * scale_of(dqkv_ref)) == 0);
}

TEST_CASE("attention: forward matches fp64, backward matches finite differences", "[model][attention]") {
  // hs = 4, 4, 10 (tail only), 20 (one lane block plus a tail), 8 (exactly one block).
  const Dims dims =
      GENERATE(Dims{2, 5, 12, 3}, Dims{2, 9, 12, 3}, Dims{2, 7, 30, 3}, Dims{2, 6, 40, 2}, Dims{1, 8, 16, 2});
  std::mt19937_64 rng(21 + dims.seq_len * 100 + dims.channels);
  const auto qkv = uniform_values(qkv_size(dims), -1.5f, 1.5f, rng);
  const auto probe = uniform_values(out_size(dims), -1.0f, 1.0f, rng);
  const auto dqkv0 = uniform_values(qkv_size(dims), -0.1f, 0.1f, rng);

  std::vector<double> x = widen(qkv);
  const std::vector<double> probe_d = widen(probe);
  const auto loss = [&] {
    const auto out = attention_reference(x, dims).out;
    double sum = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * probe_d[i];
    return sum;
  };
  const Reference ref = attention_reference(x, dims);
  const std::vector<double> dqkv_ref = finite_difference(x, loss);
  {
    // The analytic fp64 backward used at larger sizes below agrees with the finite differences.
    const std::vector<double> analytic = attention_backward_reference(x, probe_d, dims);
    const std::vector<float> analytic_f(analytic.begin(), analytic.end());
    CHECK(count_misses("analytic dqkv", analytic_f, dqkv_ref, 1e-5, 1e-6 * scale_of(dqkv_ref)) == 0);
  }

  for (Isa isa : supported_isas()) {
    for (int threads : {1, 3}) {
      DYNAMIC_SECTION("B=" << dims.batch << " T=" << dims.seq_len << " C=" << dims.channels << " NH=" << dims.heads
                           << ", " << cpu::isa_name(isa) << ", " << threads << " threads") {
        check_variant(isa, threads, dims, qkv, probe, dqkv0, ref, dqkv_ref);
      }
    }
  }
}

TEST_CASE("attention: several blocks match the fp64 forward and analytic backward", "[model][attention]") {
  // T = 130 (blocks of 64, 64, 2), 100 and 200 (a partial last block); hs = 16 and 64 (rows read in
  // place) and 12 (padded copies); one pair with 4 threads runs the backward pass's split items.
  const Dims dims = GENERATE(Dims{1, 130, 32, 2}, Dims{2, 100, 36, 3}, Dims{1, 200, 128, 2}, Dims{1, 150, 48, 1});
  std::mt19937_64 rng(24 + dims.seq_len + dims.channels);
  const auto qkv = uniform_values(qkv_size(dims), -1.5f, 1.5f, rng);
  const auto dout = uniform_values(out_size(dims), -1.0f, 1.0f, rng);
  const auto dqkv0 = uniform_values(qkv_size(dims), -0.1f, 0.1f, rng);
  const std::vector<double> x = widen(qkv);
  const Reference ref = attention_reference(x, dims);
  const std::vector<double> dqkv_ref = attention_backward_reference(x, widen(dout), dims);

  for (Isa isa : supported_isas()) {
    for (int threads : {1, 4}) {
      DYNAMIC_SECTION("B=" << dims.batch << " T=" << dims.seq_len << " C=" << dims.channels << " NH=" << dims.heads
                           << ", " << cpu::isa_name(isa) << ", " << threads << " threads") {
        check_variant(isa, threads, dims, qkv, dout, dqkv0, ref, dqkv_ref);
      }
    }
  }
}

TEST_CASE("attention: no position sees a later key or value", "[model][attention]") {
  const Dims dims{2, 9, 24, 3};
  std::mt19937_64 rng(22);
  const auto qkv = uniform_values(qkv_size(dims), -2.0f, 2.0f, rng);
  const auto dout = uniform_values(out_size(dims), -1.0f, 1.0f, rng);
  std::vector<float> out(out_size(dims));
  std::vector<float> lse(lse_size(dims));
  cpu::attention_forward(out.data(), lse.data(), qkv.data(), dims.batch, dims.seq_len, dims.channels, dims.heads,
                         dims.heads);

  const std::size_t C = dims.channels;
  const std::size_t future = 6;
  std::vector<float> changed = qkv;
  for (std::size_t b = 0; b < dims.batch; ++b) {
    for (std::size_t t = future; t < dims.seq_len; ++t) {
      float* row = changed.data() + (b * dims.seq_len + t) * 3 * C;
      for (std::size_t c = 0; c < 3 * C; ++c) row[c] = row[c] * -3.0f + 0.5f;  // q, k and v of later tokens
    }
  }
  std::vector<float> out2(out_size(dims));
  std::vector<float> lse2(lse_size(dims));
  cpu::attention_forward(out2.data(), lse2.data(), changed.data(), dims.batch, dims.seq_len, dims.channels, dims.heads,
                         dims.heads);
  for (std::size_t b = 0; b < dims.batch; ++b) {
    for (std::size_t t = 0; t < dims.seq_len; ++t) {
      INFO("b=" << b << " t=" << t);
      const auto first = out.begin() + static_cast<std::ptrdiff_t>((b * dims.seq_len + t) * C);
      const bool same = std::equal(first, first + static_cast<std::ptrdiff_t>(C),
                                   out2.begin() + static_cast<std::ptrdiff_t>((b * dims.seq_len + t) * C));
      CHECK(same == (t < future));
    }
  }

  // Backward: the gradient of an output at t reaches only q[t] and k, v at positions <= t. With
  // dout zero from `future` on, nothing flows into q, k or v of later positions.
  std::vector<float> masked_dout = dout;
  for (std::size_t b = 0; b < dims.batch; ++b) {
    for (std::size_t t = future; t < dims.seq_len; ++t) {
      std::fill_n(masked_dout.begin() + static_cast<std::ptrdiff_t>((b * dims.seq_len + t) * C), C, 0.0f);
    }
  }
  std::vector<float> dqkv(qkv_size(dims), 0.0f);
  cpu::attention_backward(dqkv.data(), masked_dout.data(), qkv.data(), out.data(), lse.data(), dims.batch, dims.seq_len,
                          dims.channels, dims.heads, dims.heads);
  for (std::size_t b = 0; b < dims.batch; ++b) {
    for (std::size_t t = future; t < dims.seq_len; ++t) {
      const float* row = dqkv.data() + (b * dims.seq_len + t) * 3 * C;
      INFO("b=" << b << " t=" << t);
      CHECK(std::all_of(row, row + 3 * C, [](float g) { return g == 0.0f; }));
    }
  }
}

TEST_CASE("attention: every variant and thread count gives the same bits", "[model][attention]") {
  // B*NH pairs split over threads: 8 (even) and 15 (uneven ranges); hs = 16 and 12. Then several
  // blocks: 1 and 2 pairs (the backward pass's split items from 2 and 3 threads on), hs = 48 and 20.
  const Dims dims =
      GENERATE(Dims{2, 64, 64, 4}, Dims{3, 37, 60, 5}, Dims{1, 150, 48, 1}, Dims{1, 130, 40, 2}, Dims{2, 129, 128, 2});
  std::mt19937_64 rng(23 + dims.seq_len);
  const auto qkv = uniform_values(qkv_size(dims), -2.0f, 2.0f, rng);
  const auto dout = uniform_values(out_size(dims), -1.0f, 1.0f, rng);
  const Reference ref = attention_reference(widen(qkv), dims);

  std::vector<float> first_out;
  std::vector<float> first_lse;
  std::vector<float> first_dqkv;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3, 4}) {
      std::vector<float> out(out_size(dims));
      std::vector<float> lse(lse_size(dims));
      cpu::attention_forward(isa, out.data(), lse.data(), qkv.data(), dims.batch, dims.seq_len, dims.channels,
                             dims.heads, dims.heads, threads);
      std::vector<float> dqkv(qkv_size(dims), 0.0f);
      cpu::attention_backward(isa, dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), dims.batch,
                              dims.seq_len, dims.channels, dims.heads, dims.heads, threads);
      INFO("B=" << dims.batch << " T=" << dims.seq_len << " C=" << dims.channels << " NH=" << dims.heads << ", "
                << cpu::isa_name(isa) << ", " << threads << " threads");
      if (first_out.empty()) {
        CHECK(count_misses("out", out, ref.out, 1e-5, 1e-5 * scale_of(ref.out)) == 0);
        CHECK(count_misses("lse", lse, ref.lse, 1e-5, 1e-5 * scale_of(ref.lse)) == 0);
        first_out = out;
        first_lse = lse;
        first_dqkv = dqkv;
        continue;
      }
      CHECK(out == first_out);
      CHECK(lse == first_lse);
      CHECK(dqkv == first_dqkv);
    }
  }
}

}  // namespace
}  // namespace zinf::kernels
