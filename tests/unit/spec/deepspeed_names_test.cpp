// DeepSpeed configs read as DeepSpeed reads them (issue 24 §4): every other name DeepSpeed's config
// classes accept for a key (deepspeed_key_aliases) is read as that key, and errors name it as
// written; a near miss gets a "did you mean"; "auto" precision follows the caller or, without one,
// zinf's documented rule; a caller's explicit batch or precision that the config contradicts is
// one error naming both; docs/deepspeed.md's alias table lists every row of the table.
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "libengine/spec/deepspeed_config.h"
#include "libengine/spec/json_input.h"
#include "libengine/spec/scenario.h"
#include "libengine/spec/scenario_deepspeed.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::spec {
namespace {

const std::string kDir = ZINF_FIXTURES_DIR "/deepspeed/";

Result<DeepSpeedConfig> parse(const std::string& text) {
  Result<nlohmann::json> document = parse_json_text(text, "t.json");
  REQUIRE(document.is_ok());
  return parse_deepspeed_config(*document, "ds_config");
}

DeepSpeedConfig parsed(const std::string& text) {
  Result<DeepSpeedConfig> config = parse(text);
  INFO(config.status().message());
  REQUIRE(config.is_ok());
  return std::move(config).value();
}

std::string parse_error(const std::string& text) {
  const Result<DeepSpeedConfig> config = parse(text);
  REQUIRE_FALSE(config.is_ok());
  return config.status().message();
}

Result<ResolvedDeepSpeed> resolved(const std::string& text, const DsAutoSources& sources) {
  return resolve_deepspeed(parsed(text), sources, "ds_config");
}

bool has_unused(const DeepSpeedConfig& c, const std::string& key) {
  return std::find(c.unused_keys.begin(), c.unused_keys.end(), "ds_config." + key) != c.unused_keys.end();
}

TEST_CASE("DeepSpeed's un-prefixed ZeRO-3 names are read as the stage3_ keys") {
  const DeepSpeedConfig c = parsed(R"({"zero_optimization": {"stage": 3,
      "max_live_parameters": 2e8, "prefetch_bucket_size": 3e7, "param_persistence_threshold": 5e4,
      "max_reuse_distance": 1e9, "gather_16bit_weights_on_model_save": true, "model_persistence_threshold": 1e6,
      "module_granularity_threshold": 0, "use_all_reduce_for_fetch_params": false}})");
  CHECK(c.max_live_parameters.value == 200'000'000);
  CHECK(c.prefetch_bucket_size.value == 30'000'000);
  CHECK(c.persistence_threshold.value == 50'000);
  CHECK(c.key("zero_optimization.stage3_max_live_parameters") == "zero_optimization.max_live_parameters");
  CHECK(c.key("zero_optimization.sub_group_size") == "zero_optimization.sub_group_size");
  CHECK(has_unused(c, "zero_optimization.max_reuse_distance"));
  CHECK_FALSE(has_unused(c, "zero_optimization.max_live_parameters"));
  // Errors name the key as the file wrote it.
  CHECK(parse_error(R"({"zero_optimization": {"stage": 3, "max_live_parameters": -1}})")
            .find("ds_config.zero_optimization.max_live_parameters: expected a whole number") == 0);
  // The axolotl config that was refused: un-prefixed names, max_live_parameters 0.
  Result<DeepSpeedConfig> axolotl = load_deepspeed_config(kDir + "axolotl_zero3_bf16.json");
  INFO(axolotl.status().message());
  REQUIRE(axolotl.is_ok());
  CHECK(axolotl->max_live_parameters.value == 0);
  CHECK(axolotl->prefetch_bucket_size.is_auto);
}

