#include "libengine/spec/zero_config.h"

#include <fmt/format.h>

#include <string_view>

#include "libengine/core/units.h"

namespace zinf::spec {
namespace {

const std::vector<std::string_view> kZeroKeys{"stage",
                                              "params",
                                              "grads",
                                              "optimizer",
                                              "nvme_paths",
                                              "host_memory",
                                              "prefetch_bytes",
                                              "max_live_bytes",
                                              "persistence_threshold",
                                              "overlap_optimizer",
                                              "reduce_bucket_bytes",
                                              "sub_group_size",
                                              "activations"};

std::string_view tier_word(Tier tier) { return tier == Tier::kDevice ? "device" : tier_name(tier); }

std::string shown(const nlohmann::json& value) {
  std::string dumped = value.dump();
  if (dumped.size() > 40) dumped = dumped.substr(0, 37) + "...";
  return fmt::format("{} ({})", dumped, value.type_name());
}

bool given(const JsonObject& object, std::string_view key) {
  return object.has(key) && !object.raw().at(key).is_null();
}

Result<Tier> tier_field(const JsonObject& zero, std::string_view key, Tier fallback, bool nvme_allowed) {
  if (!given(zero, key)) return fallback;
  const nlohmann::json& value = zero.raw().at(key);
  const std::string_view allowed = nvme_allowed ? "\"device\", \"cpu\" or \"nvme\"" : "\"device\" or \"cpu\"";
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "device") return Tier::kDevice;
    if (text == "cpu") return Tier::kCpu;
    if (text == "nvme" && nvme_allowed) return Tier::kNvme;
    if (text == "nvme") {
      return Status::invalid_argument(fmt::format(
          "{}: \"nvme\" is not supported for gradients (allowed: {}); gradients live where the optimizer steps",
          zero.field_path(key), allowed));
    }
  }
  return Status::invalid_argument(
      fmt::format("{}: expected {}, found {}", zero.field_path(key), allowed, shown(value)));
}

// A count of elements in 0..2^40 (`zero_means`: what 0 stands for, for the error line).
Result<std::int64_t> element_count_field(const JsonObject& zero, std::string_view key, std::string_view zero_means) {
  const nlohmann::json& value = zero.raw().at(key);
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<std::int64_t>() < 0) ||
      (value.is_number_unsigned() && value.get<std::uint64_t>() > (std::uint64_t{1} << 40))) {
    return Status::invalid_argument(fmt::format("{}: expected a number of elements in 0..2^40 (0: {}), found {}",
                                                zero.field_path(key), zero_means, shown(value)));
  }
  return value.get<std::int64_t>();
}

// A byte budget of the zero section, at most kMaxZeroBudgetBytes (a larger one would wrap the
// derived prefetch_bytes, 2 x max_live_bytes, and the budget sums to a small number). 0 is the
// same as leaving the field out (scenarios/README.md): `zero_means` says what that is, in errors.
Result<std::uint64_t> budget_field(const JsonObject& zero, std::string_view key, std::string_view zero_means) {
  Result<std::uint64_t> bytes = zero.bytes(key, true);
  if (!bytes.is_ok()) {
    return Status(bytes.status().code(),
                  fmt::format("{}; 0 or leaving it out: {}", bytes.status().message(), zero_means));
  }
  if (*bytes > kMaxZeroBudgetBytes) {
    return Status::invalid_argument(
        fmt::format("{}: {} bytes ({}) is above the limit of 2^60 bytes ({}); zinf derives prefetch_bytes as 2 x "
                    "max_live_bytes and adds budgets in 64 bits",
                    zero.field_path(key), *bytes, format_bytes(static_cast<double>(*bytes)),
                    format_bytes(static_cast<double>(kMaxZeroBudgetBytes))));
  }
  return *bytes;
}

}  // namespace

StatePlacement ZeroConfig::placement() const {
  StatePlacement placement;
  placement[StateKind::kParams] = params;
  placement[StateKind::kGrads] = grads;
  placement[StateKind::kOptimizer] = optimizer;
  placement[StateKind::kActivations] = activations;
  return placement;
}

