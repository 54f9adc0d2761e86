// ReplicatedStates: ZeRO stage 0 in one process — every model state (parameters, gradients, fp32
// master weights, Adam m and v) resident on the compute device, nothing partitioned or offloaded.
// It implements ModelStates (zero/model_states.h): the model's ParamSource and GradSink, the owner of
// the arrays the optimizer step and the checkpoint writer work on.
//
// Storage, one flat device buffer per kind, each parameter's offset aligned to 32 elements:
//   fp32:       params (master == working copy), grads, Adam m, Adam v — all fp32. acquire() returns
//               a view of the params directly and grad_buffer() the fp32 gradient storage directly
//               (zero-copy; the model accumulates with +=).
//   bf16/fp16:  fp32 master params, Adam m, Adam v; a half working copy of the params (rewritten by
//               the fused Adam step) and half gradients. acquire() returns the half copy itself when
//               the model computes in that precision (compute_dtype, CUDA), or widens it into an fp32
//               workspace (the CPU backend computes in fp32); grad_buffer() hands an fp32 workspace
//               holding the gradient so far (zero after zero_grads()) and commit() rounds it back
//               into the half gradient. Workspaces come from a pool of device buffers keyed by size
//               and counted on the device tier, so once a step has run, later steps with the same
//               call pattern allocate nothing.
// Every buffer comes from Device::allocate with a "what" naming the state, so the tier's accounting
// is exactly the sum of state_bytes(), and an over-budget model fails naming the state that did not
// fit. Every computation on the states (conversions, zeroing, the optimizer's kernels) goes through
// the device's Ops and copy/zero, in order on its compute stream, so the same code serves the CPU
// and the CUDA backend.
//
// What it is not: partitioned (ZeRO-1/2/3), offloaded, or thread-safe — every call comes from the
// thread running the model or the optimizer.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/device.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/tensor/named_array.h"
#include "libengine/tensor/tensor.h"
#include "libengine/zero/model_states.h"

namespace zinf::zero {

struct ReplicatedStatesOptions {
  DType precision = DType::kF32;      // storage precision of params and grads
  DType compute_dtype = DType::kF32;  // of the views acquire() hands out: fp32, or `precision` itself
  std::uint64_t seed = 0;             // initial values: ParamTable::init_values(seed, ...)
  // Data parallelism: the gradients are all-reduced (summed) over the ranks before the step, which
  // every rank then takes alike. Null: one rank. Must outlive the states.
  comm::Communicator* comm = nullptr;
};

// What the optimizer step needs for one parameter, as views of the device storage: its fp32 master
// copy, Adam moments, gradient (in storage precision) and, in mixed precision, the half working copy
// the step rewrites.
struct ParamStates {
  Tensor master;      // fp32 [N]
  Tensor exp_avg;     // fp32 [N], Adam m
  Tensor exp_avg_sq;  // fp32 [N], Adam v
  Tensor grad;        // [N] fp32, bf16 or fp16 (the storage precision)
  Tensor param_half;  // [N] bf16/fp16 working copy; no data (data() == nullptr) under fp32
};

class ReplicatedStates final : public ModelStates {
 public:
  // Allocates every state of `table` on `device` and initialises the parameters from
  // ParamTable::init_values(options.seed, ...); gradients and moments start at zero. `table` and
  // `device` must outlive the result. Fails with InvalidArgument for an empty table or a
  // compute_dtype that is neither fp32 nor the precision or that the device cannot compute in, and
  // with OutOfMemory naming the state that does not fit the device budget (nothing stays allocated
  // then).
  static Result<std::unique_ptr<ReplicatedStates>> create(const model::ParamTable& table, device::Device& device,
                                                          const ReplicatedStatesOptions& options);

  ReplicatedStates(const ReplicatedStates&) = delete;
  ReplicatedStates& operator=(const ReplicatedStates&) = delete;
  ~ReplicatedStates() override;

  // ParamSource (see model/param_source.h), in compute_dtype. A view of the stored copy when
  // compute_dtype is the precision (never fails); otherwise the half copy widened into a pooled fp32
  // workspace, which fails with OutOfMemory naming the workspace when the pool must grow and the
  // budget is exhausted (nothing acquired then).
  Result<Tensor> acquire(model::ParamId id) override;
  void release(model::ParamId id) override;

  // GradSink (see model/param_source.h). The buffer holds the gradient accumulated so far in this
  // step (zero after zero_grads()). Asked for again before its commit it returns the same buffer;
  // after a commit it may be handed out, added to and committed again. fp32: the gradient storage itself; commit() does
  // nothing. Mixed precision: a pooled fp32 workspace; commit() rounds it into the half gradient (to +-inf where an
  // fp16 value overflows, which the optimizer detects) and returns the workspace to the pool.
  Result<Tensor> grad_buffer(model::ParamId id) override;
  Status commit(model::ParamId id) override;

  // Sets every gradient to zero (on the compute stream); never fails. Precondition: no gradient
  // buffer is handed out.
  Status zero_grads() override;

