#include "apps/zinf/plan_deepspeed.h"

#include <fmt/format.h>

#include "apps/zinf/plan_flags.h"

namespace zinf::cli {
namespace {

using reports::Cell;
using reports::Emphasis;
using reports::Section;

// DeepSpeed's documented default nvme_path; used when the plan puts a state on NVMe.
constexpr std::string_view kDefaultNvmePath = "/local_nvme";

std::string tier_word(spec::Tier tier) {
  return tier == spec::Tier::kDevice ? "GPU" : std::string(spec::tier_name(tier));
}

}  // namespace

Result<spec::ResolvedDeepSpeed> apply_ds_config(const std::string& path, const DsPlanFlags& flags,
                                                planner::PlanInput& input) {
  Result<spec::DeepSpeedConfig> config = spec::load_deepspeed_config(path);
  if (!config.is_ok()) return config.status().with_context("--ds-config");
  spec::DsAutoSources sources;
  sources.hidden = input.shape.hidden;
  sources.world_size = input.hardware.total_gpus();
  sources.micro_batch = flags.micro_batch;
  sources.default_micro_batch = 1;  // zinf plan's default micro-batch
  sources.precision = flags.precision;
  sources.micro_batch_name = flags.micro_batch ? "--micro-batch" : "--micro-batch (default 1)";
  sources.precision_name = "--precision";
  sources.optimizer_name = "Hugging Face TrainingArguments default";
  sources.grad_clip_name = "Hugging Face TrainingArguments max_grad_norm default";
  Result<spec::ResolvedDeepSpeed> resolved = spec::resolve_deepspeed(*config, sources, "ds_config");
  if (!resolved.is_ok()) return resolved.status().with_context(path).with_context("--ds-config");
  planner::apply_deepspeed(*resolved, input);
  if (flags.ckpt_interval && resolved->config.number_checkpoints &&
      *flags.ckpt_interval != input.training.ckpt_interval) {
    return Status::invalid_argument(fmt::format(
        "--ds-config: {}: ds_config.activation_checkpointing.number_checkpoints {} means a checkpoint every {} "
        "layers, but --ckpt-interval is {}; drop one",
        path, *resolved->config.number_checkpoints, input.training.ckpt_interval, *flags.ckpt_interval));
  }
  if (!flags.accounting_given) {
    input.training.accounting =
        input.training.precision == DType::kF32 ? spec::StateAccounting::kFp32 : spec::StateAccounting::kPaper;
  }
  ZINF_RETURN_IF_ERROR(spec::check_accounting(input.training, plan_flag_for("training.accounting"),
                                              fmt::format("--ds-config {} precision", path)));
  return resolved;
}

std::string ds_plan_flag_for(std::string_view field) {
  if (field == planner::field::kPlacement) return "--ds-config (its offload devices)";
  if (field == planner::field::kStrategy) return "ZeRO stage family";
  return plan_flag_for(field);
}

void add_deepspeed_view(const std::string& path, const spec::ResolvedDeepSpeed& resolved,
                        const std::vector<planner::DsFinding>& findings, spec::Tier planned_grads, Rendered& out) {
  nlohmann::json record = planner::deepspeed_to_json(resolved, findings);
  record["source"] = path;
  out.record["deepspeed"] = std::move(record);

  const spec::DeepSpeedConfig& c = resolved.config;
  Section section;
  section.title = fmt::format("DeepSpeed config ({})", path);
  section.fields.push_back({"ZeRO stage", std::to_string(c.stage)});
  const bool grads_open = resolved.optimizer_tier() == spec::Tier::kNvme;
  const std::string grads =
      grads_open ? fmt::format("{} (the plan's choice: the config leaves it open with the optimizer on NVMe)",
                               tier_word(planned_grads))
                 : std::string(tier_word(resolved.grads_tier()));
  section.fields.push_back(
      {"offload", fmt::format("parameters: {}, optimizer: {}, gradients: {}, activation "
                              "checkpoints: {}",
                              tier_word(resolved.params_tier()), tier_word(resolved.optimizer_tier()), grads,
                              tier_word(resolved.activations_tier()))});
  section.fields.push_back({"batch", fmt::format("{} per GPU x {} accumulation x world = {}", resolved.micro_batch,
                                                 resolved.grad_accumulation, resolved.train_batch)});
  section.fields.push_back({"precision", std::string(dtype_name(resolved.precision))});
  section.fields.push_back(
      {"optimizer", fmt::format("{} lr {:g}, betas [{:g}, {:g}], eps {:g}, weight decay {:g}, "
                                "clip {:g}",
                                c.optimizer_type.value_or("AdamW (Trainer default)"), resolved.lr, resolved.beta1,
                                resolved.beta2, resolved.eps, resolved.weight_decay, resolved.gradient_clipping)});
  if (c.stage == 3) {
    section.fields.push_back(
        {"stage 3 budgets",
         fmt::format("max live {} params, prefetch bucket {}, persistence threshold {}, sub-group {}",
                     resolved.max_live_parameters, resolved.prefetch_bucket_size, resolved.persistence_threshold,
                     resolved.sub_group_size)});
  }
  section.table.columns = {{"setting"}, {"value"}, {"why"}};
  for (const spec::DsResolution& r : resolved.resolutions) {
    section.table.rows.push_back({r.key, Cell(r.value, Emphasis::kStrong), fmt::format("\"auto\" <- {}", r.from)});
  }
  for (const planner::DsFinding& f : findings) {
    section.table.rows.push_back(
        {Cell(f.key, Emphasis::kBad), Cell(f.would_work, Emphasis::kGood), fmt::format("wrong here: {}", f.problem)});
  }
  if (section.table.rows.empty()) section.table.columns.clear();
  if (findings.empty()) section.notes.push_back("no setting in it is wrong for this hardware");
  if (!c.unused_keys.empty()) {
    std::string keys;
    for (const std::string& key : c.unused_keys) keys += fmt::format("{}{}", keys.empty() ? "" : ", ", key);
    section.notes.push_back(fmt::format("not used by zinf: {}", keys));
  }
  out.document.sections.insert(out.document.sections.begin() + 1, std::move(section));
}

Status emit_ds_config(const planner::Plan& plan, const std::string& path, const Io& io) {
  if (!plan.feasible) {
    return Status::infeasible(
        fmt::format("--emit-ds-config: the plan does not fit ({}); nothing written to {}", plan.bottleneck, path));
  }
  Result<nlohmann::json> config = planner::deepspeed_config_for(plan, std::string(kDefaultNvmePath));
  if (!config.is_ok()) return config.status().with_context("--emit-ds-config");
  ZINF_RETURN_IF_ERROR(write_output_file(path, config->dump(2) + "\n", "--emit-ds-config", io));
  announce_written(path, io);
  return Status::ok();
}

}  // namespace zinf::cli
