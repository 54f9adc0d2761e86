// StepMetrics and StepObserver: how measurements leave the training loop (docs/architecture.md §2: the engine
// never prints or writes reports; the CLI observes). One StepMetrics per optimizer step, one
// EvalMetrics per evaluation, one call per checkpoint written.
#pragma once

#include <cstdint>
#include <filesystem>

#include "libengine/model/checkpoint_store.h"
#include "libengine/zero/engine_stats.h"

namespace zinf::train {

struct StepMetrics {
  std::int64_t step = 0;    // 0-based
  double loss = 0;          // mean cross-entropy of this step's batch (nats/token)
  double lr = 0;            // learning rate this step used
  double grad_norm = 0;     // global L2 norm of the (unscaled) gradients before clipping
  double clip_coef = 1;     // factor the gradients were multiplied by (1: not clipped)
  double loss_scale = 1;    // fp16 dynamic loss scale used (1 otherwise)
  bool skipped = false;     // fp16 step skipped because a gradient was inf/NaN
  std::int64_t tokens = 0;  // B*T
  double step_seconds = 0;  // wall time of the whole step (data, forward+backward, optimizer)
  double data_seconds = 0;
  double forward_backward_seconds = 0;
  double forward_seconds = 0;   // of forward_backward_seconds: until the backward pass began (host clock;
  double backward_seconds = 0;  // on CUDA these split when the host enqueued the work, not when it ran)
  double optimizer_seconds = 0;
  zero::EngineStats engine;  // this step's traffic per link, stalls and prefetch hits (levels: now)
  // This step's activation-checkpoint copies (zero.activations "cpu"; zero otherwise).
  model::CheckpointTraffic checkpoints;
  double tokens_per_s() const { return step_seconds > 0 ? static_cast<double>(tokens) / step_seconds : 0.0; }
};

struct EvalMetrics {
  std::int64_t step = 0;  // evaluated after this step
  double loss = 0;        // mean over the held-out batches
  std::int64_t batches = 0;
  double seconds = 0;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Before the first step: the run covers steps [first_step, total_steps).
  virtual void on_start(std::int64_t first_step, std::int64_t total_steps) {
    (void)first_step;
    (void)total_steps;
  }
  virtual void on_step(const StepMetrics& metrics) = 0;
  virtual void on_eval(const EvalMetrics& metrics) { (void)metrics; }
  virtual void on_checkpoint(std::int64_t step, const std::filesystem::path& path, double seconds) {
    (void)step;
    (void)path;
    (void)seconds;
  }
  // Asked on the training thread after each step (and its eval and checkpoint, when due): true
  // ends the run there, before the next step, with TrainOutcome::stopped set (a user's stop, e.g.
  // Ctrl-C). Honoured by a run of one rank only: ranks would have to agree on the step, so a
  // multi-rank job is stopped by its launcher instead.
  virtual bool stop_requested() const { return false; }
};

}  // namespace zinf::train
