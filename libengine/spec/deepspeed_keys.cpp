#include "libengine/spec/deepspeed_keys.h"

#include <fmt/format.h>

namespace zinf::spec {
namespace {

// Built by reading DeepSpeed's config classes at kDeepSpeedSourceCommit:
//  - deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig: eight fields declared as
//    Field(..., alias="stage3_...") under model_config populate_by_name=True
//    (runtime/config_utils.py), so the field name and the stage3_ alias are both accepted;
//    three deprecated fields (json_schema_extra {"deprecated": True, "new_param": ...}):
//    stage3_gather_fp16_weights_on_model_save, cpu_offload, cpu_offload_param, and
//    cpu_offload_use_pin_memory (set_new_param False: no effect).
//  - deepspeed/runtime/constants.py BFLOAT16_OLD = "bfloat16" ("keeping for backwards
//    compatibility"), read by runtime/config.py get_bfloat16_enabled after "bf16".
//  - deepspeed/runtime/zero/offload_config.py: no alias, no deprecated field.
// A DeepSpeed upgrade that adds a name adds a row here; the table in docs/deepspeed.md is tested against it.
const std::vector<DsKeyAlias> kAliases{
    {"zero_optimization", "max_live_parameters", "stage3_max_live_parameters", "alias",
     "the live-parameter bound (zero.max_live_bytes)"},
    {"zero_optimization", "prefetch_bucket_size", "stage3_prefetch_bucket_size", "alias",
     "the prefetch bucket (`auto`: 0.9 x hidden^2)"},
    {"zero_optimization", "param_persistence_threshold", "stage3_param_persistence_threshold", "alias",
     "zero.persistence_threshold (`auto`: 10 x hidden)"},
    {"zero_optimization", "model_persistence_threshold", "stage3_model_persistence_threshold", "alias",
     "known, not used"},
    {"zero_optimization", "max_reuse_distance", "stage3_max_reuse_distance", "alias", "known, not used"},
    {"zero_optimization", "gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save", "alias",
     "known, not used"},
    {"zero_optimization", "module_granularity_threshold", "stage3_module_granularity_threshold", "alias",
     "known, not used"},
    {"zero_optimization", "use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params", "alias",
     "known, not used"},
    {"zero_optimization", "stage3_gather_fp16_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
     "deprecated", "known, not used"},
    {"zero_optimization", "cpu_offload", "offload_optimizer", "deprecated", "`true`: offload_optimizer.device `cpu`"},
    {"zero_optimization", "cpu_offload_param", "offload_param", "deprecated", "`true`: offload_param.device `cpu`"},
    {"zero_optimization", "cpu_offload_use_pin_memory", "", "deprecated",
     "known, not used (DeepSpeed ignores it too: set_new_param False)"},
    {"", "bfloat16", "bf16", "legacy", "the `bf16` section: `enabled` sets the precision"},
};

}  // namespace

const std::vector<DsKeyAlias>& deepspeed_key_aliases() { return kAliases; }

std::string DeepSpeedConfig::key(std::string_view canonical) const {
  for (const auto& [name, written] : written_as) {
    if (name == canonical) return written;
    // A key inside a renamed section: "bf16.enabled" written as "bfloat16.enabled".
    if (canonical.size() > name.size() && canonical.substr(0, name.size()) == name && canonical[name.size()] == '.') {
      return written + std::string(canonical.substr(name.size()));
    }
  }
  return std::string(canonical);
}

std::vector<const DsKeyAlias*> aliases_in(std::string_view section) {
  std::vector<const DsKeyAlias*> out;
  for (const DsKeyAlias& alias : kAliases) {
    if (alias.section == section) out.push_back(&alias);
  }
  return out;
}

std::string_view written_name(const JsonObject& object, std::string_view section, std::string_view canonical) {
  for (const DsKeyAlias* alias : aliases_in(section)) {
    if (alias->canonical == canonical && object.has(alias->name)) return alias->name;
  }
  return canonical;
}

Status check_aliases(const JsonObject& object, std::string_view section,
                     std::vector<std::pair<std::string, std::string>>& written_as) {
  const auto dotted = [&](std::string_view key) {
    return section.empty() ? std::string(key) : fmt::format("{}.{}", section, key);
  };
  const std::vector<const DsKeyAlias*> aliases = aliases_in(section);
  for (const DsKeyAlias* alias : aliases) {
    if (!object.has(alias->name) || alias->canonical.empty()) continue;
    // The canonical name, or another alias of the same setting, written as well.
    std::string_view other;
    if (object.has(alias->canonical)) other = alias->canonical;
    for (const DsKeyAlias* sibling : aliases) {
      if (other.empty() && sibling != alias && sibling->canonical == alias->canonical && object.has(sibling->name)) {
        other = sibling->name;
      }
    }
    if (!other.empty()) {
      return Status::invalid_argument(
          fmt::format("{}: {} names the same DeepSpeed setting as {} ({} name); give one of them",
                      object.field_path(alias->name), alias->name, object.field_path(other), alias->kind));
    }
    // cpu_offload / cpu_offload_param stand for a whole section's device: the parser names them itself.
    if (alias->canonical.rfind("offload_", 0) != 0)
      written_as.emplace_back(dotted(alias->canonical), dotted(alias->name));
  }
  return Status::ok();
}

}  // namespace zinf::spec
