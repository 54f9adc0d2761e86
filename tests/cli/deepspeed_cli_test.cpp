// `zinf plan --ds-config`, `--emit-ds-config` and a scenario's "deepspeed" field end to end
// (issue 16): every published fixture plans with the placement it asks for; the bad ones exit 2 with
// one line naming the key; a plan written out and read back is the same plan; a scenario pointing
// at the HF ZeRO-3 CPU-offload config trains and its record's engine placement is the config's.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace zinf::cli {
namespace {

using test_support::check_usage_error;
using test_support::fixture;
using test_support::Outcome;
using test_support::read_text;
using test_support::run_zinf;
using testing::TempDir;

nlohmann::json plan_json(std::vector<std::string> args) {
  args.insert(args.begin(), "plan");
  args.insert(args.end(), {"--format", "json"});
  const Outcome o = run_zinf(args);
  INFO("stderr: " << o.err);
  REQUIRE(o.code == 0);
  return nlohmann::json::parse(o.out);
}

struct Expected {
  const char* file;
  int stage;
  const char* params;
  const char* optimizer;
  const char* stage_family;   // input.strategy of the record
  const char* precision;      // without --precision: the config's, "auto" by zinf's rule (docs/deepspeed.md)
  int micro_batch;            // without --micro-batch: the config's, else plan's default 1
  int train_batch;            // on dgx-h100's 8 GPUs
  const char* model = "13B";  // --params: 13B, or what data parallelism fits in one H100
};

TEST_CASE("every published DeepSpeed fixture plans with the stage, placement, precision and batch it asks for") {
  const std::vector<Expected> fixtures{
      // "auto" fp16 and bf16 without --precision: bf16; "auto" batches: 1 per GPU x 8 GPUs.
      {"hf_zero2_cpu_offload_auto.json", 2, "gpu", "cpu", "deepspeed-stage-1-2", "bf16", 1, 8},
      // Transformers' test config and docs example as DeepSpeed 0.19.8 accepts them (reduce_bucket_size 5e8
      // for 0; aio at the top level): the published files are refused below, as DeepSpeed refuses them.
      {"hf_zero3_cpu_offload_bucket.json", 3, "cpu", "cpu", "deepspeed-stage-3", "fp16", 1, 8},
      {"hf_docs_zero3_nvme_aio_top.json", 3, "nvme", "nvme", "deepspeed-stage-3-nvme-optimizer", "fp32", 1, 8},
      {"deepspeed_tutorial_zero_infinity_cpu.json", 3, "cpu", "cpu", "deepspeed-stage-3", "fp32", 1, 8},
      {"dsexamples_llama_13b_zero3_offload.json", 3, "gpu", "cpu", "deepspeed-stage-3", "bf16", 2, 64},
      {"dsexamples_gptj_6b_zero2.json", 2, "gpu", "gpu", "deepspeed-stage-1-2", "bf16", 4, 128},
      {"llamafactory_ds_z0_config.json", 0, "gpu", "gpu", "dp", "bf16", 1, 8, "1B"},
      {"llamafactory_ds_z2_offload_config.json", 2, "gpu", "cpu", "deepspeed-stage-1-2", "bf16", 1, 8},
      {"llamafactory_ds_z3_config.json", 3, "gpu", "gpu", "deepspeed-stage-3", "bf16", 1, 8},
      {"llamafactory_ds_z3_offload_config.json", 3, "cpu", "cpu", "deepspeed-stage-3", "bf16", 1, 8},
      {"axolotl_zero1.json", 1, "gpu", "gpu", "deepspeed-stage-1-2", "bf16", 1, 8},
      // DeepSpeed's un-prefixed ZeRO-3 names (max_live_parameters, ...): read, not refused.
      {"axolotl_zero3_bf16.json", 3, "gpu", "gpu", "deepspeed-stage-3", "bf16", 1, 8},
      {"axolotl_zero3_bf16_cpuoffload_all.json", 3, "cpu", "cpu", "deepspeed-stage-3", "bf16", 1, 8},
      // fp16 "auto" and no bf16 section: fp16.
      {"fastchat_deepspeed_config_s3.json", 3, "cpu", "cpu", "deepspeed-stage-3", "fp16", 1, 8},
      // fp16 "auto" next to bf16 true: bf16.
      {"llava_zero3_offload.json", 3, "cpu", "cpu", "deepspeed-stage-3", "bf16", 1, 8},
  };
  for (const Expected& e : fixtures) {
    INFO(e.file);
    // dgx-h100 is 8 GPUs: the DeepSpeedExamples configs' batch sizes assume 8.
    const nlohmann::json record = plan_json(
        {"--params", e.model, "--hw", "dgx-h100", "--ds-config", fixture(std::string("deepspeed/") + e.file)});
    CHECK(record["feasible"] == true);
    CHECK(record["deepspeed"]["stage"] == e.stage);
    CHECK(record["placement"]["params"] == e.params);
    CHECK(record["placement"]["optimizer"] == e.optimizer);
    CHECK(record["strategy"] == e.stage_family);
    CHECK(record["input"]["training"]["precision"] == e.precision);
    CHECK(record["deepspeed"]["precision"] == e.precision);
    CHECK(record["input"]["training"]["micro_batch"] == e.micro_batch);
    CHECK(record["deepspeed"]["train_micro_batch_size_per_gpu"] == e.micro_batch);
    CHECK(record["deepspeed"]["train_batch_size"] == e.train_batch);
    CHECK(record["prediction"]["step_seconds"].get<double>() > 0);
    CHECK(record["deepspeed"]["source"].get<std::string>().find(e.file) != std::string::npos);
  }
  // The one published config zinf cannot run (parameters on CPU, optimizer on the GPU): refused,
  // naming the key.
  check_usage_error(run_zinf({"plan", "--params", "13B", "--hw", "dgx-h100", "--ds-config",
                              fixture("deepspeed/axolotl_zero3_bf16_cpuoffload_params.json")}),
                    "ds_config.zero_optimization.offload_param.device: parameters offloaded with the optimizer on "
                    "the GPU is not supported by zinf");
}

TEST_CASE("plan --ds-config: auto precision without --precision is shown with zinf's rule as its source") {
  const nlohmann::json record = plan_json(
      {"--params", "7B", "--hw", "dgx-h100", "--ds-config", fixture("deepspeed/hf_zero2_cpu_offload_auto.json")});
  bool shown = false;
  for (const auto& r : record["deepspeed"]["auto"]) {
    if (r["key"] == "bf16.enabled") {
      shown = true;
      CHECK(r["value"] == "true");
      CHECK(r["from"].get<std::string>().find("no precision given") == 0);
    }
  }
  CHECK(shown);
  // Findings name a key as the file wrote it: axolotl's max_live_parameters 0 cannot hold two parameters.
  const nlohmann::json axolotl =
      plan_json({"--params", "13B", "--hw", "dgx-h100", "--ds-config", fixture("deepspeed/axolotl_zero3_bf16.json")});
  bool named = false;
  for (const auto& f : axolotl["deepspeed"]["wrong_for_hardware"])
    named |= f["key"] == "zero_optimization.max_live_parameters";
  CHECK(named);
  // A config that trains in fp32 explicitly, against --precision bf16: one error naming both.
  TempDir dir;
  const std::string off = dir.write("off.json", R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})");
  check_usage_error(run_zinf({"plan", "--params", "1B", "--precision", "bf16", "--ds-config", off}),
                    "ds_config.bf16.enabled: the config trains in fp32 (fp16.enabled false, bf16.enabled false) but "
                    "the --precision is bf16");
  // DeepSpeed's legacy "bfloat16" section plans in bf16.
  const std::string legacy = dir.write("legacy.json", R"({"bfloat16": {"enabled": true}})");
  const nlohmann::json bf16 = plan_json({"--params", "1B", "--ds-config", legacy});
  CHECK(bf16["input"]["training"]["precision"] == "bf16");
  CHECK(bf16["deepspeed"]["unused_keys"].dump().find("bfloat16") == std::string::npos);
}

