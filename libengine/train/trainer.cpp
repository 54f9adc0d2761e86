#include "libengine/train/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <span>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "libengine/core/check.h"
#include "libengine/spec/json_input.h"
#include "libengine/train/checkpoint.h"
#include "libengine/train/checkpoint_model.h"
#include "libengine/train/checkpoint_set.h"
#include "libengine/train/order_agreement.h"

namespace zinf::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

zero::LinkBytes minus(const zero::LinkBytes& a, const zero::LinkBytes& b) {
  return {a.forward_backward - b.forward_backward, a.optimizer - b.optimizer, a.other - b.other};
}

// What moved during one step: counters are differences, levels (bytes on NVMe) are the current ones.
zero::EngineStats difference(const zero::EngineStats& after, const zero::EngineStats& before) {
  zero::EngineStats d = after;
  d.nvme_read = minus(after.nvme_read, before.nvme_read);
  d.nvme_write = minus(after.nvme_write, before.nvme_write);
  d.host_to_device = minus(after.host_to_device, before.host_to_device);
  d.device_to_host = minus(after.device_to_host, before.device_to_host);
  d.stall_seconds = after.stall_seconds - before.stall_seconds;
  d.acquires = after.acquires - before.acquires;
  d.prefetch_hits = after.prefetch_hits - before.prefetch_hits;
  d.sync_nvme_reads = after.sync_nvme_reads - before.sync_nvme_reads;
  d.params_kept_on_host_bytes = after.params_kept_on_host_bytes - before.params_kept_on_host_bytes;
  d.trace_mismatches = after.trace_mismatches - before.trace_mismatches;
  d.optimizer_elements = after.optimizer_elements - before.optimizer_elements;
  d.optimizer_elements_overlapped = after.optimizer_elements_overlapped - before.optimizer_elements_overlapped;
  d.optimizer_worker_seconds = after.optimizer_worker_seconds - before.optimizer_worker_seconds;
  d.optimizer_overlapped_seconds = after.optimizer_overlapped_seconds - before.optimizer_overlapped_seconds;
  d.comm_busy_seconds = after.comm_busy_seconds - before.comm_busy_seconds;
  d.comm_wait_seconds = after.comm_wait_seconds - before.comm_wait_seconds;
  d.comm_calls = after.comm_calls - before.comm_calls;
  d.comm_send_bytes = after.comm_send_bytes - before.comm_send_bytes;
  return d;
}

// The states' counters plus the communication counters so far: the collectives' busy time and what
// the compute thread waited for them (the device's waits on the collective stream and the blocking
// host calls).
zero::EngineStats with_comm(zero::EngineStats stats, const comm::TimedCommunicator* timing,
                            const device::Device& device) {
  if (timing == nullptr) return stats;
  const comm::CommTimes times = timing->times();
  stats.comm_busy_seconds = times.busy_seconds;
  stats.comm_wait_seconds = device.collective_wait_seconds() + times.host_seconds;
  stats.comm_calls = times.calls;
  stats.comm_send_bytes = times.send_bytes;
  return stats;
}

// Passes every call through to the states, noting when the backward pass begins: the step's
// forward and backward times without the model knowing it is timed.
class PhaseClock final : public model::ParamSource {
 public:
  explicit PhaseClock(model::ParamSource& inner) : inner_(inner) {}
  Result<Tensor> acquire(model::ParamId id) override { return inner_.acquire(id); }
  void release(model::ParamId id) override { inner_.release(id); }
  void begin_phase(model::Phase phase) override {
    if (phase == model::Phase::kBackward) backward_start = Clock::now();
    inner_.begin_phase(phase);
  }
  Clock::time_point backward_start{};

 private:
  model::ParamSource& inner_;
};

bool due(std::int64_t completed_steps, std::int64_t every, std::int64_t total_steps) {
  return every > 0 && (completed_steps % every == 0 || completed_steps == total_steps);
}

}  // namespace

