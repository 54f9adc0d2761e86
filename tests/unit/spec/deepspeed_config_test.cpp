// DeepSpeed configs: every published fixture parses to what its text says; "auto" resolves to
// the Hugging Face integration's values (hidden^2, int(0.9 hidden^2), 10 hidden, the trainer's
// batch and precision) worked out by hand; the batch sizes complete and check as DeepSpeed's
// _set_batch_related_parameters does; bad keys are one line naming the key; the ZeroConfig built
// from a config holds the byte budgets computed by hand.
#include "libengine/spec/deepspeed_config.h"

#include <algorithm>
#include <string>

#include "libengine/spec/json_input.h"
#include "libengine/spec/scenario.h"
#include "tests/catch.h"

namespace zinf::spec {
namespace {

const std::string kDir = ZINF_FIXTURES_DIR "/deepspeed/";

DeepSpeedConfig load(const std::string& name) {
  Result<DeepSpeedConfig> config = load_deepspeed_config(kDir + name);
  INFO(config.status().message());
  REQUIRE(config.is_ok());
  return std::move(config).value();
}

std::string error_of(const std::string& text, const DsAutoSources& sources = {}) {
  Result<nlohmann::json> document = parse_json_text(text, "t.json");
  REQUIRE(document.is_ok());
  Result<DeepSpeedConfig> config = parse_deepspeed_config(*document, "ds_config");
  if (!config.is_ok()) return config.status().message();
  Result<ResolvedDeepSpeed> resolved = resolve_deepspeed(*config, sources, "ds_config");
  if (!resolved.is_ok()) return resolved.status().message();
  return "";
}

ResolvedDeepSpeed resolve(const DeepSpeedConfig& config, const DsAutoSources& sources) {
  Result<ResolvedDeepSpeed> resolved = resolve_deepspeed(config, sources, "ds_config");
  INFO(resolved.status().message());
  REQUIRE(resolved.is_ok());
  return std::move(resolved).value();
}

TEST_CASE("the HF ZeRO-2 config: CPU optimizer, every training value auto") {
  const DeepSpeedConfig c = load("hf_zero2_cpu_offload_auto.json");
  CHECK(c.stage == 2);
  CHECK(c.offload_optimizer.device == Tier::kCpu);
  CHECK(c.offload_optimizer.pin_memory);
  CHECK(c.offload_param.device == Tier::kDevice);
  CHECK(c.micro_batch.is_auto);
  CHECK(c.train_batch.is_auto);
  CHECK(c.lr.is_auto);
  CHECK(c.betas.is_auto);
  CHECK(c.reduce_bucket_size.value == 200'000'000);  // written 2e8
  CHECK(c.optimizer_type == "AdamW");

  DsAutoSources sources;
  sources.hidden = 1024;
  sources.world_size = 8;
  sources.micro_batch = 4;
  sources.precision = DType::kBF16;
  sources.lr = 3e-4;
  const ResolvedDeepSpeed r = resolve(c, sources);
  CHECK(r.micro_batch == 4);
  CHECK(r.grad_accumulation == 1);
  CHECK(r.train_batch == 32);  // 8 GPUs x 4 x 1
  CHECK(r.precision == DType::kBF16);
  CHECK(r.lr == 3e-4);
  CHECK(r.beta2 == 0.999);
  CHECK(r.gradient_clipping == 1.0);
  CHECK(r.reduce_bucket_size == 200'000'000);  // explicit, not auto
  CHECK(r.grads_tier() == Tier::kCpu);
  // The scheduler and the tuning knobs are known but unused.
  const auto unused = [&](const std::string& key) {
    return std::find(c.unused_keys.begin(), c.unused_keys.end(), "ds_config." + key) != c.unused_keys.end();
  };
  CHECK(unused("scheduler"));
  CHECK(unused("zero_optimization.overlap_comm"));
  CHECK(unused("fp16.hysteresis"));
  CHECK_FALSE(unused("zero_optimization.stage"));
}

TEST_CASE("auto buckets resolve from the hidden size as the HF integration does") {
  // The docs' NVMe example with its aio section at the top level, where DeepSpeed reads it.
  const DeepSpeedConfig c = load("hf_docs_zero3_nvme_aio_top.json");
  CHECK(c.stage == 3);
  CHECK(c.offload_param.device == Tier::kNvme);
  CHECK(c.offload_param.nvme_path == "/local_nvme");
  CHECK(c.offload_param.buffer_count == 5);
  CHECK(c.offload_param.buffer_size == 100'000'000);
  CHECK(c.offload_param.max_in_cpu == 1'000'000'000);
  CHECK(c.offload_optimizer.device == Tier::kNvme);
  CHECK(c.offload_optimizer.buffer_count == 4);
  CHECK(c.aio.block_size_bytes == 262144);
  CHECK(c.aio.queue_depth == 32);
  CHECK(c.aio.thread_count == 1);  // thread_count is ignored (DeepSpeed 0.19.8): intra_op_parallelism's default
  DsAutoSources sources;
  sources.hidden = 1024;
  const ResolvedDeepSpeed r = resolve(c, sources);
  CHECK(r.reduce_bucket_size == 1'048'576);  // 1024^2
  CHECK(r.prefetch_bucket_size == 943'718);  // int(0.9 x 1048576) = int(943718.4)
  CHECK(r.persistence_threshold == 10'240);  // 10 x 1024
  CHECK(r.max_live_parameters == 1'000'000'000);
  CHECK(r.sub_group_size == 1'000'000'000);
  CHECK(r.resolutions.size() == 3);
  CHECK(r.precision == DType::kF32);  // neither fp16 nor bf16: fp32, as DeepSpeed
}

TEST_CASE("explicit batch sizes are checked against the world size") {
  const DeepSpeedConfig c = load("dsexamples_llama_13b_zero3_offload.json");
  DsAutoSources eight;
  eight.world_size = 8;
  const ResolvedDeepSpeed r = resolve(c, eight);
  CHECK(r.train_batch == 64);
  CHECK(r.micro_batch == 2);
  CHECK(r.grad_accumulation == 4);
  CHECK(r.precision == DType::kBF16);
  CHECK(r.beta2 == 0.95);
  CHECK(r.params_tier() == Tier::kDevice);
  CHECK(r.optimizer_tier() == Tier::kCpu);
  DsAutoSources four;
  four.world_size = 4;
  const Result<ResolvedDeepSpeed> wrong = resolve_deepspeed(c, four, "ds_config");
  REQUIRE_FALSE(wrong.is_ok());
  CHECK(wrong.status().message() ==
        "ds_config.train_batch_size: 64 is not train_micro_batch_size_per_gpu 2 x gradient_accumulation_steps 4 x "
        "world size 4; DeepSpeed requires them equal: use 32");
}

TEST_CASE("batch sizes complete the way DeepSpeed completes them") {
  DsAutoSources two;
  two.world_size = 2;
  const auto resolved = [&](const std::string& text) {
    Result<nlohmann::json> document = parse_json_text(text, "t.json");
    REQUIRE(document.is_ok());
    return resolve(parse_deepspeed_config(*document, "ds_config").value(), two);
  };
  const ResolvedDeepSpeed train_and_micro =
      resolved(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})");
  CHECK(train_and_micro.grad_accumulation == 4);  // 32 / (4 x 2)
  const ResolvedDeepSpeed train_only = resolved(R"({"train_batch_size": 32})");
  CHECK(train_only.micro_batch == 16);
  CHECK(train_only.grad_accumulation == 1);
  const ResolvedDeepSpeed train_and_accum = resolved(R"({"train_batch_size": 32, "gradient_accumulation_steps": 8})");
  CHECK(train_and_accum.micro_batch == 2);
  const ResolvedDeepSpeed micro_only = resolved(R"({"train_micro_batch_size_per_gpu": 3})");
  CHECK(micro_only.train_batch == 6);
}

TEST_CASE("the other fixtures parse to what their text says") {
  // Transformers' test config with reduce_bucket_size 5e8 for the 0 DeepSpeed 0.19.8 refuses.
  const DeepSpeedConfig z3 = load("hf_zero3_cpu_offload_bucket.json");
  CHECK(z3.reduce_bucket_size.value == 500'000'000);
  CHECK(z3.fp16.value == true);
  CHECK(z3.sub_group_size.value == 100'000'000'000'000);  // 1e14
  CHECK(z3.persistence_threshold.value == 0);
  CHECK(z3.initial_scale_power == 16);
  CHECK(z3.betas.value == std::array<double, 2>{0.8, 0.999});
  const DeepSpeedConfig tutorial = load("deepspeed_tutorial_zero_infinity_cpu.json");
  CHECK(tutorial.stage == 3);
  CHECK(tutorial.prefetch_bucket_size.value == 10'000'000);
  CHECK(tutorial.offload_param.device == Tier::kCpu);
  const DeepSpeedConfig gptj = load("dsexamples_gptj_6b_zero2.json");
  CHECK(gptj.stage == 2);
  CHECK(gptj.offload_optimizer.device == Tier::kDevice);
}

TEST_CASE("bad configs are one line naming the key") {
  CHECK(error_of(R"({"zero_optimization": {"stage": 4}})") ==
        "ds_config.zero_optimization.stage: 4 is not a ZeRO stage; expected 0, 1, 2 or 3");
  CHECK(error_of(R"({"zero_optimization": {"stage": "3"}})")
            .find("ds_config.zero_optimization.stage: expected a "
                  "whole number") == 0);
  CHECK(error_of(R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}})")
            .find("ds_config.zero_optimization.offload_optimizer.nvme_path: required when device is \"nvme\"") == 0);
  CHECK(error_of(R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})")
            .find("ds_config.zero_optimization.offload_param.device: offloading parameters needs stage 3") == 0);
  CHECK(error_of(R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_sise": 5}})")
            .find("ds_config.zero_optimization.stage3_prefetch_bucket_sise") == 0);
  CHECK(error_of(R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true}})")
            .find("ds_config.zero_optimization.zero_quantized_weights: true (boolean) is not supported by zinf") == 0);
  CHECK(error_of(R"({"zero_optimization": {"stage": 3, "stage3_max_live_parameters": "auto"}})")
            .find("ds_config.zero_optimization.stage3_max_live_parameters: \"auto\" is filled in by the Hugging Face "
                  "integration only") == 0);
  CHECK(error_of(R"({"optimizer": {"type": "Lamb"}})").find("ds_config.optimizer.type: 'Lamb' is not supported") == 0);
  CHECK(error_of(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})").find("fp16 and bf16 are both") !=
        std::string::npos);
  CHECK(error_of(R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})")
            .find("ds_config.train_batch_size: 10 is not") == 0);
  DsAutoSources micro;
  micro.micro_batch = 2;
  CHECK(error_of(R"({"train_micro_batch_size_per_gpu": 4})", micro) ==
        "ds_config.train_micro_batch_size_per_gpu: 4 but the micro-batch is 2; make them agree or write \"auto\"");
  CHECK(error_of(R"([1, 2])").find("ds_config") == 0);
}

