// StateStore: where one kind of model state lives — this rank's slices of every parameter
// (partition.h), flat, of one element type — on the device, in host memory or on NVMe. The tier
// decides how values get in and out (a copy on a stream, a memcpy, an NVMe write behind); the
// engine's parts (PartitionedStates, its gradient path and optimizer pipeline) ask the store and do
// not branch on spec::Tier themselves. Made by make_state_store(); the parameters use all three
// tiers, the gradients and (optimizer on the device or the CPU) the fp32 master weights and Adam
// moments the device and host ones; the optimizer states on NVMe move by sub-group through the
// optimizer pipeline instead (docs/architecture.md §4).
//
// Memory: the device and host stores allocate their flat array when made, from the device's
// budgeted tiers; the NVMe store holds one extent per parameter, made by put() and owned by the
// NvmeStateStore it is given. Not thread-safe: the training loop's thread makes every call. Copies
// it issues on a stream read their source until that stream passes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/cpu_ops.h"
#include "libengine/device/device.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/state_placement.h"
#include "libengine/tensor/tensor.h"
#include "libengine/zero/nvme_state_store.h"
#include "libengine/zero/param_home.h"
#include "libengine/zero/partition.h"

namespace zinf::zero {

// Host or device memory of `bytes` for `what`, from the device's budgeted tier: an allocation over
// the budget is the configuration's error and names the scenario field to change
// (scenario.device_memory, scenario.zero.host_memory); the system refusing memory is its own error.
Result<device::DeviceBuffer> allocate_on_tier(device::Device& device, spec::Tier tier, std::size_t bytes,
                                              std::string what);

// allocate_on_tier() on the host tier: the engine's host buffers (pipeline sets, staging).
Result<device::DeviceBuffer> allocate_host_buffer(device::Device& device, std::size_t bytes, std::string what);
// An OutOfMemory within a budget becomes InvalidArgument "<field>: <message>; <hint>"; any other
// status, and the system refusing memory, is returned as it is.
Status as_field_error(const Status& status, std::string_view field, std::string_view hint);

// "device", "cpu" or "nvme": the words of the scenario's zero fields.
std::string_view tier_word(spec::Tier tier);

class StateStore : public ParamHomes {
 public:
  virtual ~StateStore() = default;
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  spec::Tier tier() const { return tier_; }
  DType dtype() const { return dtype_; }
  // Parameters in the partition (ids 0 .. parameter_count() - 1).
  model::ParamId parameter_count() const { return partition_.size(); }
  // Bytes of parameter id's slice.
  std::size_t slice_bytes(model::ParamId id) const {
    return static_cast<std::size_t>(partition_[id].owned) * dtype_size_bytes(dtype_);
  }
  // Where the values are: device memory, host memory, or neither (NVMe, reached by transfers only).
  virtual bool on_device() const = 0;
  virtual bool in_host_memory() const = 0;
  bool on_nvme() const { return !on_device() && !in_host_memory(); }

  // Parameter id's slice (device or host memory; a device tensor on the device). Precondition:
  // not on NVMe.
  virtual Tensor slice(model::ParamId id) const = 0;
  // The whole flat array in host memory (a region NVMe transfers may name); empty elsewhere.
  virtual std::span<std::byte> host_region() const { return {}; }

  // Parameter id's initial values (host memory, this store's dtype): copied on `stream` (device or
  // host), or written to a new NVMe extent (synchronously; fails with the store's error). The
  // caller keeps `host_values` until `stream` passes the copy.
  virtual Status put(model::ParamId id, const void* host_values, device::Stream& stream) = 0;
  // New values of parameter id after a step (host memory): copied to the device on `h2d` (returns
  // the bytes that crossed to the device), copied in host memory at once (unless they are already
  // there), or written behind to the NVMe extent (wait()/wait_writes() say when it is done; the
  // caller keeps `host_values` unchanged until then). Fails with the NVMe store's error only.
  virtual Result<std::size_t> publish(model::ParamId id, const void* host_values, device::Stream& h2d) = 0;
  // Parameter id's slice from device memory (`source`, this store's dtype), on `stream`: device to
  // device, or down to host memory. Precondition: not on NVMe.
  virtual void copy_from_device(model::ParamId id, const void* source, device::Stream& stream) = 0;
  // Every slice to zero: on `stream` on the device, at once in host memory. Precondition: not on NVMe.
  virtual void zero(device::Stream& stream) = 0;
  // Sum over every parameter of the sum of its squares, one slice per parameter in table order,
  // through the kernels where the values live (the device's Ops, or `host_ops`): the kernels and
  // order ZeRO-0 uses, so the same bits at one rank. Precondition: not on NVMe.
  virtual double sum_squares(device::CpuOps& host_ops) const = 0;

