// CPU linear layer, forward and backward (matmul.h has the formulas): three row-major
// cblas_sgemm calls and two plain loops (the bias broadcast and the dbias column sums).
#include "kernels/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

namespace zinf::kernels::cpu {
namespace {

// OpenBLAS takes its dimensions as blasint; matmul.h makes fitting in one a precondition.
blasint as_blas(std::size_t n) { return static_cast<blasint>(n); }

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, std::size_t rows,
                    std::size_t in_channels, std::size_t out_channels) {
  matmul_forward_strided(out, out_channels, inp, weight, bias, rows, in_channels, out_channels);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::size_t rows, std::size_t in_channels, std::size_t out_channels) {
  matmul_backward_strided(dinp, /*accumulate_dinp=*/true, dweight, dbias, dout, out_channels, inp, weight, rows,
                          in_channels, out_channels);
}

void matmul_forward_strided(float* out, std::size_t ld_out, const float* inp, const float* weight, const float* bias,
                            std::size_t rows, std::size_t in_channels, std::size_t out_channels) {
  if (rows == 0 || out_channels == 0) return;
  // With a bias, out starts as the bias in every row and the product is added to it (beta = 1):
  // one pass over out instead of a second broadcast pass after the product.
  float beta = 0.0f;
  if (bias != nullptr) {
    for (std::size_t r = 0; r < rows; ++r) std::copy(bias, bias + out_channels, out + r * ld_out);
    beta = 1.0f;
  }
  if (in_channels == 0) {
    // An empty sum: OpenBLAS rejects K = 0 with lda = 0, and the answer is the bias (or zero).
    if (bias == nullptr) {
      for (std::size_t r = 0; r < rows; ++r) std::fill(out + r * ld_out, out + r * ld_out + out_channels, 0.0f);
    }
    return;
  }
  // out[R,OC] = inp[R,C] · weight[OC,C]ᵀ (+ out).
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(rows), as_blas(out_channels), as_blas(in_channels), 1.0f,
              inp, as_blas(in_channels), weight, as_blas(in_channels), beta, out, as_blas(ld_out));
}

void matmul_backward_strided(float* dinp, bool accumulate_dinp, float* dweight, float* dbias, const float* dout,
                             std::size_t ld_dout, const float* inp, const float* weight, std::size_t rows,
                             std::size_t in_channels, std::size_t out_channels) {
  if (rows == 0) return;  // every gradient term is an empty sum
  if (out_channels == 0) {
    // dinp's sum over OC is empty: zero when it is to be overwritten, untouched when accumulated.
    if (!accumulate_dinp) std::fill(dinp, dinp + rows * in_channels, 0.0f);
    return;
  }
  if (in_channels != 0) {
    // dinp[R,C] (+)= dout[R,OC] · weight[OC,C]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas(rows), as_blas(in_channels), as_blas(out_channels),
                1.0f, dout, as_blas(ld_dout), weight, as_blas(in_channels), accumulate_dinp ? 1.0f : 0.0f, dinp,
                as_blas(in_channels));
    // dweight[OC,C] += dout[R,OC]ᵀ · inp[R,C]
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas(out_channels), as_blas(in_channels), as_blas(rows),
                1.0f, dout, as_blas(ld_dout), inp, as_blas(in_channels), 1.0f, dweight, as_blas(in_channels));
  }
  if (dbias != nullptr) {
    // Rows added in order into one fp64 sum per channel: the same bits for any OpenBLAS thread
    // count, and no float rounding growing with R.
    std::vector<double> sums(out_channels, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
      const float* dy = dout + r * ld_dout;
      for (std::size_t o = 0; o < out_channels; ++o) sums[o] += static_cast<double>(dy[o]);
    }
    for (std::size_t o = 0; o < out_channels; ++o) {
      dbias[o] = static_cast<float>(static_cast<double>(dbias[o]) + sums[o]);
    }
  }
}

}  // namespace zinf::kernels::cpu