  // ModelStates: the optimizer step over every parameter through the device's Ops (the norm is the
  // one value that comes back to the host), and checkpoints through the host view of
  // checkpoint_arrays() (a host mirror on CUDA).
  Result<optim::StepReport> optimizer_step(optim::Optimizer& optimizer, double lr, optim::LossScaler& scaler) override;
  std::vector<CheckpointArrayInfo> checkpoint_layout() const override;
  Status save_checkpoint(CheckpointSink& sink) override;
  Status load_checkpoint(CheckpointSource& source) override;
  spec::StatePlacement placement() const override { return {}; }
  std::string describe() const override { return "ZeRO-0: every state replicated on the device"; }

  DType precision() const { return precision_; }
  DType compute_dtype() const { return compute_dtype_; }
  const model::ParamTable& table() const override { return table_; }
  device::Device& device() const override { return device_; }

  // Bytes per kind of state, in this order, all on the device tier: "params" (the compute-precision
  // copy; fp32 under fp32), "grads", "master_params" (0 under fp32: the params are the master),
  // "adam_m", "adam_v", "workspace" (the pooled fp32 workspaces allocated so far). Padding for
  // alignment is included, so the sum equals what this object holds on the device tier.
  std::vector<StateBytes> state_bytes() const override;

  // The fp32 arrays a checkpoint must hold, in host memory: "master/<param name>" for every
  // parameter in table order, then "adam_m/<name>", then "adam_v/<name>". On the CPU backend they
  // are views of the states themselves; on a device the host cannot address (CUDA) they are views
  // of a host mirror (allocated on the device's host tier at the first call; OutOfMemory names it).
  // Before a save, pull_checkpoint_arrays() makes them hold the current states; after a load into
  // them, push_checkpoint_arrays() makes the states (and the half working copy) follow.
  Result<std::vector<NamedArray>> checkpoint_arrays();
  // Device -> the arrays (waits for the copies; no-op on the CPU backend). Precondition:
  // checkpoint_arrays() was called. Fails with the device's error.
  Status pull_checkpoint_arrays();
  // The arrays -> device, then the half working copy is rewritten from the fp32 master params.
  // Precondition: checkpoint_arrays() was called. Fails with the device's error.
  Status push_checkpoint_arrays();
  // Rewrites the half working copy from the fp32 master params; no-op under fp32.
  void refresh_working_copy();
  // The arrays the optimizer step updates for `id`. Precondition: the parameter is neither acquired
  // nor has its gradient buffer handed out.
  ParamStates param_states(model::ParamId id);

 private:
  ReplicatedStates(const model::ParamTable& table, device::Device& device, const ReplicatedStatesOptions& options);
  Status allocate_states();
  Status initialise_params();
  bool host_addressable() const { return device_.kind() == device::DeviceKind::kCpu; }
  // What a checkpoint holds, in checkpoint_arrays() order: the fp32 master params, Adam m, Adam v
  // (flat buffers of padded_numel_ fp32 each).
  std::array<const device::DeviceBuffer*, 3> checkpointed_states() const;
  // A view of `count` elements of `dtype` at element `offset` of a flat state buffer.
  Tensor flat_view(const device::DeviceBuffer& buffer, DType dtype, std::int64_t offset, Shape shape) const;
  bool mixed() const { return precision_ != DType::kF32; }
  // An fp32 workspace of `bytes` rounded up to 64 from the pool, or a new one counted on the tier
  // (contents unspecified). Fails with OutOfMemory naming the workspace and parameter `id`.
  Result<device::DeviceBuffer> take_workspace(std::size_t bytes, model::ParamId id);
  void return_workspace(device::DeviceBuffer buffer);
  // An fp32 copy of `stored` (a parameter's half params or grads) in a pooled workspace, which
  // `slot` keeps until it is returned. Fails as take_workspace() does (nothing taken then).
  Result<Tensor> widen_into_workspace(const Tensor& stored, model::ParamId id, device::DeviceBuffer& slot);

  const model::ParamTable& table_;
  device::Device& device_;
  DType precision_;
  DType compute_dtype_;
  std::uint64_t seed_;
  comm::Communicator* comm_;
  std::vector<std::int64_t> offsets_;  // element offset of each parameter in every flat buffer
  std::int64_t padded_numel_ = 0;      // elements in each flat buffer

  device::DeviceBuffer params_;  // fp32 params (fp32) or the half working copy (mixed)
  device::DeviceBuffer grads_;   // fp32 or half gradients
  device::DeviceBuffer master_;  // fp32 master params (mixed only)
  device::DeviceBuffer adam_m_;
  device::DeviceBuffer adam_v_;

  // Mixed precision: free workspaces by byte size, and the ones handed out per parameter.
  std::vector<std::pair<std::size_t, device::DeviceBuffer>> free_workspaces_;
  std::vector<device::DeviceBuffer> param_workspaces_;
  std::vector<device::DeviceBuffer> grad_workspaces_;
  std::uint64_t workspace_bytes_ = 0;
  // Host copy of master, m and v for checkpoints on a device the host cannot address.
  device::DeviceBuffer checkpoint_mirror_;
  // Which parameters are acquired / have their gradient handed out (to catch misuse).
  std::vector<bool> acquired_;
  std::vector<bool> grad_out_;
};

}  // namespace zinf::zero