  // Checkpoint streaming: parameter id's slice as host memory the caller may read and write — the
  // slice itself in host memory (`staging` unused), else `staging` (slice_bytes(id) of host memory,
  // kept by the caller while the window is open), filled from the device (a copy on `stream`) or
  // from the NVMe extent when `fill`, and waited for. Fails with the stream's or the NVMe store's
  // error. uses_staging() says whether `staging` is needed.
  virtual Result<Tensor> open_host_window(model::ParamId id, std::span<std::byte> staging, bool fill,
                                          device::Stream& stream) = 0;
  // The values the caller wrote into a window of parameter id back where they live: nothing in host
  // memory (the window was the slice), copied to the device on `stream` or rewritten on NVMe, and
  // waited for. Errors as open_host_window().
  virtual Status close_host_window(model::ParamId id, const Tensor& window, device::Stream& stream) = 0;
  bool uses_staging() const { return !in_host_memory(); }

  // NVMe: the transfers of parameter id's extent. Elsewhere there are none: ok, true, ok.
  // wait(): every transfer queued on it (its first error); done(): none in flight, without blocking;
  // wait_writes(): its writes, not reads queued after them.
  virtual Status wait(model::ParamId /*id*/) { return Status::ok(); }
  virtual bool done(model::ParamId /*id*/) { return true; }
  virtual Status wait_writes(model::ParamId /*id*/) { return Status::ok(); }

  // Where the coordinator finds parameter id (param_home.h); the NVMe extent once put().
  ParamHome home(model::ParamId id) const override = 0;
  // Bytes this rank holds on the store's tier.
  virtual std::uint64_t bytes() const = 0;
  // NVMe bytes it will create (NvmeStateStoreOptions::planned_bytes); 0 elsewhere.
  virtual std::uint64_t planned_nvme_bytes() const { return 0; }
  // The NVMe store the extents go to (opened after the memory tiers are allocated). Nothing
  // elsewhere. Must outlive this store.
  virtual void attach(NvmeStateStore* /*nvme*/) {}

 protected:
  StateStore(spec::Tier tier, DType dtype, const Partition& partition, device::Device& device)
      : tier_(tier), dtype_(dtype), partition_(partition), device_(device) {}
  // Parameter id's slice at `base`, a flat array of this store's dtype.
  Tensor view(void* base, model::ParamId id, bool device_memory) const;

  const spec::Tier tier_;
  const DType dtype_;
  const Partition& partition_;
  device::Device& device_;
};

// A store of `dtype` values on `tier`, named `what` in allocation errors and NVMe extents
// ("bf16 params": extents "bf16 params of <parameter>"). `table`, `partition` and `device` must
// outlive it. Fails as allocate_on_tier().
Result<std::unique_ptr<StateStore>> make_state_store(spec::Tier tier, DType dtype, std::string what,
                                                     const model::ParamTable& table, const Partition& partition,
                                                     device::Device& device);

// The optimizer's fp32 master weights and Adam moments of parameter id's elements
// [offset, offset + master.numel()) of its slice, in host memory.
struct OptimizerStatesPiece {
  model::ParamId id = 0;
  std::int64_t offset = 0;
  Tensor master, exp_avg, exp_avg_sq;
};

// How a checkpoint reaches the optimizer states, wherever they live: piece by piece through host
// memory, every parameter in table order, a parameter larger than one piece in consecutive pieces
// from element 0. The one place the checkpoint's streaming depends on the tier: each
// implementation is one tier's way (stream_by_parameter() below for stores in device or host
// memory, the optimizer pipeline's sub-groups for NVMe), and the checkpoint code has no branch.
// Not thread-safe: the training loop's thread makes every call.
class OptimizerStatesStream {
 public:
  using Visit = std::function<Status(const OptimizerStatesPiece&)>;
  virtual ~OptimizerStatesStream() = default;
  // Calls `visit` on every piece in order. `write_back` false (a save): the pieces hold the states'
  // values and `visit` reads them. `write_back` true (a load): `visit` writes every element of the
  // piece, and the values go where the states live after it returns. A piece's memory is reused
  // after `visit` returns: it must not be read by anything `visit` started (copies, writes) then.
  // Stops at the first error, `visit`'s or the tier's (a device copy, an NVMe transfer); after a
  // failed load the states are undefined.
  virtual Status stream(bool write_back, const Visit& visit) = 0;
};

// One piece per parameter, from three fp32 stores on one tier through their host windows: one
// host buffer of a parameter's three slices when the stores need staging (device memory, NVMe),
// none in host memory. The stores and `device` must outlive it.
std::unique_ptr<OptimizerStatesStream> stream_by_parameter(StateStore& master, StateStore& exp_avg,
                                                           StateStore& exp_avg_sq, device::Device& device);

}  // namespace zinf::zero
