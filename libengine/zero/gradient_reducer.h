// GradientReducer: the gradient side of the partitioned states (the GradSink PartitionedStates
// implements forwards here). The model accumulates each parameter's gradient into an fp32 device
// buffer it hands out; commit() rounds it to the storage precision and sends it to the gradient
// store (state_store.h): in place on the device, or down to host memory on the device-to-host
// stream with at most max(zero.max_live_bytes, 64 MiB) in flight. Across ranks the gradients are
// reduced first, a bucket at a time (gradient_buckets.cpp): one reduce-scatter (stage 1: all-reduce)
// per zero.reduce_bucket_bytes, and each rank keeps the slices it owns.
//
// The collective-order rule (docs/architecture.md §6): a bucket closes by byte counts alone, the
// same on every rank, so every rank issues the same collectives in the same order.
//
// Not thread-safe: the training loop's thread makes every call; the copies and collectives run on
// the device's streams behind it. The caller keeps `grads` (and the table, partition, device and
// communicator) alive longer than the reducer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/cpu_ops.h"
#include "libengine/device/device.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/zero_config.h"
#include "libengine/tensor/tensor.h"
#include "libengine/zero/buffer_pool.h"
#include "libengine/zero/engine_stats.h"
#include "libengine/zero/partition.h"
#include "libengine/zero/state_store.h"

namespace zinf::zero {

class GradientReducer {
 public:
  // `zero` holds the resolved budgets (reduce_bucket_bytes, max_live_bytes). `comm` null or a world
  // of one: no reduction. Allocates nothing until the first gradient.
  GradientReducer(const model::ParamTable& table, const Partition& partition, device::Device& device, StateStore& grads,
                  comm::Communicator* comm, const spec::ZeroConfig& zero, DType precision);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // GradSink (model/grad_sink.h). grad_buffer(): the fp32 buffer parameter id's gradient
  // accumulates into until commit(); asked again before the commit (a tied weight), the same one.
  // Fails with OutOfMemory naming scenario.device_memory. commit(): the gradient goes on its way
  // (rounded, into a bucket or down to the host); a collective's or copy's failure is reported by
  // the stream, at finish_backward() at the latest. Precondition: grad_buffer(id) was handed out.
  Result<Tensor> grad_buffer(model::ParamId id);
  Status commit(model::ParamId id);
  // A new step's gradients: device-resident ones are zeroed (they are accumulated into), host ones
  // are overwritten whole by each commit. Precondition: no buffer handed out.
  Status zero_grads();

  // `event` is recorded on the device-to-host stream once every gradient committed so far is in
  // the gradient store (at once, or when the open bucket closes), and `recorded` set then.
  // Both must stay valid until finish_backward() or forget_pending().
  void record_when_stored(device::Event& event, bool& recorded);
  // Drops the events record_when_stored() holds (a new step's pipeline starts).
  void forget_pending() { pending_.clear(); }
  // The end of the backward pass: the last bucket is reduced, and every collective and copy down
  // has finished. The first error of those streams.
  Status finish_backward();
  // Sum over the gradients of g^2, per parameter in table order (ZeRO-0's order), over every rank:
  // a host all-reduce, so the ranks agree on the norm and clip and skip alike.
  Result<double> sum_squares(device::CpuOps& host_ops);

  const LinkBytes& device_to_host() const { return device_to_host_; }
  // Peak device bytes of the gradient buffers, staging and buckets.
  std::uint64_t buffer_peak_bytes() const { return pool_.peak_owned_bytes(); }

 private:
  bool gathering() const { return comm_ != nullptr && comm_->world_size() > 1; }
  bool mixed() const { return precision_ != DType::kF32; }
  std::size_t storage_bytes(model::ParamId id) const {
    return static_cast<std::size_t>(partition_[id].owned) * dtype_size_bytes(precision_);
  }
  // Gathering (gradient_buckets.cpp): parameter id's gradient (the whole parameter, fp32 or
  // rounded, in `whole`) joins the open bucket; a full bucket is reduced over the ranks.
  Status add_to_bucket(model::ParamId id, device::DeviceBuffer whole, DType dtype);
  Status flush_bucket();
  // Copies `bytes` of parameter id's gradient at `source` (device memory) to its slice in host
  // memory, on the device-to-host stream once `ready` is reached; counted in flight.
  void copy_down(model::ParamId id, const void* source, std::size_t bytes, device::Event& ready);
  // Waits for copies down until `bytes` more fit the in-flight cap.
  Status track_d2h(std::size_t bytes);
  void record_pending();

  const model::ParamTable& table_;
  const Partition& partition_;
  device::Device& device_;
  StateStore& grads_;
  comm::Communicator* comm_;
  const int stage_;
  const DType precision_;
  const std::uint64_t bucket_bytes_;
  const std::uint64_t d2h_cap_bytes_;

  BufferPool pool_;  // fp32 gradient buffers and half staging on the device
  std::vector<device::DeviceBuffer> workspaces_;
  std::vector<bool> out_;
  std::unique_ptr<device::Event> computed_;  // the compute stream's point a transfer waits for
  std::unique_ptr<device::Event> reduced_;   // gathering: a bucket's reduction is done
  struct Bucket {
    std::vector<model::ParamId> ids;
    std::vector<device::DeviceBuffer> wholes;  // each parameter's whole gradient, until packed
    std::uint64_t bytes = 0;
    DType dtype = DType::kF32;
  };
  Bucket bucket_;
  struct Pending {
    device::Event* event;
    bool* recorded;
  };
  std::vector<Pending> pending_;  // record_when_stored() while a bucket was open
  struct InFlight {
    std::unique_ptr<device::Event> done;
    std::size_t bytes;
  };
  std::vector<InFlight> d2h_in_flight_;
  std::uint64_t d2h_in_flight_bytes_ = 0;
  LinkBytes device_to_host_;
};

}  // namespace zinf::zero