// Issue 24: each a difference from DeepSpeed 0.19.8 (the pinned version) that the config-truth test
// (tests/cli/deepspeed_truth_test.py) found.
TEST_CASE("configs read as DeepSpeed 0.19.8 reads them: what it refuses, ignores and defaults") {
  // aio nested in zero_optimization (the Transformers docs' NVMe example): an extra field there.
  const Result<DeepSpeedConfig> nested = load_deepspeed_config(kDir + "hf_docs_zero3_nvme.json");
  REQUIRE_FALSE(nested.is_ok());
  CHECK(nested.status().message().find("zero_optimization.aio: DeepSpeed refuses aio inside zero_optimization") !=
        std::string::npos);
  // reduce_bucket_size must be > 0 (Transformers' own test config has 0).
  const Result<DeepSpeedConfig> zero_bucket = load_deepspeed_config(kDir + "hf_zero3_cpu_offload.json");
  REQUIRE_FALSE(zero_bucket.is_ok());
  CHECK(zero_bucket.status().message().find("zero_optimization.reduce_bucket_size: expected a whole number from 1") !=
        std::string::npos);
  // An absent gradient_clipping clips at 1.0 (GRADIENT_CLIPPING_DEFAULT); a written 0 does not clip.
  CHECK(resolve(load("deepspeed_tutorial_zero_infinity_cpu.json"), {}).gradient_clipping == 1.0);
  Result<nlohmann::json> no_clip = parse_json_text(R"({"gradient_clipping": 0})", "t.json");
  REQUIRE(no_clip.is_ok());
  CHECK(resolve(parse_deepspeed_config(*no_clip, "ds_config").value(), {}).gradient_clipping == 0.0);
  // aio.thread_count is ignored (only intra_op_parallelism sets the threads), and listed with why.
  Result<nlohmann::json> threads =
      parse_json_text(R"({"aio": {"thread_count": 4, "intra_op_parallelism": 2}})", "t.json");
  REQUIRE(threads.is_ok());
  const DeepSpeedConfig aio = parse_deepspeed_config(*threads, "ds_config").value();
  CHECK(aio.aio.thread_count == 2);
  CHECK(std::find(aio.unused_keys.begin(), aio.unused_keys.end(),
                  "ds_config.aio.thread_count (DeepSpeed 0.19.8 ignores it; aio.intra_op_parallelism sets the I/O "
                  "threads)") != aio.unused_keys.end());
}

