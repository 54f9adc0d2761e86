// ModelStates: the one interface for "the model's states" (docs/architecture.md §4) — what the trainer, the
// optimizer driver and checkpoints see, whatever ZeRO stage and placement hold them. ZeRO-0
// (replicated_states: everything resident on the device) and the partitioned, offloaded states
// (partitioned_states: each kind of state on device memory, CPU memory or NVMe) implement it.
//
// A state owner is the model's ParamSource and GradSink, zeroes gradients at the start of a step,
// runs the optimizer over the slices it owns wherever they live (optim provides the math, the
// owner drives it), streams what a checkpoint holds array by array, and reports its bytes per tier
// and what it moved.
//
// Not thread-safe: every call comes from the thread running the training loop (an owner may run
// its own I/O threads and streams behind these calls).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/device/device.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/optim/loss_scaler.h"
#include "libengine/optim/optimizer.h"
#include "libengine/spec/state_placement.h"
#include "libengine/zero/engine_stats.h"
#include "libengine/zero/partition.h"

namespace zinf::zero {

class CollectiveOrder;  // collective_order.h

// One flat fp32 array of a checkpoint: "master/<param>", "adam_m/<param>", "adam_v/<param>".
struct CheckpointArrayInfo {
  std::string name;
  std::uint64_t numel = 0;
};

// Where a save streams arrays to (train/checkpoint implements it over the checkpoint file).
class CheckpointSink {
 public:
  virtual ~CheckpointSink() = default;
  // Writes elements [offset, offset + values.size()) of array `index` of the layout. An array
  // arrives in ranges back to back from element 0 to its end (one range: the whole array), each
  // array exactly once; the ranges of different arrays may interleave (a state owner that streams
  // a parameter's states in pieces writes its master, m and v piece by piece). `values` may be
  // reused by the caller once this returns. InvalidArgument for a range out of order or past the
  // end; IoError names the file and the OS error.
  virtual Status write(std::size_t index, std::size_t offset, std::span<const float> values) = 0;
  Status write(std::size_t index, std::span<const float> values) { return write(index, 0, values); }
};

// Where a load streams arrays from.
class CheckpointSource {
 public:
  virtual ~CheckpointSource() = default;
  // Reads elements [offset, offset + into.size()) of array `index` into `into`. An array is read in
  // ranges back to back from element 0 to its end (one range: the whole array; offset 0 starts it
  // over), ranges of different arrays may interleave; its checksum is verified when the range that
  // ends it has been read. InvalidArgument for a range out of order or past the end; IoError names
  // the file and the array.
  virtual Status read(std::size_t index, std::size_t offset, std::span<float> into) = 0;
  Status read(std::size_t index, std::span<float> into) { return read(index, 0, into); }
};

// Bytes of one kind of state on one tier ("params", "grads", "master_params", "adam_m", "adam_v",
// "workspace", "staging" ...).
struct StateBytes {
  std::string state;
  spec::Tier tier = spec::Tier::kDevice;
  std::uint64_t bytes = 0;
};

// The layout every state owner writes: "master/<name>" for every parameter in table order, then
// "adam_m/<name>", then "adam_v/<name>", each of the parameter's element count (whole parameters:
// one rank's checkpoint).
std::vector<CheckpointArrayInfo> standard_checkpoint_layout(const model::ParamTable& table);
// The same arrays as one rank of `partition` holds them: each of the elements that rank owns
// (partition.h). At one rank, standard_checkpoint_layout().
std::vector<CheckpointArrayInfo> partitioned_checkpoint_layout(const model::ParamTable& table,
                                                               const Partition& partition);

// OK when `optimizer` keeps no more state slots per element than a state owner holds
// (optim::kMaxStateSlots); InvalidArgument saying so otherwise.
Status check_state_slots(const optim::Optimizer& optimizer);

class ModelStates : public model::ParamSource, public model::GradSink {
 public:
  ~ModelStates() override = default;