TEST_CASE("a setting written under two of its names is one error naming both") {
  CHECK(parse_error(R"({"zero_optimization": {"stage": 3, "max_live_parameters": 1, "stage3_max_live_parameters": 2}})")
            .find("ds_config.zero_optimization.max_live_parameters: max_live_parameters names the same DeepSpeed "
                  "setting as ds_config.zero_optimization.stage3_max_live_parameters") == 0);
  CHECK(parse_error(R"({"bf16": {"enabled": true}, "bfloat16": {"enabled": true}})").find("ds_config.bfloat16") == 0);
  // DeepSpeed asserts the same of a deprecated key and the key replacing it.
  CHECK(
      parse_error(R"({"zero_optimization": {"stage": 2, "cpu_offload": true, "offload_optimizer": {"device": "cpu"}}})")
          .find("ds_config.zero_optimization.cpu_offload: cpu_offload names the same DeepSpeed setting as "
                "ds_config.zero_optimization.offload_optimizer") == 0);
}

TEST_CASE("an unknown key near a DeepSpeed name gets the closest one") {
  CHECK(parse_error(R"({"zero_optimization": {"stage": 3, "stage3_max_live_param": 5}})")
            .find("ds_config.zero_optimization.stage3_max_live_param: unknown field (did you mean "
                  "'stage3_max_live_parameters'?)") == 0);
  CHECK(parse_error(R"({"zero_optimization": {"stage": 3, "max_live_parameter": 5}})")
            .find("(did you mean 'max_live_parameters'?)") != std::string::npos);
  CHECK(closest_match("lr", {"lr_schedule"}) == std::nullopt);
}

TEST_CASE("deprecated ZeRO names: cpu_offload and cpu_offload_param offload to CPU") {
  const DeepSpeedConfig c = parsed(R"({"zero_optimization": {"stage": 3, "cpu_offload": true,
      "cpu_offload_param": true, "cpu_offload_use_pin_memory": true, "stage3_gather_fp16_weights_on_model_save": true}})");
  CHECK(c.offload_optimizer.device == Tier::kCpu);
  CHECK(c.offload_param.device == Tier::kCpu);
  CHECK(c.offload_param.buffer_count == 5);  // DeepSpeed's defaults for the section it builds
  CHECK(has_unused(c, "zero_optimization.cpu_offload_use_pin_memory"));
  CHECK(parsed(R"({"zero_optimization": {"stage": 2, "cpu_offload": false}})").offload_optimizer.device ==
        Tier::kDevice);
  CHECK(parse_error(R"({"zero_optimization": {"stage": 2, "cpu_offload_param": true, "cpu_offload": true}})")
            .find("ds_config.zero_optimization.cpu_offload_param: offloading parameters needs stage 3") == 0);
  // The deprecated boolean section: true is stage 1.
  CHECK(parsed(R"({"zero_optimization": true})").stage == 1);
  // DeepSpeed's defaults of refused features leave them off.
  CHECK(parsed(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 1, "mics_shard_size": -1}})").stage ==
        3);
  CHECK(parse_error(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8}})")
            .find("zero_hpz_partition_size: 8 (number) is not supported") != std::string::npos);
}

TEST_CASE("the legacy bfloat16 section enables bf16") {
  const Result<ResolvedDeepSpeed> r = resolved(R"({"bfloat16": {"enabled": true}})", DsAutoSources{});
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  CHECK(r->precision == DType::kBF16);
  CHECK_FALSE(has_unused(r->config, "bfloat16"));
  DsAutoSources fp16;
  fp16.precision = DType::kF16;
  fp16.precision_name = "--precision";
  const Result<ResolvedDeepSpeed> clash = resolved(R"({"bfloat16": {"enabled": true}})", fp16);
  REQUIRE_FALSE(clash.is_ok());
  CHECK(clash.status().message().find("ds_config.bfloat16.enabled: the config trains in bf16") == 0);
  CHECK(clash.status().message().find("but the --precision is fp16") != std::string::npos);
}