Result<ZeroConfig> parse_zero_config(const JsonObject& zero) {
  ZINF_RETURN_IF_ERROR(zero.reject_unknown_keys(kZeroKeys));
  ZeroConfig out;
  out.stage = 3;  // a "zero" section without a stage asks for the partitioned engine
  if (given(zero, "stage")) {
    const nlohmann::json& value = zero.raw().at("stage");
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > 3) {
      return Status::invalid_argument(
          fmt::format("{}: expected 0, 1, 2 or 3, found {}", zero.field_path("stage"), shown(value)));
    }
    out.stage = static_cast<int>(value.get<std::int64_t>());
  }
  ZINF_ASSIGN_OR_RETURN(out.params, tier_field(zero, "params", Tier::kDevice, true));
  ZINF_ASSIGN_OR_RETURN(out.optimizer, tier_field(zero, "optimizer", Tier::kDevice, true));
  const Tier natural_grads = out.optimizer == Tier::kDevice ? Tier::kDevice : Tier::kCpu;
  ZINF_ASSIGN_OR_RETURN(out.grads, tier_field(zero, "grads", natural_grads, false));
  if (out.grads != natural_grads) {
    return Status::invalid_argument(fmt::format(
        "{}: \"{}\" with optimizer on \"{}\" is not supported; gradients live where the optimizer steps: \"{}\"",
        zero.field_path("grads"), tier_word(out.grads), tier_word(out.optimizer), tier_word(natural_grads)));
  }
  if (out.stage == 0 && (out.params != Tier::kDevice || out.optimizer != Tier::kDevice)) {
    return Status::invalid_argument(
        fmt::format("{}: 0 keeps every state replicated on the device; offloading needs stage 1 or 2 (optimizer) or 3 "
                    "(parameters too)",
                    zero.field_path("stage")));
  }
  if (out.params != Tier::kDevice && out.stage != 3) {
    return Status::invalid_argument(
        fmt::format("{}: \"{}\" needs zero.stage 3 (found {}): only stage 3 partitions "
                    "parameters",
                    zero.field_path("params"), tier_word(out.params), out.stage));
  }
  if (out.params != Tier::kDevice && out.optimizer == Tier::kDevice) {
    return Status::invalid_argument(fmt::format(
        "{}: \"{}\" with optimizer on \"device\" is not supported; offload the optimizer too (\"cpu\" or \"nvme\")",
        zero.field_path("params"), tier_word(out.params)));
  }
  if (given(zero, "nvme_paths")) {
    const nlohmann::json& value = zero.raw().at("nvme_paths");
    if (!value.is_array() || value.empty()) {
      return Status::invalid_argument(fmt::format("{}: expected a non-empty list of directories, found {}",
                                                  zero.field_path("nvme_paths"), shown(value)));
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (!value[i].is_string() || value[i].get<std::string>().empty()) {
        return Status::invalid_argument(fmt::format("{}[{}]: expected a directory path, found {}",
                                                    zero.field_path("nvme_paths"), i, shown(value[i])));
      }
      out.nvme_paths.push_back(value[i].get<std::string>());
    }
  }
  if (out.uses_nvme() && out.nvme_paths.empty()) {
    return Status::invalid_argument(fmt::format(
        "{}: required when a state is on \"nvme\" (params or optimizer); give the directories for the swap files",
        zero.field_path("nvme_paths")));
  }
  if (!out.uses_nvme() && !out.nvme_paths.empty()) {
    return Status::invalid_argument(
        fmt::format("{}: given, but no state is on \"nvme\"; set params or optimizer to "
                    "\"nvme\" or remove nvme_paths",
                    zero.field_path("nvme_paths")));
  }
  if (given(zero, "host_memory")) {
    ZINF_ASSIGN_OR_RETURN(out.host_memory_bytes, budget_field(zero, "host_memory", "no budget"));
  }
  if (given(zero, "prefetch_bytes")) {
    ZINF_ASSIGN_OR_RETURN(out.prefetch_bytes, budget_field(zero, "prefetch_bytes", "derived"));
  }
  if (given(zero, "max_live_bytes")) {
    ZINF_ASSIGN_OR_RETURN(out.max_live_bytes, budget_field(zero, "max_live_bytes", "derived"));
  }
  if (given(zero, "reduce_bucket_bytes")) {
    ZINF_ASSIGN_OR_RETURN(out.reduce_bucket_bytes, budget_field(zero, "reduce_bucket_bytes", "derived"));
  }
  if (given(zero, "persistence_threshold")) {
    ZINF_ASSIGN_OR_RETURN(out.persistence_threshold,
                          element_count_field(zero, "persistence_threshold", "no parameter stays resident"));
  }
  if (given(zero, "sub_group_size")) {
    ZINF_ASSIGN_OR_RETURN(out.sub_group_size, element_count_field(zero, "sub_group_size", "derived"));
  }
  ZINF_ASSIGN_OR_RETURN(const std::optional<bool> overlap, zero.optional_bool("overlap_optimizer"));
  if (overlap) out.overlap_optimizer = *overlap;
  if (given(zero, "activations")) {
    const nlohmann::json& value = zero.raw().at("activations");
    const std::string text = value.is_string() ? value.get<std::string>() : std::string();
    if (text != "device" && text != "cpu") {
      return Status::invalid_argument(
          fmt::format("{}: expected \"device\" or \"cpu\" (where activation checkpoints live), found {}",
                      zero.field_path("activations"), shown(value)));
    }
    out.activations = text == "cpu" ? Tier::kCpu : Tier::kDevice;
  }
  return out;
}

nlohmann::json to_json(const ZeroConfig& config) {
  nlohmann::json out{{"stage", config.stage},
                     {"params", tier_word(config.params)},
                     {"grads", tier_word(config.grads)},
                     {"optimizer", tier_word(config.optimizer)},
                     {"host_memory", config.host_memory_bytes},
                     {"prefetch_bytes", config.prefetch_bytes},
                     {"max_live_bytes", config.max_live_bytes},
                     {"reduce_bucket_bytes", config.reduce_bucket_bytes},
                     {"persistence_threshold", config.persistence_threshold},
                     {"sub_group_size", config.sub_group_size},
                     {"overlap_optimizer", config.overlap_optimizer},
                     {"activations", tier_word(config.activations)}};
  if (!config.nvme_paths.empty()) out["nvme_paths"] = config.nvme_paths;
  return out;
}

}  // namespace zinf::spec
