// TrainSession: everything one training run is made of, built from a validated scenario — the
// budgeted compute device (and host tier), the batch source, the GPT model, its states (ZeRO-0, or
// partitioned and offloaded as scenario.zero says), the optimizer with its schedule and loss
// scaler, and the Trainer that drives them. `zinf train` and `zinf bench train`
// build the same session, so a benchmark times exactly what training runs.
// Building sets the process-wide compute thread count (kernels/threads.h) to scenario.threads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "libengine/comm/communicator.h"
#include "libengine/core/status.h"
#include "libengine/device/device.h"
#include "libengine/io/io_engine.h"
#include "libengine/model/gpt.h"
#include "libengine/optim/loss_scaler.h"
#include "libengine/optim/lr_schedule.h"
#include "libengine/optim/optimizer.h"
#include "libengine/spec/scenario.h"
#include "libengine/train/batch_source.h"
#include "libengine/train/trainer.h"
#include "libengine/zero/model_states.h"

namespace zinf::train {

// Whether `scenario` can train over `world_size` data-parallel ranks: each rank trains on batch /
// world_size rows, so the batch must split evenly. InvalidArgument naming scenario.batch otherwise.
// What TrainSession::create checks once the communicator exists, and what a launcher (zinf train
// --ranks N) checks before it starts any rank.
Status check_world_size(const spec::Scenario& scenario, int world_size);

// Builds the communicator of the data-parallel ranks once the device exists.
using CommFactory = std::function<Result<std::unique_ptr<comm::Communicator>>(device::Device&)>;

// How TrainSession::create builds a session beyond what the scenario says. Every field has a
// default (an initializer, so designated initialisation may name any subset): a session of one
// rank that starts afresh and runs to the end.
struct TrainSessionOptions {
  // Whether the trainer may continue from a checkpoint in scenario.checkpoint.dir (and only when
  // scenario.checkpoint.resume is set too).
  bool resume = false;
  // End this invocation after that step (TrainerOptions::stop_after); 0: run to the end.
  std::int64_t stop_after = 0;
  // One line per warning (buffered I/O fallback, a changed parameter order); may be empty.
  std::function<void(const std::string&)> on_warning{};
  // The I/O engine of the NVMe tier (tests pass a fault-injecting one); null: io_uring.
  std::unique_ptr<io::IoEngine> io_engine{};
  // Builds the communicator of the data-parallel ranks (comm::create_communicator from the launch
  // environment; tests a thread or fault-injecting one); empty: one rank.
  CommFactory make_comm{};
  // Processes of this run on this node, known before the communicator from the launcher: with
  // scenario.threads 0 each uses its share of the node's cores.
  int local_size = 1;
  // CPU backend: the transfer streams run on threads of their own (true) or on the training thread
  // (false: one process training alone, whose compute threads have every core — a copy thread
  // would preempt them; device/cpu_device.h). Ranks set it: their gradient copies wait for
  // reduce-scatters on the collective stream, which on the training thread would stall the
  // backward pass.
  bool copy_threads = false;
};

class TrainSession {
 public:
  // Fails with InvalidArgument naming the scenario field: "scenario.device" for a backend this
  // build lacks, "scenario.data.*" for data that cannot be opened, "scenario.device_memory" when
  // the model or its states do not fit the budget (the OutOfMemory message says what did not fit),
  // "scenario.zero.*" for an engine plan that cannot work in the budgets, and "scenario.batch" when
  // the batch does not split over the ranks make_comm builds (each rank trains on
  // scenario.batch / world_size rows of every batch).
  static Result<std::unique_ptr<TrainSession>> create(const spec::Scenario& scenario, TrainSessionOptions options = {});

  const spec::Scenario& scenario() const { return scenario_; }
  device::Device& device() { return *device_; }
  const BatchSource& data() const { return *data_; }
  model::Gpt& model() { return *model_; }
  zero::ModelStates& states() { return *states_; }
  // The engine configuration as run: the scenario's, with the budgets the engine derived filled in.
  const spec::ZeroConfig& zero() const { return zero_; }
  Trainer& trainer() { return *trainer_; }
  // The pieces the trainer drives, for a caller that builds its own Trainer over them (a test that
  // puts a decorator between the trainer and the states).
  optim::Optimizer& optimizer() { return *optimizer_; }
  const optim::LrSchedule& schedule() const { return *schedule_; }
  optim::LossScaler& scaler() { return *scaler_; }
  // The data-parallel ranks this session trains with (a world of one unless make_comm said otherwise).
  comm::Communicator& comm() { return *comm_; }

 private:
  explicit TrainSession(const spec::Scenario& scenario) : scenario_(scenario) {}
  spec::Scenario scenario_;
  spec::ZeroConfig zero_;
  // Declaration order is destruction order reversed: everything that holds device memory dies
  // before the device.
  std::unique_ptr<device::Device> device_;
  std::unique_ptr<comm::Communicator> comm_;  // after the device (NCCL uses it), before the states
  std::optional<BatchSource> data_;
  std::unique_ptr<model::Gpt> model_;
  std::unique_ptr<zero::ModelStates> states_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::unique_ptr<optim::LossScaler> scaler_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace zinf::train