TEST_CASE("auto precision: the caller's, else bf16 when bf16 is auto, else fp16, with its source") {
  const auto precision_of = [](const std::string& text, std::optional<DType> caller) {
    DsAutoSources sources;
    sources.precision = caller;
    const Result<ResolvedDeepSpeed> r = resolved(text, sources);
    INFO(r.status().message());
    REQUIRE(r.is_ok());
    return *r;
  };
  const std::string both = R"({"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}})";
  const ResolvedDeepSpeed none_given = precision_of(R"({"bf16": {"enabled": "auto"}})", std::nullopt);
  CHECK(none_given.precision == DType::kBF16);
  REQUIRE(none_given.resolutions.size() == 1);
  CHECK(none_given.resolutions[0].key == "bf16.enabled");
  CHECK(none_given.resolutions[0].value == "true");
  CHECK(none_given.resolutions[0].from.find("no precision given") == 0);
  CHECK(precision_of(both, std::nullopt).precision == DType::kBF16);
  CHECK(precision_of(R"({"fp16": {"enabled": "auto"}})", std::nullopt).precision == DType::kF16);
  CHECK(precision_of(both, DType::kF16).precision == DType::kF16);
  CHECK(precision_of(both, DType::kF32).precision == DType::kF32);
  // An explicit true wins over the other section's auto (LLaVA's zero3_offload.json).
  CHECK(precision_of(R"({"fp16": {"enabled": "auto"}, "bf16": {"enabled": true}})", std::nullopt).precision ==
        DType::kBF16);
  // The legacy section's auto, as the new one.
  CHECK(precision_of(R"({"bfloat16": {"enabled": "auto"}})", std::nullopt).precision == DType::kBF16);
}

TEST_CASE("fp16 and bf16 both written false is fp32, with or without a caller's fp32") {
  // The merged auto rule once sent this config to fp16 (no "auto" anywhere): found by the
  // DeepSpeed truth test, where DeepSpeed itself resolves it to fp32.
  const std::string off = R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})";
  const Result<ResolvedDeepSpeed> silent = resolved(off, DsAutoSources{});
  INFO(silent.status().message());
  REQUIRE(silent.is_ok());
  CHECK(silent->precision == DType::kF32);
  CHECK(silent->resolutions.empty());
  DsAutoSources fp32;
  fp32.precision = DType::kF32;
  const Result<ResolvedDeepSpeed> given = resolved(off, fp32);
  REQUIRE(given.is_ok());
  CHECK(given->precision == DType::kF32);
}

TEST_CASE("a config precision the caller contradicts is one error naming both") {
  DsAutoSources bf16;
  bf16.precision = DType::kBF16;
  bf16.precision_name = "scenario.precision";
  const Result<ResolvedDeepSpeed> off = resolved(R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})", bf16);
  REQUIRE_FALSE(off.is_ok());
  CHECK(off.status().message() ==
        "ds_config.bf16.enabled: the config trains in fp32 (fp16.enabled false, bf16.enabled false) but the "
        "scenario.precision is bf16; make them agree or write \"auto\"");
  // fp16 auto and no bf16 section: the config cannot train in bf16 (HF would run fp32).
  const Result<ResolvedDeepSpeed> no_bf16 = resolved(R"({"fp16": {"enabled": "auto"}})", bf16);
  REQUIRE_FALSE(no_bf16.is_ok());
  CHECK(no_bf16.status().message().find("bf16.enabled not given") != std::string::npos);
}

TEST_CASE("a train_batch_size the caller's micro-batch contradicts is one error naming both") {
  DsAutoSources scenario;
  scenario.micro_batch = 8;
  scenario.micro_batch_name = "scenario.batch";
  scenario.grad_accumulation = 1;
  scenario.grad_accumulation_name = "zinf train: one optimizer step per batch";
  const Result<ResolvedDeepSpeed> r = resolved(R"({"train_batch_size": 96})", scenario);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message() ==
        "ds_config.train_batch_size: 96 is not train_micro_batch_size_per_gpu 8 (scenario.batch) x "
        "gradient_accumulation_steps 1 (zinf train: one optimizer step per batch) x world size 1; DeepSpeed requires "
        "them equal: use 8 or \"auto\"");
  // Without the caller's micro-batch the config's batch fills it, as before.
  DsAutoSources open = scenario;
  open.micro_batch.reset();
  const Result<ResolvedDeepSpeed> filled = resolved(R"({"train_batch_size": 96})", open);
  REQUIRE(filled.is_ok());
  CHECK(filled->micro_batch == 96);
}