Trainer::Trainer(model::Gpt& model, zero::ModelStates& states, optim::Optimizer& optimizer,
                 const optim::LrSchedule& schedule, optim::LossScaler& scaler, const BatchSource& data,
                 TrainerOptions options)
    : model_(model),
      states_(states),
      optimizer_(optimizer),
      schedule_(schedule),
      scaler_(scaler),
      data_(data),
      options_(std::move(options)) {
  if (options_.comm != nullptr) {
    world_size_ = options_.comm->world_size();
    rank_ = options_.comm->rank();
  }
  const BatchShape& shape = data_.shape();
  ZINF_CHECK(shape.batch % static_cast<std::uint64_t>(world_size_) == 0,
             "Trainer: the batch must split evenly over the ranks (checked by TrainSession)");
  const std::uint64_t local = shape.batch / static_cast<std::uint64_t>(world_size_);
  rows_.resize(shape.batch * (shape.seq + 1));
  tokens_.resize(local * shape.seq);
  targets_.resize(local * shape.seq);
}

// This rank's rows of [B, T+1] → inputs [B/N, T] (row[:T]) and targets [B/N, T] (row[1:]).
void Trainer::split_rows(const std::vector<std::int32_t>& rows) {
  const BatchShape& shape = data_.shape();
  const std::uint64_t local = shape.batch / static_cast<std::uint64_t>(world_size_);
  for (std::uint64_t b = 0; b < local; ++b) {
    const std::int32_t* row = rows.data() + (static_cast<std::uint64_t>(rank_) * local + b) * (shape.seq + 1);
    std::copy(row, row + shape.seq, tokens_.begin() + static_cast<std::ptrdiff_t>(b * shape.seq));
    std::copy(row + 1, row + 1 + shape.seq, targets_.begin() + static_cast<std::ptrdiff_t>(b * shape.seq));
  }
}

Result<double> Trainer::global_mean(double local) {
  if (world_size_ == 1) return local;
  std::array<double, 1> sum = {local};
  ZINF_RETURN_IF_ERROR(options_.comm->all_reduce_host(sum));
  return sum[0] / static_cast<double>(world_size_);
}

Result<double> Trainer::evaluate(std::int64_t batches) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < batches; ++i) {
    ZINF_RETURN_IF_ERROR(data_.eval_batch(static_cast<std::uint64_t>(i), rows_.data()));
    split_rows(rows_);
    ZINF_ASSIGN_OR_RETURN(const double local, model_.forward(tokens_, targets_, states_));
    ZINF_ASSIGN_OR_RETURN(const double loss, global_mean(local));
    sum += loss;
  }
  return batches > 0 ? sum / static_cast<double>(batches) : 0.0;
}

Status Trainer::save(std::int64_t next_step, StepObserver& observer, TrainOutcome& outcome) {
  const Clock::time_point start = Clock::now();
  CheckpointMeta meta;
  meta.step = next_step;
  meta.fingerprint = options_.fingerprint;
  const optim::LossScalerState scaler_state = scaler_.state();
  nlohmann::json recent = nlohmann::json::array();
  for (const StepLoss& l : recent_losses_) recent.push_back({l.step, l.loss});
  meta.extra = {{"optimizer_step", optimizer_.step_count()},
                {"loss_scale", scaler_state.scale},
                {"loss_scale_clean_steps", scaler_state.clean_steps},
                {"recent_losses", std::move(recent)},
                // What `zinf export` needs to name and shape the weights without the scenario.
                {"model", checkpoint_model_json(model_.config().shape, states_.table())}};
  // Partitioned states at several ranks: one file per rank, then the set's manifest from rank 0
  // once every rank committed. Replicated states are the same on every rank: rank 0 writes them.
  const bool sharded = states_.partition() != nullptr && world_size_ > 1;
  if (!sharded && rank_ != 0) return Status::ok();
  CheckpointSet set;
  if (sharded) {
    // Rank 0's random set id, on every rank before any writes: each shard names the set it is of.
    std::array<double, 2> id = {0.0, 0.0};
    if (rank_ == 0) id = set_id_to_doubles(new_set_id());
    ZINF_RETURN_IF_ERROR(options_.comm->all_reduce_host(id));
    set.set_id = set_id_from_doubles(id[0], id[1]);
    meta.shard = ShardIdentity{set.set_id, rank_, world_size_};
  }
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointWriter> writer,
                        CheckpointWriter::create(options_.checkpoint_dir, meta, states_.checkpoint_layout(),
                                                 sharded ? shard_file_name(next_step, rank_, world_size_) : ""));
  ZINF_RETURN_IF_ERROR(states_.save_checkpoint(*writer));
  ZINF_ASSIGN_OR_RETURN(std::filesystem::path path, writer->commit(sharded ? 0 : options_.checkpoint_keep_last));
  if (sharded) {
    // Every rank's file size and header CRC, for the manifest; the exchange is also the barrier
    // after which every shard is committed.
    std::vector<double> records(2 * static_cast<std::size_t>(world_size_), 0.0);
    records[2 * static_cast<std::size_t>(rank_)] = static_cast<double>(writer->file_bytes());
    records[2 * static_cast<std::size_t>(rank_) + 1] = static_cast<double>(writer->header_crc());
    ZINF_RETURN_IF_ERROR(options_.comm->all_reduce_host(records));
    if (rank_ == 0) {
      set.step = next_step;
      set.world_size = world_size_;
      set.fingerprint = options_.fingerprint;
      set.placement = states_.describe();
      for (int rank = 0; rank < world_size_; ++rank) {
        set.records.push_back({static_cast<std::uint64_t>(records[2 * static_cast<std::size_t>(rank)]),
                               static_cast<std::uint32_t>(records[2 * static_cast<std::size_t>(rank) + 1])});
      }
      ZINF_RETURN_IF_ERROR(commit_checkpoint_set(options_.checkpoint_dir, set, options_.checkpoint_keep_last));
    }
    path = checkpoint_manifest_path(options_.checkpoint_dir, next_step);
  }
  outcome.last_checkpoint = path;
  observer.on_checkpoint(next_step, path, seconds_since(start));
  return Status::ok();
}