TEST_CASE("plan --ds-config resolves auto from the model and the flags and shows it") {
  // hidden 4096 (--layers/--hidden/--heads), --micro-batch 2, --precision bf16, 8 GPUs.
  const nlohmann::json record =
      plan_json({"--layers", "32", "--hidden", "4096", "--heads", "32", "--hw", "dgx-h100", "--micro-batch", "2",
                 "--precision", "bf16", "--ds-config", fixture("deepspeed/hf_docs_zero3_nvme_aio_top.json")});
  const nlohmann::json& ds = record["deepspeed"];
  CHECK(ds["reduce_bucket_size"] == 16'777'216);              // 4096^2
  CHECK(ds["stage3_prefetch_bucket_size"] == 15'099'494);     // int(0.9 x 16777216)
  CHECK(ds["stage3_param_persistence_threshold"] == 40'960);  // 10 x 4096
  CHECK(ds["train_micro_batch_size_per_gpu"] == 2);           // the config gives none: --micro-batch
  CHECK(record["input"]["training"]["precision"] == "bf16");
  const nlohmann::json z2 = plan_json({"--params", "7B", "--hw", "dgx-h100", "--micro-batch", "2", "--precision",
                                       "fp16", "--ds-config", fixture("deepspeed/hf_zero2_cpu_offload_auto.json")});
  CHECK(z2["deepspeed"]["train_batch_size"] == 16);  // auto: 8 GPUs x 2 x 1
  CHECK(z2["deepspeed"]["precision"] == "fp16");     // fp16.enabled auto <- --precision fp16
  CHECK(z2["input"]["training"]["micro_batch"] == 2);
  bool resolution_shown = false;
  for (const auto& r : z2["deepspeed"]["auto"])
    resolution_shown |= r["key"] == "train_batch_size" && r["value"] == "16";
  CHECK(resolution_shown);
}

TEST_CASE("settings wrong for the hardware are listed with the value that would work") {
  // On the 2-GPU workstation, 100M-element NVMe buffers cannot hold a 70B model's embedding.
  const nlohmann::json record = plan_json({"--params", "70B", "--hw", "h100-workstation", "--ds-config",
                                           fixture("deepspeed/hf_docs_zero3_nvme_aio_top.json")});
  bool buffer = false;
  for (const auto& f : record["deepspeed"]["wrong_for_hardware"]) {
    if (f["key"] == "zero_optimization.offload_param.buffer_size") {
      buffer = true;
      CHECK(std::stod(f["would_work"].get<std::string>()) > 1e8);
    }
  }
  CHECK(buffer);
  const Outcome table = run_zinf({"plan", "--params", "70B", "--hw", "h100-workstation", "--ds-config",
                                  fixture("deepspeed/hf_docs_zero3_nvme_aio_top.json")});
  CHECK(table.out.find("wrong here") != std::string::npos);
  CHECK(table.out.find("not used by zinf") != std::string::npos);
}

TEST_CASE("bad DeepSpeed configs: exit 2, one line naming the key") {
  const auto bad = [](const std::string& file, const std::string& needle) {
    check_usage_error(run_zinf({"plan", "--params", "1B", "--ds-config", fixture("deepspeed/" + file)}), needle);
  };
  bad("bad_stage.json", "ds_config.zero_optimization.stage: 4 is not a ZeRO stage");
  bad("bad_stage_type.json", "ds_config.zero_optimization.stage: expected a whole number");
  bad("bad_nvme_without_path.json", "ds_config.zero_optimization.offload_param.nvme_path: required");
  bad("bad_batch_sizes.json", "ds_config.train_batch_size: 10 is not train_micro_batch_size_per_gpu 4");
  bad("bad_offload_device.json", "ds_config.zero_optimization.offload_optimizer.device: expected \"none\"");
  bad("hf_docs_zero3_nvme_published.json", "malformed JSON");
  // What DeepSpeed 0.19.8 refuses (its config classes: an extra field of zero_optimization; gt=0).
  bad("hf_docs_zero3_nvme.json", "ds_config.zero_optimization.aio: DeepSpeed refuses aio inside zero_optimization");
  bad("hf_zero3_cpu_offload.json", "ds_config.zero_optimization.reduce_bucket_size: expected a whole number from 1");
  check_usage_error(run_zinf({"plan", "--params", "1B", "--ds-config", "/nonexistent/ds.json"}), "--ds-config");
  check_usage_error(run_zinf({"plan", "--params", "1B", "--strategy", "zero3", "--ds-config",
                              fixture("deepspeed/hf_zero3_cpu_offload_bucket.json")}),
                    "drop --strategy/--place");
  check_usage_error(run_zinf({"plan", "--params", "1B", "--micro-batch", "3", "--hw", "dgx-h100", "--ds-config",
                              fixture("deepspeed/dsexamples_gptj_6b_zero2.json")}),
                    "ds_config.train_micro_batch_size_per_gpu: 4 but the --micro-batch is 3");
}

TEST_CASE("plan --emit-ds-config read back with --ds-config gives the same plan") {
  TempDir dir;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--params", "1T", "--hw", "dgx2-v100"},
        std::vector<std::string>{"--params", "100B", "--hw", "h100-workstation", "--micro-batch", "2"},
        std::vector<std::string>{"--params", "13B", "--hw", "dgx-h100", "--ckpt-interval", "2"}}) {
    const std::string path = dir.path() + "/emitted.json";
    std::vector<std::string> emit = args;
    emit.insert(emit.end(), {"--emit-ds-config", path});
    const nlohmann::json first = plan_json(emit);
    const nlohmann::json written = nlohmann::json::parse(read_text(path));
    CHECK(written["zero_optimization"]["stage"].is_number_integer());
    std::vector<std::string> again = args;
    again.insert(again.end(), {"--ds-config", path});
    const nlohmann::json second = plan_json(again);
    CHECK(second["placement"] == first["placement"]);
    CHECK(second["prediction"]["step_seconds"] == first["prediction"]["step_seconds"]);
    CHECK(second["memory"] == first["memory"]);
    CHECK(second["bandwidth"] == first["bandwidth"]);
  }
}

