// CudaOps (see cuda_ops.h): shape and dtype checks, then the kernels::cuda launch on the compute
// stream, its LaunchStatus kept as the stream's first error when non-zero. Activation tensors may be
// [B,T,C] or [R,C]; "rows" is every dimension but the last, multiplied out.
#include "libengine/device/cuda_ops.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/adam.h"
#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gqa.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "libengine/core/check.h"
#include "libengine/device/cuda_check.h"
#include "libengine/device/cuda_device.h"
#include "libengine/device/ops_checks.h"

namespace zinf::device {
namespace {

namespace k = zinf::kernels::cuda;
using k::Elem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// sum_squares keeps its fp64 total in the first bytes of the scratch block; the kernel's own
// scratch starts after them, keeping the 256-byte alignment kernels/cuda_launch.h promises.
constexpr std::size_t kAccumulatorBytes = 256;
// Growth steps of the scratch and staging blocks, so that a slightly larger request does not
// reallocate every time.
constexpr std::size_t kScratchGranuleBytes = std::size_t{64} << 10;
constexpr std::size_t kStagingGranuleBytes = std::size_t{4} << 10;

std::size_t round_up(std::size_t value, std::size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

Elem elem_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return Elem::kF32;
    case DType::kBF16:
      return Elem::kBF16;
    case DType::kF16:
      return Elem::kF16;
  }
  ZINF_CHECK(false, "cuda ops: unknown dtype");
  return Elem::kF32;
}

kernels::HalfFormat half_format(DType dtype) {
  return dtype == DType::kF16 ? kernels::HalfFormat::kF16 : kernels::HalfFormat::kBF16;
}

std::int64_t cols(const Tensor& t) {
  ZINF_CHECK(t.shape().rank() >= 1, "tensor has no dimensions");
  return t.dim(t.shape().rank() - 1);
}
std::int64_t rows(const Tensor& t) {
  const std::int64_t c = cols(t);
  return c == 0 ? 0 : t.numel() / c;
}

// The address of column `column` of row 0 of a row-major [R, W] tensor.
void* column_start(const Tensor& t, std::int64_t column) {
  return static_cast<char*>(t.data()) + static_cast<std::size_t>(column) * dtype_size_bytes(t.dtype());
}

// The Status of a kernels::cuda GemmStatus (ok when it is).
Status gemm_status(const k::GemmStatus& status) {
  if (status.ok()) return Status::ok();
  if (status.cublas_status != 0) return cublas_status(status.cublas_status, status.call, status.file, status.line);
  return cuda_status(status.cuda_error, status.call, status.file, status.line);
}

// Checks qkv [B,T,(NH+2NKV) hd], out [B,T,C], lse [B,NH,T] against each other and ops.h's dtypes;
// returns NH and NKV.
AttentionHeads check_attention(const Tensor& out, const Tensor& lse, const Tensor& qkv) {
  const AttentionHeads heads = attention_heads(out, lse, qkv);
  ZINF_CHECK(out.dtype() == qkv.dtype(), "attention: out and qkv differ in dtype (both are the compute dtype)");
  ZINF_CHECK(lse.dtype() == DType::kF32, "attention: lse is not fp32");
  return heads;
}

// Byte offsets of the pieces carved from the ops' scratch, each 256-byte aligned.
constexpr std::size_t kCarveAlign = 256;

}  // namespace

// Launches kernels::cuda::<launcher>(args...) and keeps a failure, naming the launcher.
#define ZINF_LAUNCH(launcher, ...) report(ZINF_CUDA_LAUNCH_STATUS(#launcher, k::launcher(__VA_ARGS__)))

Result<std::unique_ptr<CudaOps>> CudaOps::create(Device& device, CudaStream& compute, int device_index) {
  ZINF_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_index));
  k::GemmContext* gemm = nullptr;
  ZINF_RETURN_IF_ERROR(gemm_status(k::gemm_context_create(&gemm)));
  return std::unique_ptr<CudaOps>(new CudaOps(device, compute, device_index, gemm));
}

CudaOps::CudaOps(Device& device, CudaStream& compute, int device_index, kernels::cuda::GemmContext* gemm)
    : device_(device), compute_(compute), device_index_(device_index), gemm_(gemm) {}

CudaOps::~CudaOps() {
  (void)cudaSetDevice(device_index_);
  // Launches still queued may use the scratch and the workspace, which go back to the pool below.
  (void)cudaStreamSynchronize(compute_.handle());
  k::gemm_context_destroy(gemm_);
}

