// The linear layer (PyTorch's nn.Linear: out = inp · weightᵀ + bias), forward and backward, on raw
// fp32 arrays. CPU variants only; the matrix products are OpenBLAS's cblas_sgemm.
//
// Dimension legend: R rows (B*T, every position of every sequence), C input channels, OC output
// channels. weight is [OC, C], row-major, as nn.Linear stores it.
//
// Forward:   out[r, o] = bias[o] + sum over c of inp[r, c] * weight[o, c]
// Backward:  dinp    += dout · weight             ([R, OC] · [OC, C])
//            dweight += doutᵀ · inp               ([OC, R] · [R, C])
//            dbias   += sum over rows of dout
// Every gradient is accumulated (+=): callers zero them first when they want plain values.
//
// Why there are no per-instruction-set (Isa) overloads, unlike the other kernels: OpenBLAS picks
// its own micro-kernels for the CPU at run time, so there is nothing for zinf to dispatch. Results
// therefore follow OpenBLAS's summation order, which may depend on the CPU and on OpenBLAS's thread
// count; they are not bit-identical across machines the way the zinf-written kernels are.
// The one sum written here, dbias, adds the rows in order in fp64 per output channel on the calling
// thread, so it is deterministic (it is O(R*OC), small next to the O(R*C*OC) products).
//
// Threads: the products run on OpenBLAS's own thread pool. These functions never change its size;
// calling openblas_set_num_threads (or setting OPENBLAS_NUM_THREADS) is the caller's choice.
// Thread-safety: concurrent calls are safe when their outputs do not overlap (OpenBLAS built with
// locking, as Debian's is).
//
// Preconditions (not checked): R*C elements behind every [R,C] pointer, R*OC behind every [R,OC]
// pointer, OC*C behind every [OC,C] pointer, OC behind every [OC] pointer; outputs overlap no
// input; R, C and OC each below 2^31 (OpenBLAS takes int dimensions). Any dimension may be 0.
#pragma once

#include <cstddef>

namespace zinf::kernels::cpu {

// out = inp · weightᵀ + bias. bias may be nullptr (no bias: out = inp · weightᵀ). Whatever out
// held before is overwritten.
void matmul_forward(float* out /*[R,OC]*/, const float* inp /*[R,C]*/, const float* weight /*[OC,C]*/,
                    const float* bias /*[OC]*/, std::size_t rows, std::size_t in_channels,
                    std::size_t out_channels);

// Accumulates the gradients of the forward pass above for the upstream gradient dout. dbias may
// be nullptr (a layer without bias: nothing to accumulate).
void matmul_backward(float* dinp /*[R,C]*/, float* dweight /*[OC,C]*/, float* dbias /*[OC]*/,
                     const float* dout /*[R,OC]*/, const float* inp /*[R,C]*/, const float* weight /*[OC,C]*/,
                     std::size_t rows, std::size_t in_channels, std::size_t out_channels);

// The same layer on a column block of wider [R, ld] matrices, for a linear layer whose weight is
// split into tiles along the output features (memory-centric tiling, model/tiled_linear.h): `out`
// and `dout` point at the block's first column (the caller adds the column offset) and rows are
// `ld_out` / `ld_dout` elements apart (ld >= OC). Everything else is as above, except that dinp is
// OVERWRITTEN (=) instead of accumulated when `accumulate_dinp` is false: the first contribution
// to an input gradient then needs no zeroing pass beforehand. dweight and dbias are always
// accumulated (+=). Results equal the contiguous functions' bits when ld == OC.
void matmul_forward_strided(float* out /*[R,ld_out], columns [0,OC)*/, std::size_t ld_out, const float* inp /*[R,C]*/,
                            const float* weight /*[OC,C]*/, const float* bias /*[OC]*/, std::size_t rows,
                            std::size_t in_channels, std::size_t out_channels);
void matmul_backward_strided(float* dinp /*[R,C]*/, bool accumulate_dinp, float* dweight /*[OC,C]*/,
                             float* dbias /*[OC]*/, const float* dout /*[R,ld_dout], columns [0,OC)*/,
                             std::size_t ld_dout, const float* inp /*[R,C]*/, const float* weight /*[OC,C]*/,
                             std::size_t rows, std::size_t in_channels, std::size_t out_channels);

}  // namespace zinf::kernels::cpu
