// CudaOps (see cuda_ops.h): shape and dtype checks, then the kernels::cuda launch on the compute
// stream, its LaunchStatus kept as the stream's first error when non-zero. This file: lifetime,
// scratch/staging/workspace blocks, zero/copy/sum_squares, the optimizer step, the matmuls and the
// loss; the layers' kernels are in cuda_ops_layers.cpp. Activation tensors may be [B,T,C] or
// [R,C]; "rows" is every dimension but the last, multiplied out (cuda_ops_support.h).
#include "libengine/device/cuda_ops.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/adam.h"
#include "kernels/convert.h"
#include "kernels/cross_entropy.h"
#include "kernels/matmul.h"
#include "libengine/core/check.h"
#include "libengine/device/cuda_check.h"
#include "libengine/device/cuda_device.h"
#include "libengine/device/cuda_ops_support.h"
#include "libengine/device/ops_checks.h"

namespace zinf::device {
namespace {

namespace k = zinf::kernels::cuda;
using cuda_ops_detail::cols;
using cuda_ops_detail::elem_of;
using cuda_ops_detail::half_format;
using cuda_ops_detail::round_up;
using cuda_ops_detail::rows;
using k::Elem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// sum_squares keeps its fp64 total in the first bytes of the scratch block; the kernel's own
// scratch starts after them, keeping the 256-byte alignment kernels/cuda_launch.h promises.
constexpr std::size_t kAccumulatorBytes = 256;
// Growth steps of the scratch and staging blocks, so that a slightly larger request does not
// reallocate every time.
constexpr std::size_t kScratchGranuleBytes = std::size_t{64} << 10;
constexpr std::size_t kStagingGranuleBytes = std::size_t{4} << 10;

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

}  // namespace

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