void CudaOps::report(Status status) { compute_.report_error(std::move(status)); }

bool CudaOps::activate() {
  Status status = ZINF_CUDA_STATUS(cudaSetDevice(device_index_));
  if (status.is_ok()) return true;
  report(std::move(status));
  return false;
}

void* CudaOps::stream() const { return compute_.handle(); }

bool CudaOps::ensure_scratch(std::size_t bytes) {
  if (bytes <= scratch_.bytes()) return true;
  if (!scratch_.empty()) {
    // Kernels queued earlier may still read or write the old block; it may go back to the pool
    // (and to another owner) only once they are done.
    report(ZINF_CUDA_STATUS(cudaStreamSynchronize(compute_.handle())));
    scratch_ = DeviceBuffer();
  }
  Result<DeviceBuffer> block = device_.allocate(round_up(bytes, kScratchGranuleBytes), "CUDA ops scratch");
  if (!block.is_ok()) {
    report(block.status());
    return false;
  }
  scratch_ = std::move(block).value();
  return true;
}

bool CudaOps::ensure_host_staging(std::size_t bytes) {
  // Every use of the staging block ends with a wait for the compute stream, so nothing is in flight
  // here (and cudaFreeHost would wait for the device anyway).
  if (bytes <= host_staging_.bytes()) return true;
  host_staging_ = DeviceBuffer();
  Result<DeviceBuffer> block = device_.allocate_host(round_up(bytes, kStagingGranuleBytes), "CUDA ops host staging");
  if (!block.is_ok()) {
    report(block.status());
    return false;
  }
  host_staging_ = std::move(block).value();
  return true;
}

bool CudaOps::ensure_workspace() {
  if (!workspace_.empty()) return true;
  Result<DeviceBuffer> block = device_.allocate(k::kGemmWorkspaceBytes, "cuBLASLt workspace");
  if (!block.is_ok()) {
    report(block.status());
    return false;
  }
  workspace_ = std::move(block).value();
  return true;
}

bool CudaOps::wait_for_compute() {
  report(ZINF_CUDA_STATUS(cudaStreamSynchronize(compute_.handle())));
  return !compute_.has_error();
}