Result<TrainOutcome> Trainer::run(StepObserver& observer) {
  TrainOutcome outcome;
  std::int64_t first_step = 0;
  recent_losses_.clear();
  failure_agreed_ = false;
  if (options_.resume && !options_.checkpoint_dir.empty()) ZINF_RETURN_IF_ERROR(load_latest(outcome, first_step));
  // Starting weights apply to a fresh run only: a resumed run's states are the checkpoint's.
  if (!outcome.resumed_from && !options_.init_weights.empty()) ZINF_RETURN_IF_ERROR(load_init_weights());
  outcome.first_step = first_step;
  const std::int64_t end = options_.stop_after > 0 ? std::min(options_.stop_after, options_.steps) : options_.steps;
  if (first_step >= end) {
    // Resuming at step 70 of a 50-step run used to end at once with exit 0, having done nothing.
    // The step is the ranks' agreed one, so every rank stops here with this error.
    failure_agreed_ = true;
    return Status::invalid_argument(fmt::format(
        "checkpoint {} resumes at step {}, but this run ends at step {}{}: nothing to train; raise steps, or start "
        "over without resuming",
        outcome.resumed_from ? outcome.resumed_from->string() : std::string("?"), first_step, end,
        end < options_.steps ? " (stop_after)" : ""));
  }
  observer.on_start(first_step, options_.steps);

  const BatchShape& shape = data_.shape();
  for (std::int64_t step = first_step; step < end; ++step) {
    StepMetrics metrics;
    metrics.step = step;
    metrics.tokens = static_cast<std::int64_t>(shape.batch * shape.seq);
    const Clock::time_point step_start = Clock::now();

    ZINF_RETURN_IF_ERROR(data_.train_batch(static_cast<std::uint64_t>(step), rows_.data()));
    split_rows(rows_);
    metrics.data_seconds = seconds_since(step_start);

    const zero::EngineStats before = with_comm(states_.stats(), options_.comm_timing, states_.device());
    const model::CheckpointTraffic checkpoints_before = model_.checkpoints().traffic();
    const Clock::time_point fb_start = Clock::now();
    ZINF_RETURN_IF_ERROR(states_.zero_grads());
    metrics.loss_scale = scaler_.scale();
    metrics.lr = schedule_.lr_at(step);
    ZINF_RETURN_IF_ERROR(states_.prepare_step(optimizer_, metrics.lr, scaler_));
    PhaseClock clock(states_);
    clock.backward_start = fb_start;
    // Each rank's gradient is of its share's mean loss, scaled by 1/N: the ranks' sum (the
    // reduction in the states) is the global batch's mean gradient.
    ZINF_ASSIGN_OR_RETURN(const double local_loss,
                          model_.forward_backward(tokens_, targets_, clock, states_,
                                                  static_cast<float>(metrics.loss_scale / world_size_)));
    // On an asynchronous device (CUDA) the backward pass may still be running: wait, so the phase
    // times are what the device spent, and so a failed kernel is reported at the step it broke.
    ZINF_RETURN_IF_ERROR(states_.device().synchronize());
    ZINF_ASSIGN_OR_RETURN(metrics.loss, global_mean(local_loss));
    if (step == first_step) {
      // The acquire order is recorded now: the ranks check they agree (a host collective on every
      // rank, whatever the states), before a step of gradients gathered out of order is applied.
      ZINF_ASSIGN_OR_RETURN(const std::string disagreement,
                            find_order_disagreement(options_.comm, states_.table(),
                                                    {states_.acquire_order(model::Phase::kForward),
                                                     states_.acquire_order(model::Phase::kBackward)}));
      if (!disagreement.empty()) {
        failure_agreed_ = true;  // every rank found the same first difference
        return Status::internal(disagreement);
      }
    }
    metrics.forward_backward_seconds = seconds_since(fb_start);
    metrics.forward_seconds = std::chrono::duration<double>(clock.backward_start - fb_start).count();
    metrics.backward_seconds = metrics.forward_backward_seconds - metrics.forward_seconds;
    if (!std::isfinite(metrics.loss) && !scaler_.dynamic()) {
      return Status::infeasible(fmt::format(
          "loss became non-finite ({}) at step {}; lower optimizer.lr, set optimizer.grad_clip, or use fp32",
          metrics.loss, step));
    }

    const Clock::time_point opt_start = Clock::now();
    ZINF_ASSIGN_OR_RETURN(optim::StepReport report, states_.optimizer_step(optimizer_, metrics.lr, scaler_));
    ZINF_RETURN_IF_ERROR(states_.device().synchronize());
    if (step == first_step) ZINF_RETURN_IF_ERROR(check_collectives_agree());
    metrics.optimizer_seconds = seconds_since(opt_start);
    metrics.engine = difference(with_comm(states_.stats(), options_.comm_timing, states_.device()), before);
    metrics.checkpoints = model_.checkpoints().traffic() - checkpoints_before;
    metrics.grad_norm = report.grad_norm;
    metrics.clip_coef = report.clip_coef;
    metrics.skipped = report.skipped;
    metrics.step_seconds = seconds_since(step_start);
    observer.on_step(metrics);
    ++outcome.steps_run;
    if (!metrics.skipped && std::isfinite(metrics.loss)) {
      recent_losses_.push_back({step, metrics.loss});
      if (recent_losses_.size() > kRecentLossesKept) recent_losses_.erase(recent_losses_.begin());
    }

    const std::int64_t completed = step + 1;
    if (due(completed, options_.eval_every, end) && options_.eval_batches > 0) {
      const Clock::time_point eval_start = Clock::now();
      ZINF_ASSIGN_OR_RETURN(double eval_loss, evaluate(options_.eval_batches));
      observer.on_eval({step, eval_loss, options_.eval_batches, seconds_since(eval_start)});
    }
    if (!options_.checkpoint_dir.empty() && due(completed, options_.checkpoint_every, end)) {
      ZINF_RETURN_IF_ERROR(save(completed, observer, outcome));
    }
    if (world_size_ == 1 && completed < end && observer.stop_requested()) {
      outcome.stopped = true;
      break;
    }
  }
  return outcome;
}

Status Trainer::check_collectives_agree() {
  zero::CollectiveOrder* order = states_.collective_order();
  if (order == nullptr) return Status::ok();
  // The check's own host collectives go through the trainer's communicator, not the states': they
  // are not part of what is compared.
  Result<std::string> disagreement =
      find_collective_disagreement(options_.comm, {order->signature(), order->records()});
  order->stop_recording();
  ZINF_RETURN_IF_ERROR(disagreement.status());
  if (disagreement.value().empty()) return Status::ok();
  failure_agreed_ = true;  // every rank found the same first difference
  return Status::internal(disagreement.value());
}

}  // namespace zinf::train
