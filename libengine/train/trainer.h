// Trainer: the training loop — batch s → forward+backward → optimizer step with the scheduled
// learning rate (and fp16 loss scaling) — plus periodic evaluation on held-out batches and atomic
// checkpoints, resuming from the latest one when asked. It owns nothing: the model, its states,
// the optimizer and the data are built by the caller (the CLI from a scenario), so a library user
// can drive the same loop with their own pieces. Metrics leave through a StepObserver.
//
// Determinism: step s always trains on batch s, every kernel is deterministic for a thread count,
// and a checkpoint holds every fp32 state (master params, m, v) plus the optimizer step and the
// loss scaler — so a resumed run reproduces the uninterrupted run's losses bit for bit.
// The states are any zero::ModelStates (ZeRO-0, or partitioned and offloaded): the loop is the same.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/comm/timed_communicator.h"
#include "libengine/core/status.h"
#include "libengine/model/gpt.h"
#include "libengine/optim/loss_scaler.h"
#include "libengine/optim/lr_schedule.h"
#include "libengine/optim/optimizer.h"
#include "libengine/train/batch_source.h"
#include "libengine/train/checkpoint_set.h"
#include "libengine/train/step_metrics.h"
#include "libengine/zero/model_states.h"

namespace zinf::train {

struct TrainerOptions {
  std::int64_t steps = 0;       // total steps of the run (a resumed run continues to this)
  std::int64_t stop_after = 0;  // end this invocation after this step (checkpointing there), leaving
                                // the run — its length and LR schedule — as `steps` says; 0: run to the end
  std::int64_t eval_every = 0;  // evaluate after every N-th step (and after the last); 0: never
  std::int64_t eval_batches = 0;
  std::int64_t checkpoint_every = 0;  // save after every N-th step (and after the last); 0: never
  std::filesystem::path checkpoint_dir;
  int checkpoint_keep_last = 2;
  bool resume = false;  // continue from the latest checkpoint in checkpoint_dir, if any
  // A newest checkpoint that does not verify on every rank (damaged, truncated, a shard missing,
  // foreign or stale): false — warn through on_warning (every rank's reason, on every rank) and
  // resume, all ranks together, from the newest one valid on every rank; true — every rank fails
  // with the same error.
  bool checkpoint_strict = false;
  std::function<void(const std::string&)> on_warning;
  std::string fingerprint;  // what a checkpoint must match to be resumed (spec::fingerprint)
  // Starting weights (the scenario's "init": {"safetensors"}): a Hugging Face safetensors file or
  // directory loaded into the states when the run does not resume from a checkpoint
  // (weights_source.h). Empty: the seed's initialisation.
  std::filesystem::path init_weights;
  // Data parallelism: this rank trains on its share of every global batch (rows
  // [rank·B/N, (rank+1)·B/N)), gradients are averaged over the ranks through the states, and the
  // reported losses are the global batch's. Null: one rank. Must outlive the trainer.
  comm::Communicator* comm = nullptr;
  // The same communicator's timing decorator (or null: no communication time is reported); each
  // step's StepMetrics.engine.comm_* are its busy time and the device's collective waits.
  const comm::TimedCommunicator* comm_timing = nullptr;
};

// A step's training loss, kept across checkpoints so that a resumed run can report the run's
// final loss, not only its own steps'.
struct StepLoss {
  std::int64_t step = 0;
  double loss = 0.0;
};

// How many of the latest finite, not-skipped losses a checkpoint carries (the summary's "final
// loss" is their mean).
inline constexpr std::size_t kRecentLossesKept = 10;

struct TrainOutcome {
  std::int64_t first_step = 0;  // 0, or the step a checkpoint resumed at
  std::int64_t steps_run = 0;
  // The run's latest losses before first_step (up to kRecentLossesKept, oldest first), as the
  // checkpoint resumed from recorded them; empty when the run started at step 0 (or the checkpoint
  // predates this field).
  std::vector<StepLoss> losses_before;
  std::optional<std::filesystem::path> resumed_from;  // the checkpoint loaded
  // Why newer checkpoints were passed over (every rank's reasons, the same on every rank): also
  // given to on_warning, kept here for the run record.
  std::vector<std::string> resume_warnings;
  std::optional<std::filesystem::path> last_checkpoint;
  // The observer asked to stop (StepObserver::stop_requested) after steps_run steps, before the end.
  bool stopped = false;
};

class Trainer {
 public:
  // Every reference must outlive the Trainer.
  Trainer(model::Gpt& model, zero::ModelStates& states, optim::Optimizer& optimizer, const optim::LrSchedule& schedule,
          optim::LossScaler& scaler, const BatchSource& data, TrainerOptions options);