bool CudaOps::supports_compute_dtype(DType dtype) const {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

void CudaOps::zero(Tensor t) {
  if (t.bytes() == 0 || !activate()) return;
  report(ZINF_CUDA_STATUS(cudaMemsetAsync(t.data(), 0, t.bytes(), compute_.handle())));
}

void CudaOps::copy(Tensor dst, Tensor src) {
  ZINF_CHECK(dst.numel() == src.numel(), "copy: element counts differ");
  if (dst.numel() == 0 || !activate()) return;
  if (dst.dtype() == src.dtype()) {
    report(ZINF_CUDA_STATUS(
        cudaMemcpyAsync(dst.data(), src.data(), dst.bytes(), cudaMemcpyDeviceToDevice, compute_.handle())));
    return;
  }
  ZINF_LAUNCH(convert, elem_of(dst.dtype()), dst.data(), elem_of(src.dtype()), src.data(), src.numel(), stream());
}

double CudaOps::sum_squares(std::span<const Tensor> tensors) {
  if (!activate()) return kNaN;
  std::size_t kernel_scratch_bytes = 0;
  for (const Tensor& t : tensors) {
    kernel_scratch_bytes = std::max(kernel_scratch_bytes, k::sum_squares_scratch_bytes(t.numel()));
  }
  if (!ensure_scratch(kAccumulatorBytes + kernel_scratch_bytes) || !ensure_host_staging(sizeof(double))) return kNaN;
  auto* total = static_cast<double*>(scratch_.data());
  void* kernel_scratch = static_cast<char*>(scratch_.data()) + kAccumulatorBytes;
  report(ZINF_CUDA_STATUS(cudaMemsetAsync(total, 0, sizeof(double), compute_.handle())));
  // One launch per tensor, in order, each adding its fp64 sum to `total`: the CPU's order.
  for (const Tensor& t : tensors) {
    if (t.numel() == 0) continue;
    ZINF_LAUNCH(sum_squares, elem_of(t.dtype()), t.data(), t.numel(), total, kernel_scratch,
                scratch_.bytes() - kAccumulatorBytes, stream());
  }
  report(ZINF_CUDA_STATUS(
      cudaMemcpyAsync(host_staging_.data(), total, sizeof(double), cudaMemcpyDeviceToHost, compute_.handle())));
  if (!wait_for_compute()) return kNaN;
  double result = 0;
  std::memcpy(&result, host_staging_.data(), sizeof(result));
  return result;
}

void CudaOps::adam_step(const kernels::AdamHyper& hyper, Tensor master, Tensor exp_avg, Tensor exp_avg_sq, Tensor grad,
                        const Tensor* param_half) {
  ZINF_CHECK(
      exp_avg.numel() == master.numel() && exp_avg_sq.numel() == master.numel() && grad.numel() == master.numel(),
      "adam_step: master, exp_avg, exp_avg_sq and grad differ in size");
  ZINF_CHECK(master.dtype() == DType::kF32 && exp_avg.dtype() == DType::kF32 && exp_avg_sq.dtype() == DType::kF32,
             "adam_step: master, exp_avg and exp_avg_sq are not fp32");
  ZINF_CHECK(param_half == nullptr || (param_half->numel() == master.numel() && param_half->dtype() != DType::kF32),
             "adam_step: param_half is not a bf16/fp16 tensor of master's size");
  if (master.numel() == 0 || !activate()) return;
  kernels::AdamSlice slice;
  slice.param = master.f32();
  slice.exp_avg = exp_avg.f32();
  slice.exp_avg_sq = exp_avg_sq.f32();
  slice.n = static_cast<std::size_t>(master.numel());
  if (param_half != nullptr) {
    slice.param_half = param_half->half();
    slice.param_half_format = half_format(param_half->dtype());
  }
  ZINF_LAUNCH(adam_step, hyper, slice, grad.data(), elem_of(grad.dtype()), stream());
}

void CudaOps::matmul_forward(Tensor out, std::int64_t out_col_begin, Tensor inp, Tensor weight, const Tensor* bias) {
  ZINF_CHECK(weight.shape().rank() == 2, "matmul_forward: weight is not [OC,C]");
  const std::int64_t oc = weight.dim(0);
  const std::int64_t c = weight.dim(1);
  ZINF_CHECK(cols(inp) == c, "matmul_forward: inp's last dimension is not weight's C");
  ZINF_CHECK(rows(out) == rows(inp), "matmul_forward: out and inp have different row counts");
  ZINF_CHECK(out_col_begin >= 0 && out_col_begin + oc <= cols(out),
             "matmul_forward: the column block [out_col_begin, +OC) is outside out");
  ZINF_CHECK(bias == nullptr || (bias->shape().rank() == 1 && bias->numel() == oc), "matmul_forward: bias is not [OC]");
  ZINF_CHECK(
      out.dtype() == inp.dtype() && weight.dtype() == inp.dtype() && (bias == nullptr || bias->dtype() == inp.dtype()),
      "matmul_forward: out, inp, weight and bias differ in dtype (all are the compute dtype)");
  const std::int64_t r = rows(inp);
  if (r == 0 || oc == 0 || !activate() || !ensure_workspace()) return;
  const k::GemmStatus status = k::matmul_forward(
      gemm_, elem_of(inp.dtype()), column_start(out, out_col_begin), cols(out), inp.data(), weight.data(),
      bias == nullptr ? nullptr : bias->data(), r, c, oc, workspace_.data(), workspace_.bytes(), stream());
  if (!status.ok()) {
    report(gemm_status(status).with_context(fmt::format(
        "matmul_forward (R={}, C={}, OC={}, {}, out columns [{}, {}) of {}{})", r, c, oc, dtype_name(inp.dtype()),
        out_col_begin, out_col_begin + oc, cols(out), bias == nullptr ? "" : ", bias")));
  }
}

void CudaOps::matmul_backward(Tensor dinp, GradMode dinp_mode, Tensor dweight, Tensor* dbias, Tensor dout,
                              std::int64_t dout_col_begin, Tensor inp, Tensor weight) {
  ZINF_CHECK(weight.shape().rank() == 2, "matmul_backward: weight is not [OC,C]");
  const std::int64_t oc = weight.dim(0);
  const std::int64_t c = weight.dim(1);
  ZINF_CHECK(dweight.shape() == weight.shape(), "matmul_backward: dweight's shape is not weight's");
  ZINF_CHECK(cols(inp) == c && cols(dinp) == c, "matmul_backward: inp/dinp's last dimension is not weight's C");
  ZINF_CHECK(rows(dinp) == rows(inp) && rows(dout) == rows(inp), "matmul_backward: row counts differ");
  ZINF_CHECK(dout_col_begin >= 0 && dout_col_begin + oc <= cols(dout),
             "matmul_backward: the column block [dout_col_begin, +OC) is outside dout");
  ZINF_CHECK(dbias == nullptr || (dbias->shape().rank() == 1 && dbias->numel() == oc),
             "matmul_backward: dbias is not [OC]");
  ZINF_CHECK(dinp.dtype() == inp.dtype() && dout.dtype() == inp.dtype() && weight.dtype() == inp.dtype(),
             "matmul_backward: dinp, dout, inp and weight differ in dtype (all are the compute dtype)");
  ZINF_CHECK(dweight.dtype() == DType::kF32 && (dbias == nullptr || dbias->dtype() == DType::kF32),
             "matmul_backward: dweight/dbias are not fp32");
  const std::int64_t r = rows(inp);
  if (!activate() || !ensure_workspace()) return;
  const Elem elem = elem_of(inp.dtype());
  const void* dout_block = column_start(dout, dout_col_begin);
  const auto shape_text = [&] {
    return fmt::format("matmul_backward (R={}, C={}, OC={}, {}, dout columns [{}, {}) of {})", r, c, oc,
                       dtype_name(inp.dtype()), dout_col_begin, dout_col_begin + oc, cols(dout));
  };
  k::GemmStatus status =
      k::matmul_backward_input(gemm_, elem, dinp.data(), dinp_mode == GradMode::kAccumulate, dout_block, cols(dout),
                               weight.data(), r, c, oc, workspace_.data(), workspace_.bytes(), stream());
  if (!status.ok()) report(gemm_status(status).with_context(shape_text() + ", dinp"));
  status = k::matmul_backward_weight(gemm_, elem, dweight.f32(), dout_block, cols(dout), inp.data(), r, c, oc,
                                     workspace_.data(), workspace_.bytes(), stream());
  if (!status.ok()) report(gemm_status(status).with_context(shape_text() + ", dweight"));
  if (dbias != nullptr) ZINF_LAUNCH(matmul_bias_backward, elem, dbias->f32(), dout_block, cols(dout), r, oc, stream());
}

void CudaOps::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias,
                                float eps) {
  const std::int64_t c = cols(inp);
  const std::int64_t r = rows(inp);
  ZINF_CHECK(out.shape() == inp.shape(), "layernorm_forward: out's shape is not inp's");
  ZINF_CHECK(mean.numel() == r && rstd.numel() == r, "layernorm_forward: mean/rstd are not [R]");
  ZINF_CHECK(weight.numel() == c && bias.numel() == c, "layernorm_forward: weight/bias are not [C]");
  ZINF_CHECK(out.dtype() == inp.dtype() && weight.dtype() == inp.dtype() && bias.dtype() == inp.dtype(),
             "layernorm_forward: out, inp, weight and bias differ in dtype (all are the compute dtype)");
  ZINF_CHECK(mean.dtype() == DType::kF32 && rstd.dtype() == DType::kF32, "layernorm_forward: mean/rstd are not fp32");
  if (r == 0 || !activate()) return;
  ZINF_LAUNCH(layernorm_forward, elem_of(inp.dtype()), out.data(), mean.f32(), rstd.f32(), inp.data(), weight.data(),
              bias.data(), r, c, eps, stream());
}