nlohmann::json tiny_scenario() {
  return nlohmann::json::parse(
      R"({"model": {"layers": 2, "hidden": 64, "heads": 2, "vocab": 128, "max_positions": 32}, "seq": 32,
          "steps": 2})");
}

TEST_CASE("a scenario's explicit batch and precision must agree with its DeepSpeed config") {
  testing::TempDir dir;
  nlohmann::json batch = tiny_scenario();
  batch["batch"] = 8;
  batch["deepspeed"] = dir.write("train96.json", R"({"train_batch_size": 96})");
  const std::string batch_error = parse_scenario(batch, "s.json", ShapeResolver{}).status().message();
  CHECK(batch_error.find("ds_config.train_batch_size: 96 is not train_micro_batch_size_per_gpu 8 (scenario.batch)") !=
        std::string::npos);
  nlohmann::json precision = tiny_scenario();
  precision["precision"] = "bf16";
  precision["deepspeed"] = dir.write("off.json", R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})");
  const std::string precision_error = parse_scenario(precision, "s.json", ShapeResolver{}).status().message();
  CHECK(precision_error.find("ds_config.bf16.enabled: the config trains in fp32") != std::string::npos);
  CHECK(precision_error.find("scenario.precision is bf16") != std::string::npos);
  // Without the scenario's batch and precision the config fills them.
  nlohmann::json open = tiny_scenario();
  open["deepspeed"] = dir.write("bf16auto.json", R"({"train_batch_size": 4, "bf16": {"enabled": "auto"}})");
  const Result<Scenario> s = parse_scenario(open, "s.json", ShapeResolver{});
  INFO(s.status().message());
  REQUIRE(s.is_ok());
  CHECK(s->batch == 4);
  CHECK(s->precision == DType::kBF16);
}

TEST_CASE("errors about budgets a DeepSpeed config set name the key the user wrote") {
  testing::TempDir dir;
  nlohmann::json doc = tiny_scenario();
  doc["tiling"] = "auto";
  doc["deepspeed"] = dir.write("live.json", R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"},
      "offload_optimizer": {"device": "cpu"}, "max_live_parameters": 10}})");
  const std::string error = parse_scenario(doc, "s.json", ShapeResolver{}).status().message();
  INFO(error);
  CHECK(error.find("ds_config.zero_optimization.max_live_parameters") != std::string::npos);
  CHECK(error.find("zero.max_live_bytes") == std::string::npos);
  // The engine's own messages (TrainSession) go through the same renaming.
  Scenario s;
  s.deepspeed_context = "scenario.deepspeed: live.json";
  s.deepspeed_keys = {{"zero.max_live_bytes", "ds_config.zero_optimization.max_live_parameters"}};
  const Status renamed = name_deepspeed_keys(
      Status::invalid_argument("scenario.zero.max_live_bytes: 40 B cannot hold; lower zero.max_live_bytes"), s);
  CHECK(renamed.message() ==
        "scenario.deepspeed: live.json: ds_config.zero_optimization.max_live_parameters (zinf's zero.max_live_bytes, "
        "in bytes): 40 B cannot hold; lower ds_config.zero_optimization.max_live_parameters");
  CHECK(name_deepspeed_keys(Status::invalid_argument("scenario.zero.max_live_bytes: x"), Scenario{}).message() ==
        "scenario.zero.max_live_bytes: x");
}

TEST_CASE("docs/deepspeed.md lists every name of the alias table") {
  std::ifstream file(ZINF_FIXTURES_DIR "/../../docs/deepspeed.md");
  REQUIRE(file);
  std::stringstream text;
  text << file.rdbuf();
  const std::string readme = text.str();
  for (const DsKeyAlias& alias : deepspeed_key_aliases()) {
    const std::string row = alias.canonical.empty()
                                ? fmt::format("| `{}` | — | {} |", alias.name, alias.kind)
                                : fmt::format("| `{}` | `{}` | {} |", alias.name, alias.canonical, alias.kind);
    INFO(row);
    CHECK(readme.find(row) != std::string::npos);
  }
  CHECK(readme.find(std::string(kDeepSpeedSourceCommit)) != std::string::npos);
}

}  // namespace
}  // namespace zinf::spec