  // Runs steps [first, options.steps) (or up to stop_after). After the first step's backward pass
  // the ranks check that they acquired the parameters in the same order (train/order_agreement.h)
  // and all fail with the same line naming the first difference when not. Fails on a model or optimizer error, a
  // non-finite loss (outside fp16 loss scaling, where a step with inf/NaN gradients is skipped instead), a checkpoint
  // that cannot be written, or one that does not match this run (fingerprint, array names/sizes),
  // a batch the data source cannot deliver (a token file changed under the run), and — as
  // InvalidArgument, before any step — a checkpoint at or past the step this invocation would end
  // at (nothing to train: the run is longer than asked, or already complete).
  // On failure the states hold whatever the failed step left; checkpoints already written stay intact.
  Result<TrainOutcome> run(StepObserver& observer);

  // After run() failed: true when every rank failed with the same error at the same point (a resume
  // the ranks agreed cannot go on: strict, another run's checkpoint, no set valid on every rank,
  // nothing left to train; ranks that acquired the parameters in different orders, or whose states
  // issued different collectives, in the first step, train/order_agreement.h). The caller then prints it once (rank 0)
  // instead of once per rank, and the ranks can leave together. False for a failure only this rank saw.
  bool failure_agreed() const { return failure_agreed_; }

  // Mean loss over `batches` held-out batches with the current parameters.
  Result<double> evaluate(std::int64_t batches);

 private:
  // A checkpoint set opened and checked on this rank (every shard's header against the manifest,
  // the fingerprint, the trainer state), not yet loaded into the states.
  struct OpenedCheckpoint {
    std::filesystem::path path;
    std::int64_t step = 0;
    // Replicated states read whole arrays: the world of one the source reads for (it refers to it).
    std::unique_ptr<zero::Partition> whole;
    std::unique_ptr<ShardedCheckpointSource> source;
    std::int64_t optimizer_steps = 0;
    optim::LossScalerState scaler;
    std::vector<StepLoss> recent_losses;
  };
  // The ranks agree on the newest checkpoint valid on every rank and load it (trainer_resume.cpp).
  Status load_latest(TrainOutcome& outcome, std::int64_t& first_step);
  // `other_run` is set when the checkpoint belongs to another run configuration (never a reason to
  // fall back to an older one).
  Result<OpenedCheckpoint> open_checkpoint_set(const CheckpointCandidate& candidate, bool& other_run);
  // Reads the opened set into the states, the optimizer and the loss scaler (a data CRC failure
  // here leaves them partly loaded: the caller loads another set or fails).
  Status load_opened(OpenedCheckpoint& opened);
  // Loads options_.init_weights into the states, every rank its own part; the ranks agree that every
  // rank's file checked out before any loads (a load runs collectives), and that every load
  // succeeded (trainer_resume.cpp).
  Status load_init_weights();
  Status save(std::int64_t next_step, StepObserver& observer, TrainOutcome& outcome);
  // After the first step's optimizer step, on every rank: the states' collectives agree across the
  // ranks (train/order_agreement.h), or Internal with the agreed line (failure_agreed_ set). Stops
  // the states' recording of their collectives either way. Nothing for states without a
  // CollectiveOrder. Fails with the communicator's error.
  Status check_collectives_agree();
  void split_rows(const std::vector<std::int32_t>& rows);

  model::Gpt& model_;
  zero::ModelStates& states_;
  optim::Optimizer& optimizer_;
  const optim::LrSchedule& schedule_;
  optim::LossScaler& scaler_;
  const BatchSource& data_;
  TrainerOptions options_;
  std::vector<std::int32_t> rows_;     // [B, T+1], the global batch
  std::vector<std::int32_t> tokens_;   // [B/N, T], this rank's share
  std::vector<std::int32_t> targets_;  // [B/N, T]
  int world_size_ = 1;
  int rank_ = 0;
  // The mean over the ranks of a loss each computed over its share (equal shares).
  Result<double> global_mean(double local);
  std::vector<StepLoss> recent_losses_;  // the latest kRecentLossesKept, oldest first; saved in checkpoints
  bool failure_agreed_ = false;
};

}  // namespace zinf::train