TEST_CASE("the engine's zero section from a config: tiers, paths once, budgets in bytes") {
  const DeepSpeedConfig c = load("hf_docs_zero3_nvme_aio_top.json");
  DsAutoSources sources;
  sources.hidden = 256;
  const ResolvedDeepSpeed r = resolve(c, sources);
  // 3.3M parameters: the 1e9 live-parameter bound and the 5 x 1e8 buffers are the whole model.
  const Result<ZeroConfig> zero = zero_config_from_deepspeed(r, 2, 3'300'000, "ds_config");
  REQUIRE(zero.is_ok());
  CHECK(zero->stage == 3);
  CHECK(zero->params == Tier::kNvme);
  CHECK(zero->optimizer == Tier::kNvme);
  CHECK(zero->grads == Tier::kCpu);
  CHECK(zero->nvme_paths == std::vector<std::string>{"/local_nvme"});
  CHECK(zero->max_live_bytes == 6'600'000);
  CHECK(zero->prefetch_bytes == 6'600'000);
  CHECK(zero->persistence_threshold == 2'560);  // auto: 10 x 256

  const ResolvedDeepSpeed tutorial = resolve(load("deepspeed_tutorial_zero_infinity_cpu.json"), sources);
  const Result<ZeroConfig> cpu = zero_config_from_deepspeed(tutorial, 4, 3'000'000'000, "ds_config");
  REQUIRE(cpu.is_ok());
  CHECK(cpu->params == Tier::kCpu);
  CHECK(cpu->max_live_bytes == 4'000'000'000);  // 1e9 elements x 4 B (fp32)
  CHECK(cpu->prefetch_bytes == 0);              // no NVMe parameters, no NVMe staging
  CHECK(cpu->persistence_threshold == 100'000);
}

TEST_CASE("cpu_checkpointing with partition_activations keeps the checkpoints in CPU memory (zero.activations)") {
  const Result<DeepSpeedConfig> config = parse_deepspeed_config(
      nlohmann::json::parse(
          R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}},
              "activation_checkpointing": {"partition_activations": true, "cpu_checkpointing": true}})"),
      "ds_config");
  REQUIRE(config.is_ok());
  DsAutoSources sources;
  sources.hidden = 64;
  const Result<ZeroConfig> zero = zero_config_from_deepspeed(resolve(config.value(), sources), 2, 100'000, "ds_config");
  REQUIRE(zero.is_ok());
  CHECK(zero->activations == Tier::kCpu);
  CHECK(zero->placement()[StateKind::kActivations] == Tier::kCpu);
  CHECK(zero->sub_group_size == 0);  // not given: derived
}

TEST_CASE("sub_group_size below the model caps zinf's sub-groups, at least the model leaves them derived") {
  for (const auto& [given, expected] :
       {std::pair{std::int64_t{5000}, std::int64_t{5000}}, std::pair{std::int64_t{100'000}, std::int64_t{0}},
        std::pair{std::int64_t{1'000'000'000}, std::int64_t{0}}}) {
    nlohmann::json doc =
        nlohmann::json::parse(R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}})");
    doc["zero_optimization"]["sub_group_size"] = given;
    const Result<DeepSpeedConfig> config = parse_deepspeed_config(doc, "ds_config");
    REQUIRE(config.is_ok());
    DsAutoSources sources;
    sources.hidden = 64;
    const Result<ZeroConfig> zero =
        zero_config_from_deepspeed(resolve(config.value(), sources), 2, 100'000, "ds_config");
    REQUIRE(zero.is_ok());
    INFO("sub_group_size " << given);
    CHECK(zero->sub_group_size == expected);
  }
}

TEST_CASE("a scenario's deepspeed field builds its zero section and fills what the scenario leaves out") {
  nlohmann::json doc = nlohmann::json::parse(
      R"({"model": {"layers": 2, "hidden": 64, "heads": 2, "vocab": 128, "max_positions": 32}, "seq": 32,
          "steps": 4, "batch": 2})");
  doc["deepspeed"] = kDir + "hf_docs_zero3_nvme_aio_top.json";
  const Result<Scenario> s = parse_scenario(doc, "ds.json", ShapeResolver{});
  INFO(s.status().message());
  REQUIRE(s.is_ok());
  CHECK(s->zero.stage == 3);
  CHECK(s->zero.params == Tier::kNvme);
  CHECK(s->zero.optimizer == Tier::kNvme);
  CHECK(s->zero.grads == Tier::kCpu);
  CHECK(s->zero.nvme_paths == std::vector<std::string>{"/local_nvme"});
  CHECK(s->zero.persistence_threshold == 640);  // auto: 10 x hidden 64
  // fp32 (the config is silent, so is the scenario): 4 B per element, capped at the whole model.
  const std::uint64_t model_bytes = count_parameters(s->shape).total * 4;
  CHECK(s->zero.max_live_bytes == model_bytes);
  CHECK(s->zero.prefetch_bytes == model_bytes);
  CHECK(s->batch == 2);  // auto micro-batch: the scenario's
  REQUIRE(s->warnings.size() == 1);
  CHECK(s->warnings[0].find("ds_config.zero_optimization.overlap_comm") != std::string::npos);

  nlohmann::json both = doc;
  both["zero"] = {{"stage", 3}};
  CHECK(parse_scenario(both, "ds.json", ShapeResolver{}).status().message() ==
        "scenario.deepspeed: the DeepSpeed config sets the engine; drop scenario.zero or the deepspeed field");
  nlohmann::json missing = doc;
  missing["deepspeed"] = "/nonexistent/ds_config.json";
  CHECK(parse_scenario(missing, "ds.json", ShapeResolver{}).status().message().find("scenario.deepspeed: ") == 0);
  nlohmann::json clash = doc;
  clash["batch"] = 3;
  clash["deepspeed"] = kDir + "dsexamples_gptj_6b_zero2.json";
  CHECK(parse_scenario(clash, "ds.json", ShapeResolver{})
            .status()
            .message()
            .find("ds_config.train_micro_batch_size_per_gpu: 4 but the scenario.batch is 3") != std::string::npos);
}

}  // namespace
}  // namespace zinf::spec
