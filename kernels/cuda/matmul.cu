// The CUDA linear layer (kernels/matmul.h): cuBLASLt products behind a per-shape cache of
// descriptors and heuristic results, and two small kernels of our own — the deterministic bias
// gradient, and a bias broadcast over the rows for what the cuBLASLt epilogue does not cover. The
// row-major <-> column-major mapping of every product is documented in kernels/matmul.h.
// What it is not: a general GEMM wrapper (only nn.Linear's three products). A GemmContext is used
// by one host thread at a time.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "kernels/cuda/elem.cuh"
#include "kernels/matmul.h"

namespace zinf::kernels::cuda {
namespace {

enum class GemmKind { kForward, kBackwardInput, kBackwardWeight };

// Everything a cuBLASLt heuristic answer depends on; the key of the plan cache.
struct PlanKey {
  GemmKind kind;
  Elem elem;
  std::int64_t m, n, k;
  std::int64_t lda, ldb, ldc;
  bool bias;
  std::uint32_t align_a, align_b, align_c, align_bias;
  std::size_t workspace_bytes;

  auto tied() const {
    return std::tie(kind, elem, m, n, k, lda, ldb, ldc, bias, align_a, align_b, align_c, align_bias, workspace_bytes);
  }
  bool operator<(const PlanKey& other) const { return tied() < other.tied(); }
};

// The descriptors and the chosen algorithm of one shape. Owns the cuBLASLt objects.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t c = nullptr;  // also D's layout: D is C, updated in place
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

// One product D = op(A) · op(B) + beta * C (D is C) in cuBLASLt's column-major terms: op(A) is
// m x k, op(B) is k x n, C is m x n.
struct GemmCall {
  GemmKind kind;
  Elem elem;              // A and B
  cudaDataType_t c_type;  // C and D (and the bias)
  bool transpose_a;
  bool transpose_b;
  std::int64_t m, n, k;
  const void* a;
  std::int64_t lda;
  const void* b;
  std::int64_t ldb;
  void* c;
  std::int64_t ldc;
  const void* bias;  // nullptr: no epilogue
  float beta;
};

GemmStatus cublas_failure(cublasStatus_t status, const char* call, int line) {
  GemmStatus failure;
  failure.cublas_status = static_cast<int>(status);
  failure.call = call;
  failure.file = __FILE__;
  failure.line = line;
  return failure;
}

GemmStatus cuda_failure(int error, const char* call, int line) {
  GemmStatus failure;
  failure.cuda_error = error;
  failure.call = call;
  failure.file = __FILE__;
  failure.line = line;
  return failure;
}

// Returns the failure of a cuBLASLt call from the enclosing function (which returns GemmStatus).
#define ZINF_GEMM_TRY(call)                                                                                    \
  do {                                                                                                         \
    const cublasStatus_t zinf_gemm_status_ = (call);                                                           \
    if (zinf_gemm_status_ != CUBLAS_STATUS_SUCCESS) return cublas_failure(zinf_gemm_status_, #call, __LINE__); \
  } while (false)

cudaDataType_t data_type(Elem elem) {
  switch (elem) {
    case Elem::kF32:
      return CUDA_R_32F;
    case Elem::kBF16:
      return CUDA_R_16BF;
    case Elem::kF16:
      return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

std::size_t elem_bytes(Elem elem) { return elem == Elem::kF32 ? 4 : 2; }

// The largest power of two dividing the address, at most 256 (cuBLASLt's default assumption).
std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address == 0) return 256;
  const std::uintptr_t lowest_bit = address & (~address + 1);
  return static_cast<std::uint32_t>(std::min<std::uintptr_t>(lowest_bit, 256));
}

}  // namespace

struct GemmContext {
  cublasLtHandle_t handle = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

namespace {

struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* preference) const { cublasLtMatmulPreferenceDestroy(preference); }
};

// Fills `plan` for `key`/`call`: descriptors, layouts, and the heuristic's best algorithm.
GemmStatus build_plan(GemmContext& context, const PlanKey& key, const GemmCall& call, Plan& plan) {
  ZINF_GEMM_TRY(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = call.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = call.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZINF_GEMM_TRY(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  ZINF_GEMM_TRY(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (call.bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    ZINF_GEMM_TRY(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    // The bias has D's element type (what cuBLASLt expects for non-integer products); said
    // explicitly rather than left to the default.
    const cudaDataType_t bias_type = call.c_type;
    ZINF_GEMM_TRY(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    // Set now because the heuristic reads the pointer's alignment; updated before every call.
    ZINF_GEMM_TRY(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias, sizeof(call.bias)));
  }
  // A stored matrix whose op() is a transpose holds the transposed shape.
  const cudaDataType_t ab_type = data_type(call.elem);
  const auto m = static_cast<std::uint64_t>(call.m);
  const auto n = static_cast<std::uint64_t>(call.n);
  const auto k = static_cast<std::uint64_t>(call.k);
  ZINF_GEMM_TRY(
      cublasLtMatrixLayoutCreate(&plan.a, ab_type, call.transpose_a ? k : m, call.transpose_a ? m : k, call.lda));
  ZINF_GEMM_TRY(
      cublasLtMatrixLayoutCreate(&plan.b, ab_type, call.transpose_b ? n : k, call.transpose_b ? k : n, call.ldb));
  ZINF_GEMM_TRY(cublasLtMatrixLayoutCreate(&plan.c, call.c_type, m, n, call.ldc));

  cublasLtMatmulPreference_t raw_preference = nullptr;
  ZINF_GEMM_TRY(cublasLtMatmulPreferenceCreate(&raw_preference));
  const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter> preference(raw_preference);
  const std::uint64_t workspace_bytes = key.workspace_bytes;
  ZINF_GEMM_TRY(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace_bytes, sizeof(workspace_bytes)));
  ZINF_GEMM_TRY(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                     &key.align_a, sizeof(key.align_a)));
  ZINF_GEMM_TRY(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                     &key.align_b, sizeof(key.align_b)));
  ZINF_GEMM_TRY(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                     &key.align_c, sizeof(key.align_c)));
  ZINF_GEMM_TRY(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                     &key.align_c, sizeof(key.align_c)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ZINF_GEMM_TRY(cublasLtMatmulAlgoGetHeuristic(context.handle, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                               preference.get(), 1, &result, &found));
  if (found == 0) {
    return cublas_failure(CUBLAS_STATUS_NOT_SUPPORTED,
                          "cublasLtMatmulAlgoGetHeuristic (no algorithm for these shapes, types and alignments)",
                          __LINE__);
  }
  plan.algo = result.algo;
  return {};
}

// Runs `call` with the cached plan of its shape, building the plan on first use.
GemmStatus run_gemm(GemmContext* context, const GemmCall& call, void* workspace, std::size_t workspace_bytes,
                    Stream stream) {
  if (context == nullptr) return cuda_failure(cudaErrorInvalidValue, "run_gemm (no GemmContext)", __LINE__);
  if (workspace == nullptr) workspace_bytes = 0;
  const PlanKey key{call.kind,
                    call.elem,
                    call.m,
                    call.n,
                    call.k,
                    call.lda,
                    call.ldb,
                    call.ldc,
                    call.bias != nullptr,
                    alignment_of(call.a),
                    alignment_of(call.b),
                    alignment_of(call.c),
                    call.bias != nullptr ? alignment_of(call.bias) : 0,
                    workspace_bytes};
  Plan* plan = nullptr;
  if (const auto found = context->plans.find(key); found != context->plans.end()) {
    plan = found->second.get();
  } else {
    auto built = std::make_unique<Plan>();
    const GemmStatus status = build_plan(*context, key, call, *built);
    if (!status.ok()) return status;
    plan = built.get();
    context->plans.emplace(key, std::move(built));
  }
  if (call.bias != nullptr) {
    ZINF_GEMM_TRY(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias, sizeof(call.bias)));
  }
  // alpha and beta are host fp32 scalars (the scale type of CUBLAS_COMPUTE_32F, pointer mode host).
  const float alpha = 1.0f;
  ZINF_GEMM_TRY(cublasLtMatmul(context->handle, plan->desc, &alpha, call.a, plan->a, call.b, plan->b, &call.beta,
                               call.c, plan->c, call.c, plan->c, &plan->algo, workspace, workspace_bytes,
                               detail::native(stream)));
  return {};
}

constexpr int kBiasColumns = 32;  // columns per block: one warp reads 32 neighbouring elements of a row
constexpr int kBiasLanes = 16;    // row lanes per column: lane y adds rows y, y + 16, y + 32, ...

// dbias[o] += sum over rows of dout[r, o]. Each lane sums its rows in increasing order in fp64; the
// lanes are then added in lane order by one thread, so the result is fixed by the input alone.
template <typename T>
__global__ void bias_backward_kernel(float* __restrict__ dbias, const T* __restrict__ dout, std::int64_t ld,
                                     std::int64_t rows, std::int64_t columns) {
  __shared__ double partial[kBiasLanes][kBiasColumns];
  const std::int64_t column = static_cast<std::int64_t>(blockIdx.x) * kBiasColumns + threadIdx.x;
  double sum = 0.0;
  if (column < columns) {
    for (std::int64_t r = threadIdx.y; r < rows; r += kBiasLanes) {
      sum += static_cast<double>(detail::to_f32(dout[r * ld + column]));
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && column < columns) {
    double total = 0.0;
    for (int lane = 0; lane < kBiasLanes; ++lane) total += partial[lane][threadIdx.x];
    dbias[column] = static_cast<float>(static_cast<double>(dbias[column]) + total);
  }
}

// out[r, o] = bias[o] (0 when bias is nullptr), plus out[r, o] itself when `add`, for the columns
// [0, columns) of every row, in fp32 with one rounding. Used for the forward product when the
// inner dimension C is 0 (cuBLASLt does not take k = 0), and to add a bias the cuBLASLt epilogue
// cannot take (see matmul_forward).
template <typename T>
__global__ void bias_columns_kernel(T* __restrict__ out, std::int64_t ld, std::int64_t rows, std::int64_t columns,
                                    const T* __restrict__ bias, bool add) {
  const std::int64_t total = rows * columns;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t r = i / columns;
    const std::int64_t o = i % columns;
    float value = bias != nullptr ? detail::to_f32(bias[o]) : 0.0f;
    if (add) value = detail::to_f32(out[r * ld + o]) + value;
    out[r * ld + o] = detail::from_f32<T>(value);
  }
}

GemmStatus launch_bias_columns(Elem elem, void* out, std::int64_t ld, std::int64_t rows, std::int64_t columns,
                               const void* bias, bool add, Stream stream) {
  const LaunchStatus launched = detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kThreads = 256;
    bias_columns_kernel<T><<<detail::blocks_for(rows * columns, kThreads), kThreads, 0, detail::native(stream)>>>(
        static_cast<T*>(out), ld, rows, columns, static_cast<const T*>(bias), add);
    return detail::last_launch_status();
  });
  if (launched != 0) return cuda_failure(launched, "bias_columns_kernel<<<...>>>", __LINE__);
  return {};
}

}  // namespace