void CudaOps::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                 Tensor mean, Tensor rstd) {
  const std::int64_t c = cols(inp);
  const std::int64_t r = rows(inp);
  ZINF_CHECK(dinp.shape() == inp.shape() && dout.shape() == inp.shape(),
             "layernorm_backward: dinp/dout's shape is not inp's");
  ZINF_CHECK(mean.numel() == r && rstd.numel() == r, "layernorm_backward: mean/rstd are not [R]");
  ZINF_CHECK(weight.numel() == c && dweight.numel() == c && dbias.numel() == c,
             "layernorm_backward: weight/dweight/dbias are not [C]");
  ZINF_CHECK(dinp.dtype() == inp.dtype() && dout.dtype() == inp.dtype() && weight.dtype() == inp.dtype(),
             "layernorm_backward: dinp, dout, inp and weight differ in dtype (all are the compute dtype)");
  ZINF_CHECK(dweight.dtype() == DType::kF32 && dbias.dtype() == DType::kF32 && mean.dtype() == DType::kF32 &&
                 rstd.dtype() == DType::kF32,
             "layernorm_backward: dweight/dbias/mean/rstd are not fp32");
  if (r == 0 || !activate() || !ensure_scratch(k::layernorm_backward_scratch_bytes(r, c))) return;
  ZINF_LAUNCH(layernorm_backward, elem_of(inp.dtype()), dinp.data(), dweight.f32(), dbias.f32(), dout.data(),
              inp.data(), weight.data(), mean.f32(), rstd.f32(), r, c, scratch_.data(), scratch_.bytes(), stream());
}

