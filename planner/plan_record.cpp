#include "planner/plan_record.h"

#include "libengine/core/dtype.h"

namespace zinf::planner {

using nlohmann::json;
using spec::StateKind;
using spec::Tier;

namespace {

std::string_view norm_name(spec::NormKind norm) { return norm == spec::NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }
std::string_view mlp_name(spec::MlpKind mlp) { return mlp == spec::MlpKind::kGelu ? "gelu" : "gated"; }
std::string_view position_name(spec::PositionKind position) {
  return position == spec::PositionKind::kLearned ? "learned" : "rotary";
}

json tier_usage_to_json(const TierUsage& usage) {
  json items = json::array();
  for (const TierItem& item : usage.items) items.push_back({{"what", item.what}, {"bytes", item.bytes}});
  return {{"tier", spec::tier_name(usage.tier)},
          {"unit", usage.tier == Tier::kDevice ? "per_gpu" : "per_node"},
          {"used_bytes", usage.used_bytes},
          {"capacity_bytes", usage.capacity_bytes},
          {"fits", usage.fits()},
          {"items", std::move(items)}};
}

json hardware_summary(const HardwareProfile& hardware) {
  json hw = hardware_profile_to_json(hardware);
  hw["total_gpus"] = hardware.total_gpus();
  return hw;
}

json input_to_json(const PlanInput& input) {
  json pinned = json::object();
  for (StateKind kind : spec::kAllStateKinds) {
    const auto& tier = input.pinned[static_cast<std::size_t>(kind)];
    if (tier) pinned[std::string(spec::state_kind_name(kind))] = spec::tier_name(*tier);
  }
  return {{"model_source", input.model_source},
          {"requested_params", input.requested_params > 0 ? json(input.requested_params) : json(nullptr)},
          {"training", training_to_json(input.training)},
          {"hardware", hardware_summary(input.hardware)},
          {"strategy", strategy_name(input.strategy)},
          {"pinned", std::move(pinned)},
          {"fp32_matmul_tf32", input.fp32_matmul_tf32},
          {"target_efficiency", input.target_efficiency},
          {"schedule", schedule_name(input.schedule)}};
}

json scheduled_step_to_json(const ScheduledStep& step) {
  const auto phase = [](std::string_view name, const PhaseTime& time) {
    return json{
        {"phase", name}, {"seconds", time.seconds}, {"bottleneck", resource_name(kAllResources[time.bottleneck])}};
  };
  return {{"schedule", schedule_name(step.schedule)},
          {"step_seconds", step.step_seconds},
          {"phases", json::array({phase("forward", step.forward), phase("backward", step.backward),
                                  phase("optimizer", step.optimizer)})},
          {"optimizer_work_seconds", step.optimizer_work_seconds},
          {"optimizer_hidden_seconds", step.optimizer_hidden_seconds},
          {"optimizer_overlaps_backward", step.overlapped}};
}

}  // namespace

json model_shape_to_json(const spec::ModelShape& shape) {
  return {{"name", shape.name},
          {"layers", shape.layers},
          {"hidden", shape.hidden},
          {"heads", shape.heads},
          {"kv_heads", shape.kv_heads},
          {"head_dim", shape.head_dim},
          {"ffn_hidden", shape.ffn_hidden},
          {"vocab", shape.vocab},
          {"max_positions", shape.max_positions},
          {"norm", norm_name(shape.norm)},
          {"mlp", mlp_name(shape.mlp)},
          {"position", position_name(shape.position)},
          {"qkv_bias", shape.qkv_bias},
          {"attn_out_bias", shape.attn_out_bias},
          {"mlp_bias", shape.mlp_bias},
          {"tied_embeddings", shape.tied_embeddings}};
}

json training_to_json(const spec::TrainingSpec& training) {
  return {{"seq", training.seq},
          {"micro_batch", training.micro_batch},
          {"ckpt_interval", training.ckpt_interval},
          {"tiling", training.tiling},
          {"precision", dtype_name(training.precision)},
          {"accounting", spec::accounting_name(training.accounting)},
          {"activation_checkpointing", training.activation_checkpointing},
          {"norm_before_step", training.norm_before_step}};
}

json placement_to_json(const spec::StatePlacement& placement) {
  json out = json::object();
  for (StateKind kind : spec::kAllStateKinds)
    out[std::string(spec::state_kind_name(kind))] = spec::tier_name(placement[kind]);
  return out;
}

json prediction_to_json(const Prediction& prediction) {
  return {{"step_seconds", prediction.step_seconds},
          {"step_seconds_full_overlap", prediction.step_seconds_full_overlap},
          {"step_seconds_no_overlap", prediction.step_seconds_no_overlap},
          {"step_seconds_other_schedule", prediction.step_seconds_other_schedule},
          {"compute_seconds", prediction.compute_seconds},
          {"tokens_per_second", prediction.tokens_per_second},
          {"achieved_flops_per_gpu", prediction.achieved_flops_per_gpu},
          {"mfu", prediction.mfu},
          {"efficiency", prediction.efficiency}};
}

void append_plan(const Plan& plan, json& record) {
  const ModelMemory& memory = plan.memory;
  const spec::ParameterCount& count = plan.parameters;
  record["input"] = input_to_json(plan.input);
  record["compute_rate"] = {{"math_mode", math_mode_name(plan.rate.mode)},
                            {"peak_flops", plan.rate.peak_flops},
                            {"peak_basis", plan.rate.peak_basis},
                            {"achievable_flops", plan.rate.achievable_flops},
                            {"achievable_basis", plan.rate.achievable_basis}};
  record["model"] = {
      {"shape", model_shape_to_json(plan.input.shape)},
      {"parameters",
       {{"total", count.total},
        {"embeddings", count.embeddings},
        {"attention", count.attention},
        {"mlp", count.mlp},
        {"norms", count.norms},
        {"head", count.head},
        {"per_layer", count.per_layer},
        {"largest_operator", count.largest_operator},
        {"paper_estimate", paper_parameter_estimate(plan.input.shape.layers, plan.input.shape.hidden)}}},
  };
  const spec::StateBytesPerParam& per = memory.bytes_per_param;
  json states = json::array();
  const std::int64_t gpus = plan.input.hardware.total_gpus();
  for (StateKind kind : spec::kAllStateKinds) {
    const double total = cluster_state_bytes(kind, memory, plan.rules, gpus);
    states.push_back({{"kind", spec::state_kind_name(kind)},
                      {"tier", spec::tier_name(plan.placement[kind])},
                      {"bytes_total", total},
                      {"bytes_per_gpu", total / static_cast<double>(gpus)},
                      {"bytes_per_node", total / static_cast<double>(plan.input.hardware.nodes)}});
  }
  record["memory"] = {
      {"bytes_per_param",
       {{"params", per.params},
        {"grads", per.grads},
        {"master_params", per.master_params},
        {"fp32_grads", per.fp32_grads},
        {"momentum", per.momentum},
        {"variance", per.variance},
        {"total", per.total()}}},
      {"states", std::move(states)},
      {"working",
       {{"model_state_bytes_per_gpu", memory.model_state_working_bytes_per_gpu},
        {"activation_bytes_per_gpu", memory.activation_working_bytes_per_gpu}}},
      {"tiers", json::array({tier_usage_to_json(plan.footprint.device), tier_usage_to_json(plan.footprint.cpu),
                             tier_usage_to_json(plan.footprint.nvme)})},
  };
  record["feasible"] = plan.feasible;
  record["strategy"] = strategy_name(plan.input.strategy);
  record["family"] = plan.family;
  record["partitioning"] = {{"params", plan.rules.params_partitioned},
                            {"grads_and_optimizer", plan.rules.states_partitioned}};
  record["placement"] = placement_to_json(plan.placement);
  if (plan.feasible) {
    json groups = json::array();
    for (TrafficGroup group : kAllTrafficGroups) {
      const GroupTraffic& traffic = plan.step.group(group);
      groups.push_back(
          {{"group", traffic_group_name(group)},
           {"bytes_per_gpu", traffic.bytes_per_gpu},
           {"arithmetic_intensity", traffic.arithmetic_intensity},
           {"seconds", traffic.seconds},
           {"available_bytes_per_second", traffic.seconds > 0 ? json(traffic.effective_bandwidth) : json(nullptr)},
           {"required_bytes_per_second", traffic.required_bandwidth},
           {"efficiency", traffic.efficiency}});
    }
    json resources = json::array();
    for (Resource resource : kAllResources) {
      const ResourceLoad& load = plan.step.load(resource);
      resources.push_back({{"resource", resource_name(resource)},
                           {"unit", resource_is_per_node(resource) ? "per_node" : "per_gpu"},
                           {resource == Resource::kCompute ? "flops" : "bytes", load.bytes},
                           {"seconds", load.seconds}});
    }
    record["bandwidth"] = std::move(groups);
    record["resources"] = std::move(resources);
    record["prediction"] = prediction_to_json(plan.prediction);
    json schedules = json::array();
    for (Schedule s : kAllSchedules) schedules.push_back(scheduled_step_to_json(plan.step.schedule(s)));
    record["schedule"] = {{"name", schedule_name(plan.input.schedule)},
                          {"norm_before_step", norm_before_step(plan.input.training)},
                          {"chosen", scheduled_step_to_json(plan.step.scheduled)},
                          {"all", std::move(schedules)},
                          {"zinf_speedup_over_deepspeed", plan.step.schedule(Schedule::kDeepSpeed).step_seconds /
                                                              plan.step.schedule(Schedule::kZinf).step_seconds}};
    record["bottleneck"] = {{"resource", resource_name(plan.step.bottleneck)}, {"explanation", plan.bottleneck}};
  } else {
    record["bottleneck"] = {{"resource", nullptr}, {"explanation", plan.bottleneck}};
  }
  json suggestions = json::array();
  for (const Suggestion& s : plan.suggestions) {
    json changes = json::array();
    for (const FieldChange& c : s.changes) changes.push_back({{"field", c.field}, {"value", c.value}});
    suggestions.push_back({{"changes", std::move(changes)}, {"why", s.why}});
  }
  record["suggestions"] = std::move(suggestions);
  record["notes"] = plan.notes;
}

void append_max_params(const PlanInput& base, const std::vector<MaxParamsResult>& results, json& record) {
  record["input"] = input_to_json(base);
  json rows = json::array();
  for (const MaxParamsResult& r : results) {
    json row = {{"strategy", strategy_name(r.strategy)},
                {"title", strategy_title(r.strategy)},
                {"max_params", r.max_params},
                {"at_search_limit", r.at_search_limit},
                {"limit", r.limit}};
    if (r.max_params > 0) {
      row["shape"] = model_shape_to_json(r.shape);
      row["placement"] = placement_to_json(r.placement);
      row["prediction"] = prediction_to_json(r.prediction);
    }
    rows.push_back(std::move(row));
  }
  record["strategies"] = std::move(rows);
}

void append_sweep(const std::vector<SweepDimension>& dimensions, const std::vector<SweepPoint>& points, json& record) {
  json dims = json::array();
  for (const SweepDimension& d : dimensions) dims.push_back({{"key", sweep_key_name(d.key)}, {"values", d.values}});
  record["dimensions"] = std::move(dims);
  if (!points.empty()) record["input"] = input_to_json(points.front().input);
  json rows = json::array();
  for (const SweepPoint& p : points) {
    const spec::ModelShape& shape = p.input.shape;
    json row = {{"params", spec::count_parameters(shape).total},
                {"layers", shape.layers},
                {"hidden", shape.hidden},
                {"heads", shape.heads},
                {"nodes", p.input.hardware.nodes},
                {"gpus_per_node", p.input.hardware.node.gpus},
                {"micro_batch", p.input.training.micro_batch},
                {"seq", p.input.training.seq},
                {"tiling", p.input.training.tiling},
                {"ckpt_interval", p.input.training.ckpt_interval},
                {"feasible", p.feasible},
                {"fullest_tier_fraction", p.worst_fraction}};
    if (p.feasible) {
      row["placement"] = placement_to_json(p.placement);
      row["prediction"] = prediction_to_json(p.prediction);
      row["bottleneck"] = resource_name(p.bottleneck);
    }
    rows.push_back(std::move(row));
  }
  record["rows"] = std::move(rows);
}

}  // namespace zinf::planner