  virtual device::Device& device() const = 0;
  virtual const model::ParamTable& table() const = 0;
  // How the states are split over the data-parallel ranks, or null when every rank holds all of
  // them (ZeRO-0): a checkpoint of partitioned states at several ranks is one file per rank, laid
  // out as partitioned_checkpoint_layout() says.
  virtual const Partition* partition() const { return nullptr; }

  // Starts a training step: every gradient becomes zero (lazily or at once), and after the previous
  // step's optimizer update every later acquire() sees the new parameters. Precondition: nothing is
  // acquired and no gradient buffer is handed out.
  virtual Status zero_grads() = 0;

  // Before the forward pass of a step that will end in optimizer_step(optimizer, lr, scaler): lets
  // the owner start the step's optimizer work early (read states ahead, step the parameters whose
  // gradients are final while the backward pass goes on) with the same bits as the step after the
  // backward pass. Nothing by default. Precondition: after zero_grads(), nothing acquired.
  virtual Status prepare_step(const optim::Optimizer& optimizer, double lr, const optim::LossScaler& scaler) {
    (void)optimizer;
    (void)lr;
    (void)scaler;
    return Status::ok();
  }

  // One optimizer step over every state this rank owns with learning rate `lr`, gradients produced
  // under `scaler.scale()`, driving `optimizer`'s begin_step / step_slice / end_step where the
  // states live, with the first optimizer.state_slots() of the owner's optim::kMaxStateSlots fp32
  // slots per element. Precondition: the backward pass has committed every gradient; nothing
  // acquired. Fails with InvalidArgument for an optimizer with more state slots
  // (check_state_slots()) and as Optimizer::begin_step does (nothing changed then), or with the
  // I/O or device error that stopped the step (IoError naming the state, the path and the errno
  // for NVMe); a step that failed midway leaves the states undefined: resume from the last
  // checkpoint.
  virtual Result<optim::StepReport> optimizer_step(optim::Optimizer& optimizer, double lr,
                                                   optim::LossScaler& scaler) = 0;

  // The fp32 arrays a checkpoint of this owner holds, in file order: "master/<name>" for every
  // parameter in table order, then "adam_m/<name>", then "adam_v/<name>" — the same for every
  // owner, so a checkpoint of one placement resumes under another.
  virtual std::vector<CheckpointArrayInfo> checkpoint_layout() const = 0;
  // Streams every array of checkpoint_layout() into `sink`, never holding all of them in host
  // memory at once when the states are offloaded. Precondition as optimizer_step's.
  virtual Status save_checkpoint(CheckpointSink& sink) = 0;
  // Reads every array of checkpoint_layout() from `source` into the states (and rewrites the
  // working copies of the parameters from the loaded master weights). On failure the states are
  // undefined.
  virtual Status load_checkpoint(CheckpointSource& source) = 0;

  // Bytes held per kind of state and tier, padding included, for the run record.
  virtual std::vector<StateBytes> state_bytes() const = 0;
  // Where each kind of state lives.
  virtual spec::StatePlacement placement() const = 0;
  // The order in which the model acquired the parameters in `phase` of the step recorded last (the
  // first, unless the order changed since), for the ranks to check that they agree: at several
  // ranks the collectives of an owner that gathers parameters or buckets gradients follow it.
  // Empty for an owner whose collectives do not depend on it (ZeRO-0 all-reduces in table order).
  virtual std::vector<model::ParamId> acquire_order(model::Phase phase) const {
    (void)phase;
    return {};
  }
  // The communicator through which the owner issues its collectives, signing each one
  // (collective_order.h), for the ranks to check after the first step that they issued the same
  // ones at the same program-order positions. Null for an owner that has none (one rank, ZeRO-0).
  // The owner keeps it; callers on the training loop's thread only.
  virtual CollectiveOrder* collective_order() { return nullptr; }
  // What moved between tiers, how long the compute thread waited, and prefetch hits since creation.
  virtual EngineStats stats() const { return {}; }
  // One line for the start of a run: stage, placement, budgets.
  virtual std::string describe() const = 0;
};

}  // namespace zinf::zero
