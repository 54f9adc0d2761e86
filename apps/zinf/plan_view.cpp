#include "apps/zinf/plan_view.h"

#include "apps/zinf/plan_flags.h"

#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "libengine/core/units.h"
#include "planner/plan_record.h"
#include "reports/record_envelope.h"

namespace zinf::cli {
namespace {

using planner::Resource;
using planner::TrafficGroup;
using reports::Align;
using reports::Cell;
using reports::Emphasis;
using reports::Section;
using spec::StateKind;
using spec::Tier;

std::string percent(double fraction) { return fmt::format("{:.0f}%", 100.0 * fraction); }

std::string hardware_line(const planner::HardwareProfile& hw) {
  return fmt::format("{} x {} ({} GPUs: {} x {} {})", hw.nodes, hw.name, hw.total_gpus(), hw.node.gpus,
                     hw.node.gpu.name, format_bytes(static_cast<double>(hw.node.gpu.memory_bytes)));
}

std::string shape_line(const spec::ModelShape& s) {
  std::string line = fmt::format("{} layers, hidden {}, {} heads", s.layers, s.hidden, s.heads);
  if (s.kv_heads != s.heads) line += fmt::format(" ({} kv)", s.kv_heads);
  line += fmt::format(", ffn {}, vocab {}", s.ffn_hidden, s.vocab);
  if (s.mlp == spec::MlpKind::kGated) line += ", gated MLP";
  if (s.norm == spec::NormKind::kRmsNorm) line += ", RMSNorm";
  line += s.tied_embeddings ? ", tied head" : ", untied head";
  return line;
}

std::string placement_short(const spec::StatePlacement& p) {
  return fmt::format("{}/{}/{}/{}", spec::tier_name(p[StateKind::kParams]), spec::tier_name(p[StateKind::kGrads]),
                     spec::tier_name(p[StateKind::kOptimizer]), spec::tier_name(p[StateKind::kActivations]));
}

std::string state_detail(StateKind kind, const spec::StateBytesPerParam& per, DType precision) {
  switch (kind) {
    case StateKind::kParams:
      return fmt::format("{} B/param ({})", per.params, dtype_name(precision));
    case StateKind::kGrads:
      return fmt::format("{} B/param ({})", per.grads, dtype_name(precision));
    case StateKind::kOptimizer: {
      std::string parts;
      if (per.master_params > 0) parts += "fp32 params, ";
      if (per.fp32_grads > 0) parts += "fp32 grads, ";
      return fmt::format("{} B/param ({}Adam m, v)", per.optimizer(), parts);
    }
    case StateKind::kActivations:
      return "2·bsz·seq·hd per checkpoint";
  }
  return "";
}

Section model_section(const planner::Plan& plan) {
  const spec::ModelShape& shape = plan.input.shape;
  Section s{"Model", {}, {}, {}, {}};
  s.fields.push_back({"source", plan.input.model_source});
  s.fields.push_back({"shape", shape_line(shape)});
  s.fields.push_back(
      {"parameters", Cell(fmt::format("{} ({} exact; paper estimate 12·nl·hd² = {})",
                                      format_count(static_cast<double>(plan.parameters.total)), plan.parameters.total,
                                      format_count(planner::paper_parameter_estimate(shape.layers, shape.hidden))),
                          Emphasis::kStrong)});
  const spec::TrainingSpec& t = plan.input.training;
  s.fields.push_back(
      {"training", fmt::format("seq {}, micro-batch {} per GPU, checkpoint every {} layer(s), tiling {}, {} "
                               "with '{}' accounting ({} B/param)",
                               t.seq, t.micro_batch, t.ckpt_interval, t.tiling, dtype_name(t.precision),
                               spec::accounting_name(t.accounting), plan.memory.bytes_per_param.total())});
  return s;
}

Section states_section(const planner::Plan& plan) {
  const std::int64_t gpus = plan.input.hardware.total_gpus();
  Section s{"Memory per kind of state", {}, {}, {}, {}};
  s.table.columns = {
      {"state"},    {"size"}, {"total", Align::kRight}, {"per GPU", Align::kRight}, {"per node", Align::kRight},
      {"placed on"}};
  for (StateKind kind : spec::kAllStateKinds) {
    const double total = planner::cluster_state_bytes(kind, plan.memory, plan.rules, gpus);
    s.table.rows.push_back({std::string(spec::state_kind_title(kind)),
                            state_detail(kind, plan.memory.bytes_per_param, plan.input.training.precision),
                            format_bytes(total), format_bytes(total / static_cast<double>(gpus)),
                            format_bytes(total / static_cast<double>(plan.input.hardware.nodes)),
                            Cell(std::string(spec::tier_name(plan.placement[kind])), Emphasis::kStrong)});
  }
  s.table.rows.push_back({"model-state working memory",
                          fmt::format("largest operator / tiling {}", plan.input.training.tiling), "",
                          format_bytes(plan.memory.model_state_working_bytes_per_gpu), "", "gpu"});
  s.table.rows.push_back({"activation working memory", "bsz·seq·ci·(16·hd + 2·heads·seq)", "",
                          format_bytes(plan.memory.activation_working_bytes_per_gpu), "", "gpu"});
  if (!plan.rules.params_partitioned) {
    s.notes.push_back(
        fmt::format("{} keeps a full copy of the parameters on every GPU, so no gathering working memory is needed",
                    planner::strategy_title(plan.input.strategy)));
  }
  return s;
}

Section tiers_section(const planner::Plan& plan) {
  Section s{"Memory per tier", {}, {}, {}, {}};
  s.table.columns = {
      {"tier"}, {"unit"}, {"used", Align::kRight}, {"capacity", Align::kRight}, {"used %", Align::kRight}, {"holds"}};
  for (Tier tier : spec::kAllTiers) {
    const planner::TierUsage& usage = plan.footprint.tier(tier);
    std::string holds;
    for (const planner::TierItem& item : usage.items) holds += (holds.empty() ? "" : ", ") + item.what;
    const Emphasis emphasis = !usage.fits()            ? Emphasis::kBad
                              : usage.fraction() > 0.9 ? Emphasis::kWarn
                                                       : Emphasis::kNone;
    s.table.rows.push_back(
        {std::string(spec::tier_name(tier)), tier == Tier::kDevice ? "per GPU" : "per node",
         format_bytes(usage.used_bytes), format_bytes(usage.capacity_bytes),
         Cell(usage.capacity_bytes > 0 ? percent(usage.fraction()) : (usage.used_bytes > 0 ? "n/a" : "-"), emphasis),
         holds.empty() ? "-" : holds});
  }
  return s;
}

Section bandwidth_section(const planner::Plan& plan) {
  Section s{"Bandwidth (ZeRO-Infinity paper, §4)", {}, {}, {}, {}};
  s.table.columns = {{"traffic"},
                     {"tier"},
                     {"FLOP/byte", Align::kRight},
                     {"moved per GPU", Align::kRight},
                     {fmt::format("needed for {}", percent(plan.input.target_efficiency)), Align::kRight},
                     {"available", Align::kRight},
                     {"efficiency", Align::kRight}};
  const auto tier_of = [&](TrafficGroup g) -> std::string {
    const spec::StatePlacement& p = plan.placement;
    switch (g) {
      case TrafficGroup::kParamsAndGrads:
        return p[StateKind::kParams] == p[StateKind::kGrads]
                   ? std::string(spec::tier_name(p[StateKind::kParams]))
                   : fmt::format("{}+{}", spec::tier_name(p[StateKind::kParams]),
                                 spec::tier_name(p[StateKind::kGrads]));
      case TrafficGroup::kOptimizer:
        return std::string(spec::tier_name(p[StateKind::kOptimizer]));
      case TrafficGroup::kActivations:
        return std::string(spec::tier_name(p[StateKind::kActivations]));
    }
    return "";
  };
  for (TrafficGroup group : planner::kAllTrafficGroups) {
    const planner::GroupTraffic& g = plan.step.group(group);
    const bool moves = g.seconds > 0;
    const Emphasis emphasis = !moves                                         ? Emphasis::kNone
                              : g.efficiency >= plan.input.target_efficiency ? Emphasis::kGood
                              : g.efficiency >= 0.5                          ? Emphasis::kWarn
                                                                             : Emphasis::kBad;
    s.table.rows.push_back({std::string(planner::traffic_group_title(group)), tier_of(group),
                            fmt::format("{:.0f}", g.arithmetic_intensity), format_bytes(g.bytes_per_gpu),
                            format_bandwidth(g.required_bandwidth),
                            moves ? format_bandwidth(g.effective_bandwidth) : "not limited",
                            Cell(moves ? percent(g.efficiency) : "100%", emphasis)});
  }
  s.notes.push_back(
      "efficiency = ait·bw / (ait·bw + peak), with ait (FLOPs per byte moved) seq·bsz for parameters + gradients, "
      "seq·bsz/4 for optimizer states, 24·hd·ci for activation checkpoints; 'available' is the bandwidth the placement "
      "delivers to each GPU, aggregated over all ranks by bandwidth-centric partitioning");
  return s;
}

Section links_section(const planner::Plan& plan) {
  Section s{"Per step, per link", {}, {}, {}, {}};
  s.table.columns = {
      {"resource"}, {"unit"}, {"work", Align::kRight}, {"busy", Align::kRight}, {"vs compute", Align::kRight}};
  for (Resource r : planner::kAllResources) {
    const planner::ResourceLoad& load = plan.step.load(r);
    if (r != Resource::kCompute && load.seconds <= 0) continue;
    const bool bottleneck = r == plan.step.bottleneck;
    s.table.rows.push_back(
        {Cell(std::string(planner::resource_title(r)), bottleneck ? Emphasis::kStrong : Emphasis::kNone),
         planner::resource_is_per_node(r) ? "per node" : "per GPU",
         r == Resource::kCompute ? fmt::format("{:.3g} FLOP", load.bytes) : format_bytes(load.bytes),
         format_duration(load.seconds),
         Cell(fmt::format("{:.2f}x", load.seconds / plan.step.compute_seconds),
              bottleneck && r != Resource::kCompute ? Emphasis::kBad : Emphasis::kNone)});
  }
  return s;
}

// The phases of the step under each schedule: how long, what limits each, how much of the
// optimizer the zinf schedule hides behind the backward pass.
Section schedule_section(const planner::Plan& plan) {
  Section s{"Schedule (phases of one step)", {}, {}, {}, {}};
  s.table.columns = {{"schedule"},
                     {"forward", Align::kRight},
                     {"backward", Align::kRight},
                     {"optimizer after backward", Align::kRight},
                     {"optimizer hidden", Align::kRight},
                     {"step", Align::kRight},
                     {"limited by (fwd / bwd / opt)"}};
  for (planner::Schedule schedule : planner::kAllSchedules) {
    const planner::ScheduledStep& step = plan.step.schedule(schedule);
    const auto limit = [](const planner::PhaseTime& t) {
      return std::string(planner::resource_name(planner::kAllResources[t.bottleneck]));
    };
    const bool chosen = schedule == plan.input.schedule;
    s.table.rows.push_back({Cell(std::string(planner::schedule_name(schedule)) + (chosen ? " (this plan)" : ""),
                                 chosen ? Emphasis::kStrong : Emphasis::kNone),
                            format_duration(step.forward.seconds), format_duration(step.backward.seconds),
                            format_duration(step.optimizer.seconds),
                            step.optimizer_work_seconds > 0
                                ? fmt::format("{} ({})", format_duration(step.optimizer_hidden_seconds),
                                              percent(step.optimizer_hidden_seconds / step.optimizer_work_seconds))
                                : std::string("-"),
                            format_duration(step.step_seconds),
                            fmt::format("{} / {} / {}", limit(step.forward), limit(step.backward),
                                        step.optimizer.seconds > 0 ? limit(step.optimizer) : std::string("-"))});
  }
  const double speedup = plan.step.schedule(planner::Schedule::kDeepSpeed).step_seconds /
                         plan.step.schedule(planner::Schedule::kZinf).step_seconds;
  s.notes.push_back(fmt::format(
      "zinf's schedule is {:.2f}x DeepSpeed's on this hardware: {}", speedup,
      planner::norm_before_step(plan.input.training)
          ? "the step needs the global gradient norm first (clipping or fp16 loss scaling), so only the optimizer's "
            "NVMe reads overlap the backward pass"
          : "each sub-group's optimizer reads, step and write-behind run during the backward pass as soon as its "
            "gradients are final"));
  return s;
}

Section prediction_section(const planner::Plan& plan) {
  const planner::Prediction& p = plan.prediction;
  Section s{"Prediction", {}, {}, {}, {}};
  const planner::Schedule other =
      plan.input.schedule == planner::Schedule::kZinf ? planner::Schedule::kDeepSpeed : planner::Schedule::kZinf;
  s.fields.push_back(
      {"step time",
       Cell(fmt::format("{} with {}'s schedule ({} with {}'s; {} if every transfer hid behind compute, {} if none did)",
                        format_duration(p.step_seconds), planner::schedule_name(plan.input.schedule),
                        format_duration(p.step_seconds_other_schedule), planner::schedule_name(other),
                        format_duration(p.step_seconds_full_overlap), format_duration(p.step_seconds_no_overlap)),
            Emphasis::kStrong)});
  s.fields.push_back({"throughput", fmt::format("{} tokens/s ({} GPUs x {} x {} tokens per step)",
                                                format_count(p.tokens_per_second), plan.input.hardware.total_gpus(),
                                                plan.input.training.micro_batch, plan.input.training.seq)});
  s.fields.push_back(
      {"per GPU", fmt::format("{} achieved ({} of {} achievable in {}), MFU {} of the {} peak",
                              format_flops(p.achieved_flops_per_gpu), percent(p.efficiency),
                              format_flops(plan.rate.achievable_flops), planner::math_mode_name(plan.rate.mode),
                              percent(p.mfu), planner::math_mode_name(plan.rate.mode))});
  s.fields.push_back(
      {"compute rate",
       fmt::format("{} matmuls: peak {} ({}), achievable {} ({})", planner::math_mode_name(plan.rate.mode),
                   format_flops(plan.rate.peak_flops), plan.rate.peak_basis, format_flops(plan.rate.achievable_flops),
                   plan.rate.achievable_basis)});
  s.fields.push_back(
      {"bottleneck",
       Cell(plan.bottleneck, plan.step.bottleneck == Resource::kCompute ? Emphasis::kGood : Emphasis::kWarn)});
  return s;
}

reports::Table plan_csv(const nlohmann::json& record) {
  // Flatten the record: one row per leaf, dotted paths, base units.
  reports::Table table;
  table.columns = {{"field"}, {"value"}};
  const auto walk = [&table](const auto& self, const nlohmann::json& value, const std::string& path) -> void {
    if (value.is_object()) {
      for (const auto& [key, child] : value.items()) self(self, child, path.empty() ? key : path + "." + key);
    } else if (value.is_array()) {
      for (std::size_t i = 0; i < value.size(); ++i) self(self, value[i], fmt::format("{}.{}", path, i));
    } else {
      table.rows.push_back({path, value.is_string() ? value.get<std::string>() : value.dump()});
    }
  };
  walk(walk, record, "");
  return table;
}

}  // namespace

std::vector<std::string> headroom_warnings(const planner::Plan& plan) {
  std::vector<std::string> out;
  if (!plan.feasible) return out;
  for (Tier tier : spec::kAllTiers) {
    const planner::TierUsage& usage = plan.footprint.tier(tier);
    if (usage.capacity_bytes <= 0 || usage.used_bytes <= 0 || usage.fraction() <= 1.0 - kMinHeadroom) continue;
    out.push_back(fmt::format(
        "{}: {} of {} {} used, under {} headroom; fragmentation and buffers the plan does not model may not fit (a "
        "smaller --micro-batch, more --tiling or a lower tier for one state leaves room)",
        spec::tier_name(tier), percent(usage.fraction()), format_bytes(usage.capacity_bytes),
        tier == Tier::kDevice ? "per GPU" : "per node", percent(kMinHeadroom)));
  }
  return out;
}

Rendered render_plan(const planner::Plan& plan, bool hardware_defaulted, const reports::ConditionsSnapshot& started) {
  Rendered out;
  out.record = reports::make_record_envelope("plan", planner::kPlanRecordVersion, started);
  planner::append_plan(plan, out.record);
  // The record names each change by its planner field; the CLI adds the flag and the command line.
  for (std::size_t i = 0; i < plan.suggestions.size(); ++i) {
    nlohmann::json& suggestion = out.record["suggestions"][i];
    for (nlohmann::json& change : suggestion["changes"])
      change["flag"] = plan_flag_for(change["field"].get<std::string>());
    suggestion["command_line"] = suggestion_command_line(plan.suggestions[i]);
  }
  out.csv = plan_csv(out.record);

  reports::Document& doc = out.document;
  doc.title = fmt::format("zinf plan: {} parameters on {}", format_count(static_cast<double>(plan.parameters.total)),
                          hardware_line(plan.input.hardware));
  Section verdict{"Verdict", {}, {}, {}, {}};
  verdict.fields.push_back({"hardware", fmt::format("{}{}", plan.input.hardware.name,
                                                    hardware_defaulted ? " (default; choose with --hw)" : "")});
  verdict.fields.push_back({"strategy", std::string(planner::strategy_title(plan.input.strategy))});
  verdict.fields.push_back({"family", plan.family});
  if (plan.feasible) {
    std::string placed;
    for (StateKind kind : spec::kAllStateKinds) {
      placed += fmt::format("{}{} on {}", placed.empty() ? "" : ", ", spec::state_kind_title(kind),
                            spec::tier_name(plan.placement[kind]));
    }
    const std::vector<std::string> tight = headroom_warnings(plan);
    verdict.fields.push_back(
        {"fits", tight.empty() ? Cell("yes", Emphasis::kGood) : Cell("yes, with little headroom", Emphasis::kWarn)});
    for (const std::string& warning : tight) verdict.fields.push_back({"warning", Cell(warning, Emphasis::kWarn)});
    out.record["warnings"] = tight;
    verdict.fields.push_back({"placement", placed});
    verdict.fields.push_back({"step time", Cell(format_duration(plan.prediction.step_seconds), Emphasis::kStrong)});
  } else {
    verdict.fields.push_back({"fits", Cell("no (infeasible)", Emphasis::kBad)});
    verdict.fields.push_back({"why", Cell(plan.bottleneck, Emphasis::kBad)});
  }
  doc.sections.push_back(std::move(verdict));
  doc.sections.push_back(model_section(plan));
  doc.sections.push_back(states_section(plan));
  doc.sections.push_back(tiers_section(plan));
  if (plan.feasible) {
    doc.sections.push_back(bandwidth_section(plan));
    doc.sections.push_back(links_section(plan));
    doc.sections.push_back(schedule_section(plan));
    doc.sections.push_back(prediction_section(plan));
  } else {
    Section fixes{"What would make it fit", {}, {}, {}, {}};
    if (plan.suggestions.empty()) {
      fixes.notes.push_back(
          "no change among --nodes, --tiling, --micro-batch, --ckpt-interval, --nvme or --cpu-mem "
          "(nor tiling with more nodes) makes this fit; try another --strategy or a smaller model");
    } else {
      fixes.table.columns = {{"change"}, {"why"}};
      for (const planner::Suggestion& s : plan.suggestions) {
        fixes.table.rows.push_back({Cell(suggestion_command_line(s), Emphasis::kStrong), s.why});
      }
    }
    doc.sections.push_back(std::move(fixes));
  }
  if (!plan.notes.empty()) doc.sections.push_back({"Notes", {}, {}, plan.notes, {}});
  return out;
}

Rendered render_max_params(const planner::PlanInput& base, const std::vector<planner::MaxParamsResult>& results,
                           const reports::ConditionsSnapshot& started) {
  Rendered out;
  out.record = reports::make_record_envelope("max-params", planner::kPlanRecordVersion, started);
  planner::append_max_params(base, results, out.record);

  reports::Document& doc = out.document;
  doc.title = fmt::format("zinf plan --max-params: largest model per strategy on {}", hardware_line(base.hardware));
  Section s{"Largest trainable model", {}, {}, {}, {}};
  s.fields.push_back(
      {"training", fmt::format("seq {}, micro-batch {} per GPU, checkpoint every {} layer(s), tiling {}, {} B/param",
                               base.training.seq, base.training.micro_batch, base.training.ckpt_interval,
                               base.training.tiling, spec::state_bytes_per_param(base.training.accounting).total())});
  s.table.columns = {
      {"strategy"},   {"max params", Align::kRight}, {"shape (layers x hidden)"},   {"params/grads/optim/ckpt on"},
      {"limited by"}, {"step", Align::kRight},       {"TFLOP/s/GPU", Align::kRight}};
  out.csv.columns = {{"strategy"},
                     {"max_params"},
                     {"at_search_limit"},
                     {"layers"},
                     {"hidden"},
                     {"heads"},
                     {"params_tier"},
                     {"grads_tier"},
                     {"optimizer_tier"},
                     {"activations_tier"},
                     {"limit"},
                     {"step_seconds"},
                     {"achieved_flops_per_gpu"}};
  for (const planner::MaxParamsResult& r : results) {
    const bool any = r.max_params > 0;
    const std::string size =
        !any ? "none"
             : fmt::format("{}{}", r.at_search_limit ? ">= " : "", format_count(static_cast<double>(r.max_params)));
    s.table.rows.push_back(
        {std::string(planner::strategy_title(r.strategy)), Cell(size, Emphasis::kStrong),
         any ? fmt::format("{} x {}", r.shape.layers, r.shape.hidden) : "-", any ? placement_short(r.placement) : "-",
         r.at_search_limit ? "search limit (1e16)" : r.limit, any ? format_duration(r.prediction.step_seconds) : "-",
         any ? fmt::format("{:.1f}", r.prediction.achieved_flops_per_gpu / 1e12) : "-"});
    out.csv.rows.push_back({std::string(planner::strategy_name(r.strategy)), std::to_string(r.max_params),
                            r.at_search_limit ? "true" : "false", std::to_string(any ? r.shape.layers : 0),
                            std::to_string(any ? r.shape.hidden : 0), std::to_string(any ? r.shape.heads : 0),
                            any ? std::string(spec::tier_name(r.placement[StateKind::kParams])) : "",
                            any ? std::string(spec::tier_name(r.placement[StateKind::kGrads])) : "",
                            any ? std::string(spec::tier_name(r.placement[StateKind::kOptimizer])) : "",
                            any ? std::string(spec::tier_name(r.placement[StateKind::kActivations])) : "", r.limit,
                            any ? fmt::format("{:.6g}", r.prediction.step_seconds) : "",
                            any ? fmt::format("{:.6g}", r.prediction.achieved_flops_per_gpu) : ""});
  }
  s.notes.push_back(
      "shapes follow the --params shape rule (head_dim 128, hidden/layers near 128); 'limited by' is the tier "
      "that overflows first at the next size up");
  doc.sections.push_back(std::move(s));
  return out;
}

namespace {

// When only the node count is swept and every point fits: whether TFLOP/s per GPU rises with it, and why.
std::optional<std::string> node_scaling_note(const std::vector<planner::SweepDimension>& dimensions,
                                             const std::vector<planner::SweepPoint>& points) {
  if (dimensions.size() != 1 || dimensions.front().key != planner::SweepKey::kNodes || points.size() < 2) {
    return std::nullopt;
  }
  bool rising = true;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!points[i].feasible) return std::nullopt;
    if (i > 0 && points[i].prediction.achieved_flops_per_gpu < points[i - 1].prediction.achieved_flops_per_gpu) {
      rising = false;
    }
  }
  const planner::SweepPoint& first = points.front();
  const planner::SweepPoint& last = points.back();
  const double gain = last.prediction.achieved_flops_per_gpu / first.prediction.achieved_flops_per_gpu;
  if (!rising || gain <= 1.0 + 1e-9) {
    return fmt::format(
        "TFLOP/s per GPU does not rise with the node count here ({:.1f} -> {:.1f}): the step is "
        "limited by what every GPU does alike (compute, or collectives whose ring moves the same "
        "bytes per GPU at any size)",
        first.prediction.achieved_flops_per_gpu / 1e12, last.prediction.achieved_flops_per_gpu / 1e12);
  }
  return fmt::format(
      "TFLOP/s per GPU rises with the node count ({:.1f} -> {:.1f}, {:.2f}x from {} to {} GPUs; the paper measured "
      "super-linear scaling of a 1T model from 64 to 512 GPUs): with bandwidth-centric partitioning each rank moves "
      "only its 1/N slice of the offloaded states over its own PCIe link and its node's drives and CPU memory, so "
      "the aggregate offload bandwidth grows with N while the compute per GPU (same micro-batch) stays fixed; the "
      "offload phases shrink until compute or the collectives, which move the same bytes per GPU at any size, "
      "dominate{}",
      first.prediction.achieved_flops_per_gpu / 1e12, last.prediction.achieved_flops_per_gpu / 1e12, gain,
      first.input.hardware.total_gpus(), last.input.hardware.total_gpus(),
      first.placement == last.placement ? std::string()
                                        : "; the more nodes, the more aggregate CPU memory, so states also move from "
                                          "NVMe up to CPU memory");
}

}  // namespace