GemmStatus gemm_context_create(GemmContext** context) {
  *context = nullptr;
  auto created = std::make_unique<GemmContext>();
  ZINF_GEMM_TRY(cublasLtCreate(&created->handle));
  *context = created.release();
  return {};
}

void gemm_context_destroy(GemmContext* context) {
  if (context == nullptr) return;
  context->plans.clear();
  if (context->handle != nullptr) cublasLtDestroy(context->handle);
  delete context;
}

GemmStatus matmul_forward(GemmContext* context, Elem elem, void* out, std::int64_t ld_out, const void* inp,
                          const void* weight, const void* bias, std::int64_t rows, std::int64_t in_channels,
                          std::int64_t out_channels, void* workspace, std::size_t workspace_bytes, Stream stream) {
  if (rows == 0 || out_channels == 0) return {};
  if (in_channels == 0) return launch_bias_columns(elem, out, ld_out, rows, out_channels, bias, false, stream);
  // The bias epilogue wants a 16-byte-aligned bias vector (a bias sliced at an odd tile offset is
  // not): such a bias is added by our own kernel after the product instead, at the cost of one more
  // pass over the block and, for 16-bit outputs, a second rounding.
  const bool bias_in_epilogue = bias != nullptr && alignment_of(bias) >= 16;
  GemmCall call{};
  call.kind = GemmKind::kForward;
  call.elem = elem;
  call.c_type = data_type(elem);
  call.transpose_a = true;  // weight [OC,C] row-major is C x OC column-major; op(A) = OC x C
  call.transpose_b = false;
  call.m = out_channels;
  call.n = rows;
  call.k = in_channels;
  call.a = weight;
  call.lda = in_channels;
  call.b = inp;
  call.ldb = in_channels;
  call.c = out;
  call.ldc = ld_out;
  call.bias = bias_in_epilogue ? bias : nullptr;
  call.beta = 0.0f;
  const GemmStatus product = run_gemm(context, call, workspace, workspace_bytes, stream);
  if (!product.ok() || bias == nullptr || bias_in_epilogue) return product;
  return launch_bias_columns(elem, out, ld_out, rows, out_channels, bias, true, stream);
}