TEST_CASE("a scenario pointing at a DeepSpeed config trains with the config's placement") {
  TempDir dir;
  const std::string record_path = dir.path() + "/record.json";
  const std::string scenario = dir.write(
      "ds.json",
      nlohmann::json{{"model", {{"layers", 2}, {"hidden", 64}, {"heads", 2}, {"vocab", 128}, {"max_positions", 32}}},
                     {"seq", 32},
                     {"steps", 3},
                     {"batch", 4},
                     {"seed", 3},
                     {"deepspeed", fixture("deepspeed/hf_zero3_cpu_offload_bucket.json")},
                     {"output", {{"log_every", 1}}}}
          .dump());
  const Outcome o = run_zinf({"train", scenario, "--record", record_path});
  INFO("stderr: " << o.err);
  REQUIRE(o.code == 0);
  // Unused keys are one warning line.
  CHECK(o.err.find("warning: scenario.deepspeed:") != std::string::npos);
  CHECK(o.err.find("ds_config.scheduler") != std::string::npos);
  const nlohmann::json record = nlohmann::json::parse(read_text(record_path));
  const nlohmann::json& zero = record["engine"]["zero"];
  CHECK(zero["stage"] == 3);
  CHECK(zero["params"] == "cpu");
  CHECK(zero["optimizer"] == "cpu");
  CHECK(zero["grads"] == "cpu");
  CHECK(zero["persistence_threshold"] == 0);  // stage3_param_persistence_threshold 0
  // The config's fp16 and AdamW settings filled what the scenario left out.
  CHECK(record["scenario"]["precision"] == "fp16");
  CHECK(record["scenario"]["optimizer"]["lr"] == 3e-5);
  CHECK(record["scenario"]["optimizer"]["beta1"] == 0.8);
  CHECK(record["scenario"]["optimizer"]["weight_decay"] == 3e-7);
  CHECK(record["scenario"]["loss_scale"]["initial"] == 65536.0);  // 2^initial_scale_power 16

  // A value the scenario also gives must agree.
  const std::string clash = dir.write(
      "clash.json",
      nlohmann::json{{"model", {{"layers", 2}, {"hidden", 64}, {"heads", 2}, {"vocab", 128}, {"max_positions", 32}}},
                     {"seq", 32},
                     {"steps", 3},
                     {"optimizer", {{"lr", 1e-3}}},
                     {"deepspeed", fixture("deepspeed/hf_zero3_cpu_offload_bucket.json")}}
          .dump());
  check_usage_error(run_zinf({"train", clash}),
                    "ds_config.optimizer.params.lr is 3e-05 but scenario.optimizer.lr is 0.001");
  const std::string accumulation = dir.write(
      "accumulation.json",
      nlohmann::json{{"model", {{"layers", 2}, {"hidden", 64}, {"heads", 2}, {"vocab", 128}, {"max_positions", 32}}},
                     {"seq", 32},
                     {"steps", 3},
                     {"deepspeed", fixture("deepspeed/dsexamples_gptj_6b_zero2.json")}}
          .dump());
  check_usage_error(run_zinf({"train", accumulation}), "ds_config.train_batch_size: 128 is not");
}

