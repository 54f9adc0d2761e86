// CudaOps: the CUDA backend of Ops (device/ops.h). Each method checks shapes and element types as
// CpuOps does, plus ops.h's dtype rules (activations and the parameters read in the compute dtype —
// fp32, bf16 or fp16 —; parameter gradients, LayerNorm statistics and the attention lse fp32), then
// launches the kernels::cuda kernel on the device's compute stream and returns without waiting.
// Matrix products go through cuBLASLt (kernels/matmul.h, which documents the layouts).
//
// Resources it owns, all from its device and counted on its tiers:
// - one scratch block of device memory ("CUDA ops scratch") for the kernels that need temporary
//   memory, grown on demand (the compute stream is drained before the old block is freed);
// - the 32 MiB cuBLASLt workspace ("cuBLASLt workspace"), taken at the first matrix product;
// - a page-locked host block ("CUDA ops host staging") that cross_entropy_forward's per-row losses
//   and sum_squares' total come back through.
// Failures — a launch, a cuBLASLt call, a scratch or workspace that does not fit the budget — skip
// the work and become the compute stream's first error, returned by its next synchronize() (or the
// device's); a value-returning method returns NaN then. Shape and dtype mismatches are bugs
// (ZINF_CHECK). Thread-safety: one host thread at a time, as ops.h says; that thread need not be the
// one that created the device (every call makes the device current first).
// What it is not: an allocator for callers, or a cache of anything but cuBLASLt plans.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "libengine/core/status.h"
#include "libengine/device/device.h"
#include "libengine/device/ops.h"

namespace zinf::kernels::cuda {
struct GemmContext;
}

namespace zinf::device {

class CudaStream;

class CudaOps final : public Ops {
 public:
  // The ops of `device` (a CUDA device on `device_index`) running on `compute`, its compute stream;
  // both must outlive the CudaOps. Fails when the cuBLASLt handle cannot be created.
  static Result<std::unique_ptr<CudaOps>> create(Device& device, CudaStream& compute, int device_index);
  // Waits for the compute stream (the scratch may still be in use), then releases everything.
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  bool supports_compute_dtype(DType dtype) const override;
  void zero(Tensor t) override;
  void copy(Tensor dst, Tensor src) override;
  double sum_squares(std::span<const Tensor> tensors) override;
  void adam_step(const kernels::AdamHyper& hyper, Tensor master, Tensor exp_avg, Tensor exp_avg_sq, Tensor grad,
                 const Tensor* param_half) override;
  void matmul_forward(Tensor out, std::int64_t out_col_begin, Tensor inp, Tensor weight, const Tensor* bias) override;
  void matmul_backward(Tensor dinp, GradMode dinp_mode, Tensor dweight, Tensor* dbias, Tensor dout,
                       std::int64_t dout_col_begin, Tensor inp, Tensor weight) override;
  void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias,
                         float eps) override;
  void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                          Tensor mean, Tensor rstd) override;
  void rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) override;
  void rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) override;
  void swiglu_forward(Tensor out, Tensor gate, Tensor up) override;
  void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up) override;
  void rope_forward(Tensor out, Tensor inp, Tensor cos, Tensor sin, const RopeHeads& heads) override;
  void rope_backward(Tensor dinp, Tensor dout, Tensor cos, Tensor sin, const RopeHeads& heads) override;
  void gqa_expand(Tensor full, Tensor packed, std::int64_t heads, std::int64_t kv_heads) override;
  void gqa_reduce(Tensor dpacked, Tensor dfull, std::int64_t heads, std::int64_t kv_heads) override;
  void gelu_forward(Tensor out, Tensor inp) override;
  void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) override;
  void residual_forward(Tensor out, Tensor a, Tensor b) override;
  void residual_backward(Tensor da, Tensor db, Tensor dout) override;
  void embedding_forward_rows(Tensor out, std::span<const std::int32_t> tokens, Tensor wte_rows, std::int64_t row_begin,
                              Tensor wpe) override;
  void embedding_backward_rows(Tensor dwte_rows, std::int64_t row_begin, Tensor dwpe, Tensor dout,
                               std::span<const std::int32_t> tokens, std::int64_t vocab) override;
  void attention_forward(Tensor out, Tensor lse, Tensor qkv) override;
  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse) override;
  double cross_entropy_forward(Tensor logits, std::span<const std::int32_t> targets) override;
  void cross_entropy_backward(Tensor dlogits, Tensor logits, std::span<const std::int32_t> targets,
                              float dloss) override;

 private:
  CudaOps(Device& device, CudaStream& compute, int device_index, kernels::cuda::GemmContext* gemm);

  // Keeps `status` (when an error) as the compute stream's first error.
  void report(Status status);
  // Makes the device current on the calling thread; false (reported) when that fails.
  bool activate();
  // The compute stream as the kernels take it (a cudaStream_t).
  void* stream() const;
  // Makes the scratch block hold at least `bytes`; false (reported) when it cannot.
  bool ensure_scratch(std::size_t bytes);
  // Makes the page-locked staging block hold at least `bytes`; false (reported) when it cannot.
  bool ensure_host_staging(std::size_t bytes);
  // The cuBLASLt workspace, taken on first use; false (reported) when it does not fit.
  bool ensure_workspace();
  // Waits for the compute stream; false when it or anything on it failed (the error stays kept for
  // the next synchronize()).
  bool wait_for_compute();

  Device& device_;
  CudaStream& compute_;
  int device_index_;
  kernels::cuda::GemmContext* gemm_;  // owned; destroyed in ~CudaOps
  DeviceBuffer scratch_;
  DeviceBuffer workspace_;
  DeviceBuffer host_staging_;
};

}  // namespace zinf::device