void CudaOps::rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) {
  const std::int64_t c = cols(inp);
  const std::int64_t r = rows(inp);
  ZINF_CHECK(out.shape() == inp.shape(), "rmsnorm_forward: out's shape is not inp's");
  ZINF_CHECK(rstd.numel() == r && weight.numel() == c, "rmsnorm_forward: rstd is not [R] or weight not [C]");
  ZINF_CHECK(out.dtype() == inp.dtype() && weight.dtype() == inp.dtype() && rstd.dtype() == DType::kF32,
             "rmsnorm_forward: out, inp, weight are not one compute dtype, or rstd is not fp32");
  if (r == 0 || !activate()) return;
  ZINF_LAUNCH(rmsnorm_forward, elem_of(inp.dtype()), out.data(), rstd.f32(), inp.data(), weight.data(), r, c, eps,
              stream());
}

void CudaOps::rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) {
  const std::int64_t c = cols(inp);
  const std::int64_t r = rows(inp);
  ZINF_CHECK(dinp.shape() == inp.shape() && dout.shape() == inp.shape(),
             "rmsnorm_backward: dinp/dout's shape is not inp's");
  ZINF_CHECK(rstd.numel() == r && weight.numel() == c && dweight.numel() == c,
             "rmsnorm_backward: rstd is not [R] or weight/dweight not [C]");
  ZINF_CHECK(dinp.dtype() == inp.dtype() && dout.dtype() == inp.dtype() && weight.dtype() == inp.dtype() &&
                 dweight.dtype() == DType::kF32 && rstd.dtype() == DType::kF32,
             "rmsnorm_backward: dinp, dout, inp, weight are not one compute dtype, or dweight/rstd not fp32");
  if (r == 0 || !activate() || !ensure_scratch(k::rmsnorm_backward_scratch_bytes(r, c))) return;
  ZINF_LAUNCH(rmsnorm_backward, elem_of(inp.dtype()), dinp.data(), dweight.f32(), dout.data(), inp.data(),
              weight.data(), rstd.f32(), r, c, scratch_.data(), scratch_.bytes(), stream());
}