GemmStatus matmul_backward_input(GemmContext* context, Elem elem, void* dinp, bool accumulate, const void* dout,
                                 std::int64_t ld_dout, const void* weight, std::int64_t rows, std::int64_t in_channels,
                                 std::int64_t out_channels, void* workspace, std::size_t workspace_bytes,
                                 Stream stream) {
  if (rows == 0 || in_channels == 0) return {};
  if (out_channels == 0) {
    // An empty product: += adds nothing, = writes zeros.
    if (accumulate) return {};
    const std::size_t bytes = static_cast<std::size_t>(rows * in_channels) * elem_bytes(elem);
    const cudaError_t error = cudaMemsetAsync(dinp, 0, bytes, detail::native(stream));
    if (error != cudaSuccess) return cuda_failure(error, "cudaMemsetAsync(dinp, 0, bytes, stream)", __LINE__);
    return {};
  }
  GemmCall call{};
  call.kind = GemmKind::kBackwardInput;
  call.elem = elem;
  call.c_type = data_type(elem);
  call.transpose_a = false;  // weight as C x OC (ld C)
  call.transpose_b = false;  // dout block as OC x R (ld ld_dout)
  call.m = in_channels;
  call.n = rows;
  call.k = out_channels;
  call.a = weight;
  call.lda = in_channels;
  call.b = dout;
  call.ldb = ld_dout;
  call.c = dinp;
  call.ldc = in_channels;
  call.bias = nullptr;
  call.beta = accumulate ? 1.0f : 0.0f;
  return run_gemm(context, call, workspace, workspace_bytes, stream);
}

