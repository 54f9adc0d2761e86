#include "libengine/train/train_session.h"

#include "libengine/comm/local_communicator.h"
#include "libengine/comm/timed_communicator.h"

#include <fmt/format.h>

#include "kernels/threads.h"
#include "libengine/core/units.h"
#include "libengine/device/device_factory.h"
#include "libengine/memory/aligned_buffer.h"
#include "libengine/optim/adam_optimizer.h"
#include "libengine/spec/scenario_deepspeed.h"
#include "libengine/zero/partitioned_states.h"
#include "libengine/zero/replicated_states.h"

namespace zinf::train {
namespace {

// A budget error found while building the model or its states is the scenario's fault: it names
// the field to change, not a runtime failure.
Status as_budget_error(const Status& status, const spec::Scenario& scenario) {
  if (status.code() != ErrorCode::kOutOfMemory) return status;
  // No budget failed: the machine has less memory than the scenario needs. Its message names that
  // limit; blaming device_memory or host_memory (possibly unbounded) would send the user astray.
  if (memory::refused_by_system(status)) {
    return Status::invalid_argument(
        fmt::format("{}; lower batch/seq, or move states to \"nvme\" (zero section)", status.message()));
  }
  if (status.message().find("on the host tier") != std::string::npos) {
    return Status::invalid_argument(
        fmt::format("scenario.zero.host_memory: {} is too small for this plan: {}; raise "
                    "it or move states to \"nvme\"",
                    format_bytes(static_cast<double>(scenario.zero.host_memory_bytes)), status.message()));
  }
  const std::string budget = scenario.device_memory_bytes
                                 ? format_bytes(static_cast<double>(*scenario.device_memory_bytes))
                                 : std::string("unbounded");
  const char* hint = scenario.activation_checkpointing
                         ? (scenario.zero.activations == spec::Tier::kDevice
                                ? "raise device_memory, lower batch/seq, or set zero.activations \"cpu\" (block inputs "
                                  "in host memory)"
                                : "raise device_memory or lower batch/seq")
                         : "raise device_memory, lower batch/seq, or set activation_checkpointing (one block's "
                           "activations instead of every block's)";
  return Status::invalid_argument(
      fmt::format("scenario.device_memory: {} is too small for this model: {}; {}", budget, status.message(), hint));
}

// Data-source errors name "data.<field>"; in a scenario that is "scenario.data.<field>".
Status in_scenario(const Status& status) {
  if (status.message().rfind("data.", 0) == 0) return Status(status.code(), "scenario." + status.message());
  return status;
}

}  // namespace

Status check_world_size(const spec::Scenario& scenario, int world_size) {
  if (world_size < 1 || scenario.batch % world_size != 0) {
    return Status::invalid_argument(fmt::format(
        "scenario.batch: {} does not split evenly over {} ranks; use a multiple of {} (each rank trains on batch / "
        "ranks rows of every batch)",
        scenario.batch, world_size, world_size));
  }
  return Status::ok();
}

Result<std::unique_ptr<TrainSession>> TrainSession::create(const spec::Scenario& scenario,
                                                           TrainSessionOptions options) {
  const spec::LrScheduleConfig& sched = scenario.optimizer.schedule;
  if (sched.kind != optim::LrScheduleKind::kConstant && scenario.steps <= sched.warmup_steps) {
    // Checked here as well as by the parser because --steps may shorten a run after parsing.
    return Status::invalid_argument(fmt::format(
        "scenario.steps: {} is not more than optimizer.schedule.warmup_steps {}; a {} schedule decays over the "
        "steps after warm-up (raise steps, e.g. with --steps, or lower warmup_steps)",
        scenario.steps, sched.warmup_steps, optim::lr_schedule_kind_name(sched.kind)));
  }
  std::unique_ptr<TrainSession> session(new TrainSession(scenario));
  // Ranks on one node share its cores.
  const int threads = scenario.threads > 0
                          ? static_cast<int>(scenario.threads)
                          : std::max(1, kernels::cpu::available_cores() / std::max(1, options.local_size));
  if (!kernels::cpu::address_space_for_threads(threads)) {
    // OpenBLAS would spin forever on the buffer mmap it cannot get; say so instead.
    return Status::invalid_argument(fmt::format(
        "scenario.threads: {} compute threads need {} of address space for their GEMM buffers and stacks, more than "
        "this process may still map (ulimit -v); lower threads or raise the limit",
        threads,
        format_bytes(static_cast<double>(threads) * static_cast<double>(kernels::cpu::kAddressSpacePerThreadBytes))));
  }
  kernels::cpu::set_compute_threads(threads);
  device::DeviceOptions device_options;
  device_options.kind = scenario.device;
  device_options.memory_budget_bytes = scenario.device_memory_bytes.value_or(0);
  device_options.host_memory_budget_bytes = scenario.zero.host_memory_bytes;
  device_options.copy_threads = options.copy_threads;
  Result<std::unique_ptr<device::Device>> device = device::make_device(device_options);
  if (!device.is_ok()) {
    const std::string& message = device.status().message();
    return Status(device.status().code(), message.rfind("scenario.", 0) == 0 ? message : "scenario." + message);
  }
  session->device_ = std::move(device).value();
  std::unique_ptr<comm::Communicator> ranks;
  if (options.make_comm) {
    ZINF_ASSIGN_OR_RETURN(ranks, options.make_comm(*session->device_));
  } else {
    ranks = std::make_unique<comm::LocalCommunicator>(*session->device_);
  }
  // Every collective is timed, so each step reports its communication time (StepMetrics.engine).
  auto timed = std::make_unique<comm::TimedCommunicator>(std::move(ranks));
  const comm::TimedCommunicator* comm_timing = timed.get();
  session->comm_ = std::move(timed);
  comm::Communicator* comm = session->comm_.get();
  const int world_size = comm->world_size();
  ZINF_RETURN_IF_ERROR(check_world_size(scenario, world_size));
  // Mixed precision computes in the storage precision where the device can (CUDA: bf16/fp16 GEMMs
  // and attention on tensor cores); the CPU backend computes in fp32 from the half copies.
  const DType compute_dtype =
      session->device_->ops().supports_compute_dtype(scenario.precision) ? scenario.precision : DType::kF32;

  const BatchShape shape{static_cast<std::uint64_t>(scenario.batch), static_cast<std::uint64_t>(scenario.seq)};
  Result<BatchSource> data = Status::internal("no data source");
  if (scenario.data.source == spec::DataSource::kMarkov) {
    MarkovSpec markov;
    markov.vocab = static_cast<std::uint32_t>(scenario.shape.vocab);
    markov.successors = scenario.data.successors;
    markov.skew = scenario.data.skew;
    markov.seed = scenario.data.chain_seed;
    data = BatchSource::markov(markov, shape);
  } else {
    data = BatchSource::token_file(scenario.data.path, static_cast<std::uint32_t>(scenario.shape.vocab), shape);
  }
  if (!data.is_ok()) return in_scenario(data.status());
  session->data_.emplace(std::move(data).value());

  model::GptConfig model_config;
  model_config.shape = scenario.shape;
  model_config.batch = scenario.batch / world_size;
  model_config.seq = scenario.seq;
  model_config.activation_checkpointing = scenario.activation_checkpointing;
  model_config.offload_checkpoints = scenario.zero.activations == spec::Tier::kCpu;
  model_config.tiling = scenario.tiling;
  model_config.operator_tiling = scenario.operator_tiling;
  model_config.compute_dtype = compute_dtype;
  Result<std::unique_ptr<model::Gpt>> model = model::Gpt::create(model_config, *session->device_);
  if (!model.is_ok()) return as_budget_error(model.status(), scenario);
  session->model_ = std::move(model).value();

  if (scenario.zero.partitioned()) {
    zero::PartitionedStatesOptions state_options;
    state_options.precision = scenario.precision;
    state_options.compute_dtype = compute_dtype;
    state_options.seed = scenario.seed;
    state_options.zero = scenario.zero;
    state_options.io_engine = std::move(options.io_engine);
    state_options.on_warning = options.on_warning;
    state_options.comm = comm;
    Result<std::unique_ptr<zero::PartitionedStates>> states =
        zero::PartitionedStates::create(session->model_->params(), *session->device_, std::move(state_options));
    // Built from a DeepSpeed config, the budgets are named by the keys the user wrote.
    if (!states.is_ok()) return spec::name_deepspeed_keys(as_budget_error(states.status(), scenario), scenario);
    session->zero_ = states.value()->resolved();
    session->states_ = std::move(states).value();
  } else {
    session->zero_ = scenario.zero;
    zero::ReplicatedStatesOptions state_options;
    state_options.precision = scenario.precision;
    state_options.compute_dtype = compute_dtype;
    state_options.seed = scenario.seed;
    state_options.comm = comm;
    Result<std::unique_ptr<zero::ReplicatedStates>> states =
        zero::ReplicatedStates::create(session->model_->params(), *session->device_, state_options);
    if (!states.is_ok()) return as_budget_error(states.status(), scenario);
    session->states_ = std::move(states).value();
  }

  optim::AdamConfig adam;
  adam.beta1 = scenario.optimizer.beta1;
  adam.beta2 = scenario.optimizer.beta2;
  adam.eps = scenario.optimizer.eps;
  adam.weight_decay = scenario.optimizer.weight_decay;
  adam.decoupled = scenario.optimizer.type == spec::OptimizerType::kAdamW;
  adam.grad_clip = scenario.optimizer.grad_clip;
  Result<optim::AdamOptimizer> optimizer = optim::AdamOptimizer::create(adam);
  if (!optimizer.is_ok()) return Status(optimizer.status().code(), "scenario." + optimizer.status().message());
  session->optimizer_ = std::make_unique<optim::AdamOptimizer>(std::move(optimizer).value());

  optim::LrScheduleConfig schedule;
  schedule.kind = scenario.optimizer.schedule.kind;
  schedule.lr = scenario.optimizer.lr;
  schedule.warmup_steps = scenario.optimizer.schedule.warmup_steps;
  schedule.total_steps = scenario.steps;
  schedule.min_lr_ratio = scenario.optimizer.schedule.min_lr_ratio;
  Result<optim::LrSchedule> lr = optim::LrSchedule::create(schedule);
  if (!lr.is_ok()) return Status(lr.status().code(), "scenario." + lr.status().message());
  session->schedule_ = std::make_unique<optim::LrSchedule>(std::move(lr).value());

  optim::LossScalerConfig scaling;
  scaling.kind = scenario.precision == DType::kF16 ? optim::LossScaling::kDynamic : optim::LossScaling::kNone;
  scaling.initial_scale = scenario.loss_scale.initial;
  scaling.growth_interval = scenario.loss_scale.growth_interval;
  Result<optim::LossScaler> scaler = optim::LossScaler::create(scaling);
  if (!scaler.is_ok()) return Status(scaler.status().code(), "scenario." + scaler.status().message());
  session->scaler_ = std::make_unique<optim::LossScaler>(std::move(scaler).value());

  TrainerOptions trainer_options;
  trainer_options.steps = scenario.steps;
  trainer_options.stop_after = options.stop_after;
  trainer_options.eval_every = scenario.eval.every;
  trainer_options.eval_batches = scenario.eval.every > 0 ? scenario.eval.batches : 0;
  if (!scenario.checkpoint.dir.empty()) {
    trainer_options.checkpoint_dir = scenario.checkpoint.dir;
    trainer_options.checkpoint_every = scenario.checkpoint.every;
    trainer_options.checkpoint_keep_last = static_cast<int>(scenario.checkpoint.keep_last);
    trainer_options.resume = scenario.checkpoint.resume && options.resume;
    trainer_options.checkpoint_strict = scenario.checkpoint.strict;
  }
  trainer_options.fingerprint = spec::fingerprint(scenario);
  trainer_options.init_weights = scenario.init.safetensors;
  trainer_options.comm = comm;
  trainer_options.comm_timing = comm_timing;
  trainer_options.on_warning = options.on_warning;
  session->trainer_ =
      std::make_unique<Trainer>(*session->model_, *session->states_, *session->optimizer_, *session->schedule_,
                                *session->scaler_, *session->data_, trainer_options);
  return session;
}

}  // namespace zinf::train