void CudaOps::swiglu_forward(Tensor out, Tensor gate, Tensor up) {
  ZINF_CHECK(out.numel() == gate.numel() && up.numel() == gate.numel(), "swiglu_forward: tensors differ in size");
  ZINF_CHECK(out.dtype() == gate.dtype() && up.dtype() == gate.dtype(), "swiglu_forward: tensors differ in dtype");
  if (gate.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(swiglu_forward, elem_of(gate.dtype()), out.data(), gate.data(), up.data(), gate.numel(), stream());
}

void CudaOps::swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up) {
  ZINF_CHECK(dgate.numel() == gate.numel() && dup.numel() == gate.numel() && dout.numel() == gate.numel() &&
                 up.numel() == gate.numel(),
             "swiglu_backward: tensors differ in size");
  ZINF_CHECK(dgate.dtype() == gate.dtype() && dup.dtype() == gate.dtype() && dout.dtype() == gate.dtype() &&
                 up.dtype() == gate.dtype(),
             "swiglu_backward: tensors differ in dtype");
  if (gate.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(swiglu_backward, elem_of(gate.dtype()), dgate.data(), dup.data(), dout.data(), gate.data(), up.data(),
              gate.numel(), stream());
}

namespace {
kernels::cpu::RopeShape rope_shape(const Tensor& inp, const RopeHeads& h) {
  return {.batch = static_cast<std::size_t>(inp.dim(0)),
          .seq_len = static_cast<std::size_t>(inp.dim(1)),
          .row_stride = static_cast<std::size_t>(inp.dim(2)),
          .heads = static_cast<std::size_t>(h.heads),
          .head_dim = static_cast<std::size_t>(h.head_dim),
          .rotary_dim = static_cast<std::size_t>(h.rotary_dim),
          .pos_offset = 0};
}
kernels::GqaShape gqa_shape(const Tensor& full, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) {
  return {.rows = static_cast<std::size_t>(rows(full)),
          .heads = static_cast<std::size_t>(heads),
          .kv_heads = static_cast<std::size_t>(kv_heads),
          .head_dim = static_cast<std::size_t>(head_dim)};
}
}  // namespace

void CudaOps::rope_forward(Tensor out, Tensor inp, Tensor cos, Tensor sin, const RopeHeads& heads) {
  check_rope(out, inp, cos, sin, heads);
  if (inp.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(rope_forward, elem_of(inp.dtype()), out.data(), inp.data(), cos.f32(), sin.f32(), rope_shape(inp, heads),
              stream());
}

void CudaOps::rope_backward(Tensor dinp, Tensor dout, Tensor cos, Tensor sin, const RopeHeads& heads) {
  check_rope(dinp, dout, cos, sin, heads);
  if (dout.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(rope_backward, elem_of(dout.dtype()), dinp.data(), dout.data(), cos.f32(), sin.f32(),
              rope_shape(dout, heads), stream());
}

void CudaOps::gqa_expand(Tensor full, Tensor packed, std::int64_t heads, std::int64_t kv_heads) {
  const std::int64_t head_dim = gqa_head_dim(full, packed, heads, kv_heads);
  if (full.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(gqa_expand, elem_of(full.dtype()), full.data(), packed.data(), gqa_shape(full, heads, kv_heads, head_dim),
              stream());
}

void CudaOps::gqa_reduce(Tensor dpacked, Tensor dfull, std::int64_t heads, std::int64_t kv_heads) {
  const std::int64_t head_dim = gqa_head_dim(dfull, dpacked, heads, kv_heads);
  if (dfull.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(gqa_reduce, elem_of(dfull.dtype()), dpacked.data(), dfull.data(),
              gqa_shape(dfull, heads, kv_heads, head_dim), stream());
}

void CudaOps::gelu_forward(Tensor out, Tensor inp) {
  ZINF_CHECK(out.numel() == inp.numel(), "gelu_forward: out and inp differ in size");
  ZINF_CHECK(out.dtype() == inp.dtype(), "gelu_forward: out and inp differ in dtype");
  if (inp.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(gelu_forward, elem_of(inp.dtype()), out.data(), inp.data(), inp.numel(), stream());
}

void CudaOps::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
  ZINF_CHECK(dinp.numel() == inp.numel() && dout.numel() == inp.numel(), "gelu_backward: tensors differ in size");
  ZINF_CHECK(dinp.dtype() == inp.dtype() && dout.dtype() == inp.dtype(), "gelu_backward: tensors differ in dtype");
  if (inp.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(gelu_backward, elem_of(inp.dtype()), dinp.data(), inp.data(), dout.data(), inp.numel(), stream());
}

void CudaOps::residual_forward(Tensor out, Tensor a, Tensor b) {
  ZINF_CHECK(out.numel() == a.numel() && b.numel() == a.numel(), "residual_forward: tensors differ in size");
  ZINF_CHECK(out.dtype() == a.dtype() && b.dtype() == a.dtype(), "residual_forward: tensors differ in dtype");
  if (a.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(residual_forward, elem_of(a.dtype()), out.data(), a.data(), b.data(), a.numel(), stream());
}

void CudaOps::residual_backward(Tensor da, Tensor db, Tensor dout) {
  ZINF_CHECK(da.numel() == dout.numel() && db.numel() == dout.numel(), "residual_backward: tensors differ in size");
  ZINF_CHECK(da.dtype() == dout.dtype() && db.dtype() == dout.dtype(), "residual_backward: tensors differ in dtype");
  if (dout.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(residual_backward, elem_of(dout.dtype()), da.data(), db.data(), dout.data(), dout.numel(), stream());
}

void CudaOps::embedding_forward(Tensor out, std::span<const std::int32_t> tokens, Tensor wte, Tensor wpe) {
  embedding_forward_rows(out, tokens, wte, 0, wpe);
}

void CudaOps::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, std::span<const std::int32_t> tokens) {
  embedding_backward_rows(dwte, 0, dwpe, dout, tokens, static_cast<std::int64_t>(rows(dwte)));
}

void CudaOps::embedding_forward_rows(Tensor out, std::span<const std::int32_t> tokens, Tensor wte_rows,
                                     std::int64_t row_begin, Tensor wpe) {
  ZINF_CHECK(out.shape().rank() == 3, "embedding_forward_rows: out is not [B,T,C]");
  const std::int64_t b = out.dim(0);
  const std::int64_t t = out.dim(1);
  const std::int64_t c = cols(out);
  ZINF_CHECK(static_cast<std::int64_t>(tokens.size()) == b * t, "embedding_forward_rows: tokens are not B*T ids");
  ZINF_CHECK(cols(wte_rows) == c && cols(wpe) == c, "embedding_forward_rows: wte/wpe's last dimension is not C");
  ZINF_CHECK(rows(wpe) >= t && row_begin >= 0, "embedding_forward_rows: wpe has fewer than T positions");
  ZINF_CHECK(wte_rows.dtype() == out.dtype() && wpe.dtype() == out.dtype(),
             "embedding_forward_rows: out, wte and wpe differ in dtype (all are the compute dtype)");
  if (out.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(embedding_forward_rows, elem_of(out.dtype()), out.data(), tokens.data(), wte_rows.data(), row_begin,
              rows(wte_rows), wpe.data(), b, t, c, stream());
}

void CudaOps::embedding_backward_rows(Tensor dwte_rows, std::int64_t row_begin, Tensor dwpe, Tensor dout,
                                      std::span<const std::int32_t> tokens, std::int64_t vocab) {
  ZINF_CHECK(dout.shape().rank() == 3, "embedding_backward_rows: dout is not [B,T,C]");
  const std::int64_t b = dout.dim(0);
  const std::int64_t t = dout.dim(1);
  const std::int64_t c = cols(dout);
  ZINF_CHECK(static_cast<std::int64_t>(tokens.size()) == b * t, "embedding_backward_rows: tokens are not B*T ids");
  ZINF_CHECK(cols(dwte_rows) == c && dwte_rows.dtype() == DType::kF32,
             "embedding_backward_rows: dwte is not fp32 [rows,C]");
  ZINF_CHECK(row_begin >= 0 && row_begin + rows(dwte_rows) <= vocab,
             "embedding_backward_rows: the rows lie outside the vocabulary");
  const bool positions = dwpe.data() != nullptr;
  ZINF_CHECK(!positions || (cols(dwpe) == c && rows(dwpe) >= t && dwpe.dtype() == DType::kF32),
             "embedding_backward_rows: dwpe is not fp32 [>=T,C]");
  if (dout.numel() == 0 || !activate()) return;
  if (!ensure_scratch(k::embedding_backward_scratch_bytes(b, t, c, vocab))) return;
  ZINF_LAUNCH(embedding_backward_rows, elem_of(dout.dtype()), dwte_rows.f32(), row_begin, rows(dwte_rows),
              positions ? dwpe.f32() : nullptr, dout.data(), tokens.data(), b, t, c, vocab, scratch_.data(),
              scratch_.bytes(), stream());
}

// The CUDA attention kernels take one K and one V per query head (qkv [B,T,3C]). With grouped K/V
// heads the packed qkv is expanded into the ops' scratch first (gqa_expand), and the backward's
// gradient summed back over each group (gqa_reduce, a fixed fp32 order) before it is added to dqkv.
void CudaOps::attention_forward(Tensor out, Tensor lse, Tensor qkv) {
  const AttentionHeads h = check_attention(out, lse, qkv);
  if (out.numel() == 0 || !activate()) return;
  const void* core_qkv = qkv.data();
  if (h.kv_heads != h.heads) {
    const Tensor full_shape = Tensor(nullptr, qkv.dtype(), Shape{out.dim(0), out.dim(1), 3 * cols(out)});
    if (!ensure_scratch(full_shape.bytes())) return;
    const Tensor full = Tensor(scratch_.data(), qkv.dtype(), full_shape.shape());
    gqa_expand(full, qkv, h.heads, h.kv_heads);
    core_qkv = full.data();
  }
  ZINF_LAUNCH(attention_forward, elem_of(qkv.dtype()), out.data(), lse.f32(), core_qkv, out.dim(0), out.dim(1),
              cols(out), h.heads, stream());
}

void CudaOps::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse) {
  const AttentionHeads h = check_attention(out, lse, qkv);
  ZINF_CHECK(dqkv.shape() == qkv.shape() && dout.shape() == out.shape(),
             "attention_backward: dqkv/dout's shape is not qkv/out's");
  ZINF_CHECK(dqkv.dtype() == qkv.dtype() && dout.dtype() == qkv.dtype(),
             "attention_backward: dqkv, dout and qkv differ in dtype (all are the compute dtype)");
  if (out.numel() == 0 || !activate()) return;
  const std::int64_t b = out.dim(0);
  const std::int64_t t = out.dim(1);
  const std::int64_t c = cols(out);
  const std::size_t kernel_bytes = k::attention_backward_scratch_bytes(b, t, c, h.heads);
  if (h.kv_heads == h.heads) {
    if (!ensure_scratch(kernel_bytes)) return;
    ZINF_LAUNCH(attention_backward, elem_of(qkv.dtype()), dqkv.data(), dout.data(), qkv.data(), out.data(), lse.f32(),
                b, t, c, h.heads, scratch_.data(), scratch_.bytes(), stream());
    return;
  }
  // Scratch: [full | dfull | dpacked | the kernel's], each piece 256-byte aligned.
  const Tensor full_shape = Tensor(nullptr, qkv.dtype(), Shape{b, t, 3 * c});
  const std::size_t full_bytes = round_up(full_shape.bytes(), kCarveAlign);
  const std::size_t packed_bytes = round_up(qkv.bytes(), kCarveAlign);
  if (!ensure_scratch(2 * full_bytes + packed_bytes + kernel_bytes)) return;
  char* base = static_cast<char*>(scratch_.data());
  const Tensor full = Tensor(base, qkv.dtype(), full_shape.shape());
  const Tensor dfull = Tensor(base + full_bytes, qkv.dtype(), full_shape.shape());
  const Tensor dpacked = Tensor(base + 2 * full_bytes, qkv.dtype(), qkv.shape());
  gqa_expand(full, qkv, h.heads, h.kv_heads);
  zero(dfull);
  ZINF_LAUNCH(attention_backward, elem_of(qkv.dtype()), dfull.data(), dout.data(), full.data(), out.data(), lse.f32(),
              b, t, c, h.heads, base + 2 * full_bytes + packed_bytes, kernel_bytes, stream());
  gqa_reduce(dpacked, dfull, h.heads, h.kv_heads);
  residual_forward(dqkv, dqkv, dpacked);  // dqkv += the group sums (ops.h: accumulated)
}

double CudaOps::cross_entropy_forward(Tensor logits, std::span<const std::int32_t> targets) {
  const std::int64_t r = rows(logits);
  const std::int64_t v = cols(logits);
  ZINF_CHECK(static_cast<std::int64_t>(targets.size()) == r, "cross_entropy_forward: targets are not R ids");
  if (r == 0) return 0.0;  // as the CPU kernel: the mean over no rows is 0
  const std::size_t loss_bytes = static_cast<std::size_t>(r) * sizeof(float);
  if (!activate() || !ensure_scratch(loss_bytes) || !ensure_host_staging(loss_bytes)) return kNaN;
  auto* losses = static_cast<float*>(scratch_.data());
  ZINF_LAUNCH(cross_entropy_forward, elem_of(logits.dtype()), losses, logits.data(), targets.data(), r, v, stream());
  report(ZINF_CUDA_STATUS(
      cudaMemcpyAsync(host_staging_.data(), losses, loss_bytes, cudaMemcpyDeviceToHost, compute_.handle())));
  if (!wait_for_compute()) return kNaN;
  // The mean in fp64, rows added in order: the CPU kernel's arithmetic on the per-row losses.
  const auto* host_losses = static_cast<const float*>(host_staging_.data());
  double sum = 0.0;
  for (std::int64_t row = 0; row < r; ++row) sum += static_cast<double>(host_losses[row]);
  return sum / static_cast<double>(r);
}

void CudaOps::cross_entropy_backward(Tensor dlogits, Tensor logits, std::span<const std::int32_t> targets,
                                     float dloss) {
  ZINF_CHECK(dlogits.shape() == logits.shape(), "cross_entropy_backward: dlogits's shape is not logits's");
  ZINF_CHECK(dlogits.dtype() == logits.dtype(), "cross_entropy_backward: dlogits and logits differ in dtype");
  const std::int64_t r = rows(logits);
  ZINF_CHECK(static_cast<std::int64_t>(targets.size()) == r, "cross_entropy_backward: targets are not R ids");
  if (r == 0 || !activate()) return;
  ZINF_LAUNCH(cross_entropy_backward, elem_of(logits.dtype()), dlogits.data(), logits.data(), targets.data(), dloss, r,
              cols(logits), stream());
}

}  // namespace zinf::device
