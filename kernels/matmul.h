// The linear layer (PyTorch's nn.Linear: out = inp · weightᵀ + bias), forward and backward. CPU
// variants on raw fp32 arrays, whose matrix products are OpenBLAS's cblas_sgemm; the CUDA ones
// (cuBLASLt, fp32/bf16/fp16 storage with fp32 accumulation) at the end.
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
#include <cstdint>

#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

// out = inp · weightᵀ + bias. bias may be nullptr (no bias: out = inp · weightᵀ). Whatever out
// held before is overwritten.
void matmul_forward(float* out /*[R,OC]*/, const float* inp /*[R,C]*/, const float* weight /*[OC,C]*/,
                    const float* bias /*[OC]*/, std::size_t rows, std::size_t in_channels, std::size_t out_channels);

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

namespace zinf::kernels::cuda {
// The same layer on device arrays through cuBLASLt, for the strided (column-block) form above.
// Element types: out, inp, weight, bias, dinp and dout in `elem` (the compute dtype); dweight and
// dbias always fp32. Every product accumulates in fp32 (CUBLAS_COMPUTE_32F; for fp32 inputs that
// means true fp32, never TF32, so the fp32 path is a reference to ~1e-5). Rounding to a 16-bit
// `elem` happens once per output element (twice where a bias is added after the product, below).
//
// How nn.Linear's row-major arrays map onto cuBLASLt's column-major matrices: a row-major [a, b]
// array with rows `ld` elements apart is the column-major b x a matrix with leading dimension ld
// (its transpose), so no data moves:
//   forward      outᵀ [OC x R] (ld ld_out) = weight · inpᵀ: A = weight, stored C x OC (ld C),
//                op(A) its transpose; B = inp as C x R (ld C); D = C = out; m = OC, n = R, k = C;
//                bias through the CUBLASLT_EPILOGUE_BIAS epilogue (a vector along D's m = OC rows,
//                broadcast over R) when it is 16-byte aligned, otherwise added by a kernel of ours
//                after the product (a second rounding for 16-bit outputs).
//   dinp         dinpᵀ [C x R] (ld C) = weightᵀ · doutᵀ: A = weight as C x OC (ld C), B = dout as
//                OC x R (ld ld_dout), m = C, n = R, k = OC; beta 1 accumulates, beta 0 overwrites
//                (and never reads dinp, so it may hold anything).
//   dweight      dweightᵀ [C x OC] (ld C) += inpᵀ · dout: A = inp as C x R (ld C), B = dout as
//                OC x R (ld ld_dout) transposed, m = C, n = OC, k = R, beta 1, C/D fp32 while A/B
//                are `elem` (a combination cuBLASLt supports for bf16 and fp16 inputs).
//   dbias        += column sums of dout, a kernel of our own (below), not a cuBLASLt epilogue, so
//                that the sum order is fixed: rows are added in fp64 in a fixed order per column.
//
// Each distinct shape (kind, elem, m, n, k, leading dimensions, bias or not, pointer alignments,
// workspace size) gets one set of cuBLASLt descriptors and one heuristic query, cached in the
// GemmContext, so a training step's repeated shapes never query heuristics again. A pointer's
// alignment (the largest power of two dividing its address, at most 256 bytes) is part of the key
// because the algorithms the heuristic may choose depend on it: a column block at an odd offset
// gets a slower algorithm, not a misaligned access.
//
// Outcomes: a GemmStatus naming the failing call (a cuBLASLt status, or a CUDA error of a kernel
// launch or runtime call). The products are asynchronous on `stream`; faults surface at the next
// synchronisation. Preconditions (not checked): every pointer is device memory of the sizes in the
// comments, element-aligned; outputs overlap no input; ld_out, ld_dout >= OC.

// What went wrong in a launcher that calls cuBLASLt. ok() when nothing did.
struct GemmStatus {
  int cuda_error = 0;          // cudaError_t of a CUDA runtime call or kernel launch; 0 when none
  int cublas_status = 0;       // cublasStatus_t of a cuBLASLt call; 0 (CUBLAS_STATUS_SUCCESS) when none
  const char* call = nullptr;  // the failing call as written (static storage); nullptr when ok
  const char* file = nullptr;  // __FILE__ and line of that call
  int line = 0;
  bool ok() const { return cuda_error == 0 && cublas_status == 0; }
};

// A cuBLASLt handle and the per-shape cache described above. Opaque; created and destroyed by the
// functions below. Not thread-safe: one host thread uses a context at a time (the descriptors in
// the cache are updated per call).
struct GemmContext;

// The workspace size the launchers are meant to be given (cuBLASLt's split-K and stream-K
// algorithms need one; 32 MiB is what NVIDIA recommends for Hopper).
inline constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;

// Creates a context on the calling thread's current device; *context is nullptr on failure.
GemmStatus gemm_context_create(GemmContext** context);
// Releases the handle and every cached descriptor. nullptr is fine. Work already launched with the
// context may still be running: descriptors are host objects, and cuBLASLt allows destroying them
// once cublasLtMatmul has returned.
void gemm_context_destroy(GemmContext* context);

// out[:, 0:OC) = inp · weightᵀ + bias (bias may be nullptr), OVERWRITING that block of out.
// `workspace` is device memory of `workspace_bytes` (may be nullptr with 0), not used by anything
// else until the stream has passed this call.
GemmStatus matmul_forward(GemmContext* context, Elem elem, void* out /*[R,ld_out], columns [0,OC)*/,
                          std::int64_t ld_out, const void* inp /*[R,C]*/, const void* weight /*[OC,C]*/,
                          const void* bias /*[OC]*/, std::int64_t rows, std::int64_t in_channels,
                          std::int64_t out_channels, void* workspace, std::size_t workspace_bytes, Stream stream);
// dinp = dout[:, 0:OC) · weight when !accumulate, dinp += that when accumulate.
GemmStatus matmul_backward_input(GemmContext* context, Elem elem, void* dinp /*[R,C]*/, bool accumulate,
                                 const void* dout /*[R,ld_dout], columns [0,OC)*/, std::int64_t ld_dout,
                                 const void* weight /*[OC,C]*/, std::int64_t rows, std::int64_t in_channels,
                                 std::int64_t out_channels, void* workspace, std::size_t workspace_bytes,
                                 Stream stream);
// dweight += dout[:, 0:OC)ᵀ · inp (fp32 accumulator, `elem` inputs).
GemmStatus matmul_backward_weight(GemmContext* context, Elem elem, float* dweight /*[OC,C]*/,
                                  const void* dout /*[R,ld_dout], columns [0,OC)*/, std::int64_t ld_dout,
                                  const void* inp /*[R,C]*/, std::int64_t rows, std::int64_t in_channels,
                                  std::int64_t out_channels, void* workspace, std::size_t workspace_bytes,
                                  Stream stream);
// dbias[o] += sum over r of dout[r, o], the rows of each column added in fp64 in a fixed order (32
// columns per block, 16 lanes each taking every 16th row, lanes added in order), so the result
// depends only on the input. An OC needing more than 2^31 - 1 blocks of 32 columns returns
// cudaErrorInvalidValue without launching.
LaunchStatus matmul_bias_backward(Elem elem, float* dbias /*[OC]*/, const void* dout /*[R,ld_dout], columns [0,OC)*/,
                                  std::int64_t ld_dout, std::int64_t rows, std::int64_t out_channels, Stream stream);
}  // namespace zinf::kernels::cuda