TEST_CASE("a scenario's DeepSpeed config: contradictions name both sides, engine errors the DeepSpeed key") {
  TempDir dir;
  const auto scenario = [&](const std::string& name, nlohmann::json extra, const std::string& ds_text) {
    nlohmann::json doc{{"model", {{"layers", 2}, {"hidden", 64}, {"heads", 2}, {"vocab", 128}, {"max_positions", 32}}},
                       {"seq", 32},
                       {"steps", 2},
                       {"deepspeed", dir.write(name + "_ds.json", ds_text)}};
    doc.update(extra);
    return dir.write(name + ".json", doc.dump());
  };
  // The scenario's explicit batch against the config's train_batch_size: no longer silently 96.
  check_usage_error(run_zinf({"train", scenario("batch", {{"batch", 8}}, R"({"train_batch_size": 96})")}),
                    "ds_config.train_batch_size: 96 is not train_micro_batch_size_per_gpu 8 (scenario.batch)");
  // The scenario's explicit precision against fp16/bf16 enabled false: no longer silently fp32.
  check_usage_error(
      run_zinf({"train", scenario("precision", {{"precision", "bf16"}},
                                  R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})")}),
      "ds_config.bf16.enabled: the config trains in fp32 (fp16.enabled false, bf16.enabled false) but the "
      "scenario.precision is bf16");
  // A live-parameter bound too small to tile against ("tiling": "auto"), written with DeepSpeed's
  // un-prefixed name: the error names that key, not zinf's zero.max_live_bytes.
  const Outcome live =
      run_zinf({"train", scenario("live", {{"tiling", "auto"}},
                                  R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"},
                             "offload_optimizer": {"device": "cpu"}, "max_live_parameters": 10}})")});
  check_usage_error(live, "ds_config.zero_optimization.max_live_parameters");
  CHECK(live.err.find("zero.max_live_bytes") == std::string::npos);
}

}  // namespace
}  // namespace zinf::cli
