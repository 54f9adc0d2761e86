#include "planner/schedule_model.h"

#include <algorithm>

namespace zinf::planner {

std::string_view schedule_name(Schedule schedule) { return schedule == Schedule::kZinf ? "zinf" : "deepspeed"; }

std::optional<Schedule> schedule_from_name(std::string_view name) {
  if (name == "zinf") return Schedule::kZinf;
  if (name == "deepspeed") return Schedule::kDeepSpeed;
  return std::nullopt;
}

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizerRead:
      return "optimizer_read";
    case Phase::kOptimizerUpdate:
      return "optimizer_update";
    case Phase::kOptimizerWrite:
      return "optimizer_write";
    case Phase::kGradientNorm:
      return "gradient_norm";
  }
  return "?";
}

PhaseTime busiest(const ResourceSeconds& loads) {
  PhaseTime out;
  for (std::size_t r = 0; r < loads.size(); ++r) {
    if (loads[r] > out.seconds) out = {loads[r], r};
  }
  return out;
}

namespace {

ResourceSeconds sum(const ResourceSeconds& a, const ResourceSeconds& b) {
  ResourceSeconds out{};
  for (std::size_t r = 0; r < out.size(); ++r) out[r] = a[r] + b[r];
  return out;
}

}  // namespace

ScheduledStep schedule_step(const PhaseLoads& loads, const ScheduleOptions& options) {
  ScheduledStep out;
  out.schedule = options.schedule;
  const PhaseTime forward_alone = busiest(loads.at(Phase::kForward));
  out.forward = forward_alone;
  const PhaseTime backward_alone = busiest(loads.at(Phase::kBackward));
  const ResourceSeconds& read = loads.at(Phase::kOptimizerRead);
  const ResourceSeconds& update = loads.at(Phase::kOptimizerUpdate);
  const ResourceSeconds& write = loads.at(Phase::kOptimizerWrite);
  const ResourceSeconds& norm = loads.at(Phase::kGradientNorm);
  // Reads, updates and writes of different sub-groups pipeline against each other (read ahead,
  // step, write behind), so on its own the optimizer phase lasts as long as its busiest resource.
  const PhaseTime optimizer_alone = busiest(sum(sum(sum(read, update), write), norm));
  // Everything of the step on each resource: what zinf's writes behind and reads ahead share.
  const PhaseTime shared = busiest(
      sum(sum(sum(loads.at(Phase::kForward), loads.at(Phase::kBackward)), sum(read, update)), sum(write, norm)));
  out.optimizer_work_seconds = optimizer_alone.seconds;

  if (options.schedule == Schedule::kDeepSpeed || !options.optimizer_on_host) {
    out.backward = backward_alone;
    out.optimizer = optimizer_alone;
  } else if (options.norm_before_step) {
    // The reads that fit the pipeline share the backward pass's resources; the updates wait for
    // the norm, and the other reads follow them, each into a set whose write must finish first.
    // The other writes go on into the next forward pass: with everything else they share the step.
    const double ahead = std::clamp(options.read_ahead, 0.0, 1.0);
    ResourceSeconds read_before{}, after_norm = sum(norm, update);
    for (std::size_t r = 0; r < read.size(); ++r) {
      read_before[r] = ahead * read[r];
      after_norm[r] += (1.0 - ahead) * (read[r] + write[r]);
    }
    out.backward = busiest(sum(loads.at(Phase::kBackward), read_before));
    const PhaseTime exposed = busiest(after_norm);
    const double chain = out.forward.seconds + out.backward.seconds + exposed.seconds;
    out.optimizer.seconds = std::max(0.0, std::max(shared.seconds, chain) - out.forward.seconds - out.backward.seconds);
    out.optimizer.bottleneck = chain >= shared.seconds ? exposed.bottleneck : shared.bottleneck;
    out.overlapped = false;
  } else {
    // The optimizer's transfers share the whole step's resources: reads start with the forward pass
    // and the writes run on into the next one. The compute chain ends with the last sub-group's
    // update, exposed after the backward pass. The updates stepped during the backward pass take
    // their time on the compute resource from it where they use it (the CPU backend: CPU Adam on
    // the training thread, between the backward's operators); on a GPU they run on the host's
    // memory beside it.
    // After the backward pass: the norm (for the step's report; no update needs it, but the engine
    // computes it before it steps the sub-groups still waiting), then the last update.
    const PhaseTime update_alone = busiest(update);
    const PhaseTime norm_alone = busiest(norm);
    const double sub_groups = std::max(1.0, options.sub_groups);
    const double last_update = update_alone.seconds / sub_groups;
    const double tail = norm_alone.seconds + last_update;
    ResourceSeconds during = loads.at(Phase::kBackward);
    during[0] += update[0] * (1.0 - 1.0 / sub_groups);
    out.backward = busiest(during);
    out.optimizer = {tail, norm_alone.seconds > last_update ? norm_alone.bottleneck : update_alone.bottleneck};
    const double chain = out.forward.seconds + out.backward.seconds + tail;
    // A shared resource busier than the compute chain (the drive, usually) makes the compute wait
    // where it needs that resource's transfers: the parameters prefetched in the forward and the
    // backward pass queue behind the optimizer's reads and writes all step long, while the last
    // sub-group's states were read well before its update. So the wait lands in the two passes, in
    // proportion to their length (bench-overlap-nvme measured 28% / 67% / 4% of the step in forward
    // / backward / optimizer where this excess went to the optimizer phase and predicted it 5x).
    if (shared.seconds > chain) {
      const double excess = shared.seconds - chain;
      const double passes = out.forward.seconds + out.backward.seconds;
      const double forward_share = passes > 0 ? out.forward.seconds / passes : 0.5;
      out.forward = {out.forward.seconds + excess * forward_share, shared.bottleneck};
      out.backward = {out.backward.seconds + excess * (1.0 - forward_share), shared.bottleneck};
    }
    out.overlapped = true;
  }
  out.step_seconds = out.forward.seconds + out.backward.seconds + out.optimizer.seconds;
  const double deepspeed_step = forward_alone.seconds + backward_alone.seconds + optimizer_alone.seconds;
  // Rounding must not show as a sliver of hidden time where the schedules agree.
  const double hidden = deepspeed_step - out.step_seconds;
  out.optimizer_hidden_seconds = hidden > 1e-12 * deepspeed_step ? hidden : 0.0;
  return out;
}

}  // namespace zinf::planner