GemmStatus matmul_backward_weight(GemmContext* context, Elem elem, float* dweight, const void* dout,
                                  std::int64_t ld_dout, const void* inp, std::int64_t rows, std::int64_t in_channels,
                                  std::int64_t out_channels, void* workspace, std::size_t workspace_bytes,
                                  Stream stream) {
  if (rows == 0 || in_channels == 0 || out_channels == 0) return {};
  GemmCall call{};
  call.kind = GemmKind::kBackwardWeight;
  call.elem = elem;
  call.c_type = CUDA_R_32F;  // the fp32 gradient accumulator
  call.transpose_a = false;  // inp as C x R (ld C)
  call.transpose_b = true;   // dout block as OC x R (ld ld_dout); op(B) = R x OC
  call.m = in_channels;
  call.n = out_channels;
  call.k = rows;
  call.a = inp;
  call.lda = in_channels;
  call.b = dout;
  call.ldb = ld_dout;
  call.c = dweight;
  call.ldc = in_channels;
  call.bias = nullptr;
  call.beta = 1.0f;
  return run_gemm(context, call, workspace, workspace_bytes, stream);
}

LaunchStatus matmul_bias_backward(Elem elem, float* dbias, const void* dout, std::int64_t ld_dout, std::int64_t rows,
                                  std::int64_t out_channels, Stream stream) {
  if (rows == 0 || out_channels == 0) return 0;
  if (rows < 0 || out_channels < 0 || ld_dout < out_channels) return detail::invalid_argument();
  const std::int64_t blocks = (out_channels + kBiasColumns - 1) / kBiasColumns;
  if (blocks > 2147483647LL) return detail::invalid_argument();
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    bias_backward_kernel<T>
        <<<static_cast<unsigned int>(blocks), dim3(kBiasColumns, kBiasLanes), 0, detail::native(stream)>>>(
            dbias, static_cast<const T*>(dout), ld_dout, rows, out_channels);
    return detail::last_launch_status();
  });
}

}  // namespace zinf::kernels::cuda