Rendered render_sweep(const std::vector<planner::SweepDimension>& dimensions,
                      const std::vector<planner::SweepPoint>& points, const reports::ConditionsSnapshot& started) {
  Rendered out;
  out.record = reports::make_record_envelope("plan-sweep", planner::kPlanRecordVersion, started);
  planner::append_sweep(dimensions, points, out.record);

  std::string dims;
  for (const auto& d : dimensions)
    dims += fmt::format("{}{} ({})", dims.empty() ? "" : " x ", planner::sweep_key_name(d.key), d.values.size());
  reports::Document& doc = out.document;
  doc.title = fmt::format("zinf plan sweep: {} = {} plans on {}", dims, points.size(),
                          points.empty() ? std::string("-") : points.front().input.hardware.name);
  Section s{"Plans", {}, {}, {}, {}};
  s.table.columns = {{"params", Align::kRight},
                     {"layers x hidden"},
                     {"nodes", Align::kRight},
                     {"GPUs", Align::kRight},
                     {"bsz", Align::kRight},
                     {"seq", Align::kRight},
                     {"fits"},
                     {"p/g/o/a on"},
                     {"step", Align::kRight},
                     {"tokens/s", Align::kRight},
                     {"TFLOP/s/GPU", Align::kRight},
                     {"MFU", Align::kRight},
                     {"zinf vs DeepSpeed", Align::kRight},
                     {"bottleneck"}};
  out.csv.columns = {{"params"},
                     {"layers"},
                     {"hidden"},
                     {"heads"},
                     {"nodes"},
                     {"gpus_per_node"},
                     {"micro_batch"},
                     {"seq"},
                     {"tiling"},
                     {"ckpt_interval"},
                     {"feasible"},
                     {"params_tier"},
                     {"grads_tier"},
                     {"optimizer_tier"},
                     {"activations_tier"},
                     {"step_seconds"},
                     {"tokens_per_second"},
                     {"achieved_flops_per_gpu"},
                     {"mfu"},
                     {"efficiency"},
                     {"step_seconds_other_schedule"},
                     {"zinf_speedup_over_deepspeed"},
                     {"bottleneck"}};
  // deepspeed step / zinf step, whichever schedule the sweep predicts.
  const auto zinf_speedup = [](const planner::SweepPoint& p) {
    const double step = p.prediction.step_seconds, other = p.prediction.step_seconds_other_schedule;
    return p.input.schedule == planner::Schedule::kZinf ? other / step : step / other;
  };
  for (const planner::SweepPoint& p : points) {
    const spec::ModelShape& shape = p.input.shape;
    const std::uint64_t params = spec::count_parameters(shape).total;
    const auto& hw = p.input.hardware;
    const auto& t = p.input.training;
    s.table.rows.push_back(
        {format_count(static_cast<double>(params)), fmt::format("{} x {}", shape.layers, shape.hidden),
         std::to_string(hw.nodes), std::to_string(hw.total_gpus()), std::to_string(t.micro_batch),
         std::to_string(t.seq), Cell(p.feasible ? "yes" : "no", p.feasible ? Emphasis::kGood : Emphasis::kBad),
         p.feasible ? placement_short(p.placement) : "-", p.feasible ? format_duration(p.prediction.step_seconds) : "-",
         p.feasible ? format_count(p.prediction.tokens_per_second) : "-",
         p.feasible ? fmt::format("{:.1f}", p.prediction.achieved_flops_per_gpu / 1e12) : "-",
         p.feasible ? percent(p.prediction.mfu) : "-", p.feasible ? fmt::format("{:.2f}x", zinf_speedup(p)) : "-",
         p.feasible ? std::string(planner::resource_name(p.bottleneck))
                    : fmt::format("needs {:.3g}x memory", p.worst_fraction)});
    const auto tier = [&](StateKind k) {
      return p.feasible ? std::string(spec::tier_name(p.placement[k])) : std::string();
    };
    const auto number = [&](double v) { return p.feasible ? fmt::format("{:.6g}", v) : std::string(); };
    out.csv.rows.push_back({std::to_string(params),
                            std::to_string(shape.layers),
                            std::to_string(shape.hidden),
                            std::to_string(shape.heads),
                            std::to_string(hw.nodes),
                            std::to_string(hw.node.gpus),
                            std::to_string(t.micro_batch),
                            std::to_string(t.seq),
                            std::to_string(t.tiling),
                            std::to_string(t.ckpt_interval),
                            p.feasible ? "true" : "false",
                            tier(StateKind::kParams),
                            tier(StateKind::kGrads),
                            tier(StateKind::kOptimizer),
                            tier(StateKind::kActivations),
                            number(p.prediction.step_seconds),
                            number(p.prediction.tokens_per_second),
                            number(p.prediction.achieved_flops_per_gpu),
                            number(p.prediction.mfu),
                            number(p.prediction.efficiency),
                            number(p.prediction.step_seconds_other_schedule),
                            p.feasible ? fmt::format("{:.6g}", zinf_speedup(p)) : std::string(),
                            p.feasible ? std::string(planner::resource_name(p.bottleneck)) : std::string()});
  }
  if (!points.empty()) {
    s.notes.push_back(fmt::format(
        "step times follow {}'s schedule (--schedule); \"zinf vs DeepSpeed\" is DeepSpeed's step over zinf's for the "
        "same placement: zinf reads, steps and writes each optimizer sub-group during the backward pass, DeepSpeed "
        "after it",
        planner::schedule_name(points.front().input.schedule)));
  }
  if (const std::optional<std::string> why = node_scaling_note(dimensions, points)) s.notes.push_back(*why);
  doc.sections.push_back(std::move(s));
  return out;
}

}  // namespace zinf::cli
