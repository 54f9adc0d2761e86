// Scenario schema: the ready scenarios parse, defaults are filled in, to_json round-trips, every bad
// input is refused with one line naming its field path, params resolve through the given rule, and
// the resume fingerprint tracks exactly the fields a checkpoint depends on.
#include "libengine/spec/scenario.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "libengine/core/units.h"
#include "tests/catch.h"

namespace zinf::spec {
namespace {

using nlohmann::json;

const std::string kScenariosDir = ZINF_FIXTURES_DIR "/../../scenarios";

// A stand-in for the planner's shape rule: hidden 128, 4 heads, as many layers as fit the count.
Result<ModelShape> test_resolver(std::uint64_t params, std::int64_t vocab, std::int64_t seq) {
  const std::uint64_t per_layer = 12 * 128 * 128;
  if (params < per_layer)
    return Status::invalid_argument(fmt::format("scenario.model.params: {} is below the smallest shape", params));
  ModelShape shape = gpt_like_shape(static_cast<std::int64_t>(params / per_layer), 128, 4, vocab, seq);
  shape.name = "test rule";
  return shape;
}

json minimal() {
  return json::parse(R"({"model": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 128}, "steps": 10})");
}

// Parses `doc` and returns the error message ("" when it parsed).
std::string error_of(const json& doc) {
  const Result<Scenario> parsed = parse_scenario(doc, "bad.json", test_resolver);
  if (parsed.is_ok()) return "";
  CHECK(parsed.status().code() == ErrorCode::kInvalidArgument);
  CHECK(parsed.status().message().find('\n') == std::string::npos);
  return parsed.status().message();
}

// minimal() with one JSON-pointer path replaced (or added).
json with(const std::string& pointer, const json& value) {
  json doc = minimal();
  doc[json::json_pointer(pointer)] = value;
  return doc;
}

TEST_CASE("every ready scenario parses, and tiny-budget is refused at the memory wall") {
  for (const char* name : {"quickstart", "gpt2-small-bf16", "bench-4l-1024", "fp16-loss-scaling"}) {
    INFO(name);
    const Result<Scenario> s = load_scenario(kScenariosDir + "/" + name + ".json", test_resolver);
    REQUIRE(s.is_ok());
    CHECK(s->name == name);
    CHECK(parse_scenario(to_json(*s), "echo.json", test_resolver).value() == *s);
  }
  const Scenario quick = load_scenario(kScenariosDir + "/quickstart.json", test_resolver).value();
  CHECK(quick.shape.layers == 2);
  CHECK(quick.shape.hidden == 128);
  CHECK(quick.shape.vocab == 256);
  CHECK(quick.batch == 32);
  CHECK(quick.seq == 64);
  CHECK(quick.data.source == DataSource::kMarkov);
  CHECK(quick.data.successors == 4);
  CHECK(quick.data.chain_seed == 1234);
  CHECK(quick.optimizer.schedule.kind == optim::LrScheduleKind::kCosine);
  CHECK(quick.output.record == "runs/quickstart/record.json");

  const Scenario gpt2 = load_scenario(kScenariosDir + "/gpt2-small-bf16.json", test_resolver).value();
  CHECK(gpt2.precision == DType::kBF16);
  CHECK(gpt2.activation_checkpointing);
  CHECK(gpt2.device_memory_bytes == std::optional<std::uint64_t>(8ULL << 30));
  CHECK(count_parameters(gpt2.shape).total == 124439808);  // GPT-2 small's published count

  const Scenario fp16 = load_scenario(kScenariosDir + "/fp16-loss-scaling.json", test_resolver).value();
  CHECK(fp16.precision == DType::kF16);
  CHECK(fp16.loss_scale.initial == 65536.0);
  CHECK(fp16.loss_scale.growth_interval == 50);

  const Result<Scenario> tiny = load_scenario(kScenariosDir + "/tiny-budget.json", test_resolver);
  REQUIRE_FALSE(tiny.is_ok());
  // hidden 256: 789,760 params/layer x 16 B; 8 x 128 tokens x (24·256 + 4 + 4) fp32 values: one
  // block's activations (ln1 C, qkv 3·C, attn C, mid C, ln2 C, fc 4·C, act 4·C; 4 norm statistics
  // and 4 heads' log-sum-exp) and its backward scratch (dln C, the wide and mid gradients 4·C each).
  CHECK(tiny.status().message() ==
        "scenario.device_memory: 1.00 MiB is too small for even one layer (one layer needs " +
            format_bytes(789760.0 * 16 + 1024.0 * 6152 * 4) + ": " + format_bytes(789760.0 * 16) +
            " of model states + " + format_bytes(1024.0 * 6152 * 4) +
            " of activations); raise device_memory or lower batch/seq");
}

TEST_CASE("file errors name the path") {
  const Result<Scenario> missing = load_scenario("/nonexistent/zinf/s.json", test_resolver);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK(missing.status().message() == "/nonexistent/zinf/s.json: no such file");
  const Result<Scenario> malformed = load_scenario(ZINF_FIXTURES_DIR "/scenarios/malformed.json", test_resolver);
  REQUIRE_FALSE(malformed.is_ok());
  CHECK(malformed.status().message().find(ZINF_FIXTURES_DIR "/scenarios/malformed.json:3:") == 0);
}

TEST_CASE("defaults fill every optional field") {
  const Scenario s = parse_scenario(minimal(), "dir/my-run.json", test_resolver).value();
  CHECK(s.name == "my-run");
  CHECK(s.shape.layers == 2);
  CHECK(s.shape.head_dim == 16);
  CHECK(s.shape.ffn_hidden == 256);
  CHECK(s.shape.max_positions == kScenarioDefaultSeq);  // max_positions defaults to seq
  CHECK(s.shape.tied_embeddings);
  CHECK(s.shape.qkv_bias);
  CHECK(s.shape.mlp_bias);
  CHECK_FALSE(s.params_requested.has_value());
  CHECK(s.data.source == DataSource::kMarkov);
  CHECK(s.data.successors == 8);
  CHECK(s.data.skew == 0.0);
  CHECK(s.data.chain_seed == 0);
  CHECK(s.batch == 8);
  CHECK(s.seq == 64);
  CHECK(s.steps == 10);
  CHECK(s.precision == DType::kF32);
  CHECK(s.optimizer.type == OptimizerType::kAdamW);
  CHECK(s.optimizer.lr == 3e-4);
  CHECK(s.optimizer.beta1 == 0.9);
  CHECK(s.optimizer.beta2 == 0.95);
  CHECK(s.optimizer.eps == 1e-8);
  CHECK(s.optimizer.weight_decay == 0.1);
  CHECK(s.optimizer.grad_clip == 1.0);
  CHECK(s.optimizer.schedule.kind == optim::LrScheduleKind::kConstant);
  CHECK(s.optimizer.schedule.warmup_steps == 0);
  CHECK(s.seed == 0);
  CHECK(s.device == device::DeviceKind::kCpu);
  CHECK_FALSE(s.device_memory_bytes.has_value());
  CHECK(s.threads == 0);
  CHECK_FALSE(s.activation_checkpointing);
  CHECK(s.tiling == 1);
  CHECK(s.eval.every == 0);
  CHECK(s.eval.batches == 4);
  CHECK(s.checkpoint.dir.empty());
  CHECK(s.output.record.empty());
  CHECK(s.output.log_every == 10);

  // The chain seed follows the top-level seed unless data.seed is given; adam defaults to no decay.
  json doc = with("/seed", 99);
  doc["optimizer"] = {{"type", "adam"}};
  const Scenario seeded = parse_scenario(doc, "x.json", test_resolver).value();
  CHECK(seeded.data.chain_seed == 99);
  CHECK(seeded.optimizer.weight_decay == 0.0);
  doc["data"] = {{"seed", 5}};
  CHECK(parse_scenario(doc, "x.json", test_resolver).value().data.chain_seed == 5);
  // Successors default to 8 but never exceed the vocabulary.
  CHECK(parse_scenario(with("/model/vocab", 3), "x.json", test_resolver).value().data.successors == 3);
}

TEST_CASE("to_json echoes every resolved field and round-trips") {
  json doc = minimal();
  doc["data"] = {{"source", "file"}, {"path", "tokens.bin"}};
  doc["precision"] = "fp16";
  doc["loss_scale"] = {{"initial", 1024}, {"growth_interval", 7}};
  doc["device"] = "cuda";
  doc["device_memory"] = "2GiB";
  doc["threads"] = 3;
  doc["tiling"] = 4;
  doc["model"]["bias"] = false;
  doc["model"]["tied_embeddings"] = false;
  doc["checkpoint"] = {{"dir", "ckpt"}, {"every", 5}, {"keep_last", 1}, {"resume", false}};
  doc["eval"] = {{"every", 2}, {"batches", 1}};
  doc["output"] = {{"record", "r.json"}, {"log_every", 1}};
  doc["optimizer"] = {{"schedule", {{"kind", "linear"}, {"warmup_steps", 10}, {"min_lr_ratio", 0.0}}}};
  const Scenario s = parse_scenario(doc, "full.json", test_resolver).value();
  CHECK_FALSE(s.shape.qkv_bias);
  CHECK_FALSE(s.shape.attn_out_bias);
  CHECK_FALSE(s.shape.tied_embeddings);
  CHECK(s.device_memory_bytes == std::optional<std::uint64_t>(2ULL << 30));
  const json echoed = to_json(s);
  CHECK(echoed["device_memory"] == 2ULL << 30);
  CHECK(echoed["data"] == json{{"source", "file"}, {"path", "tokens.bin"}});
  CHECK(echoed["loss_scale"]["growth_interval"] == 7);
  CHECK(echoed["precision"] == "fp16");
  CHECK(echoed["name"] == "full");
  CHECK(parse_scenario(echoed, "other.json", test_resolver).value() == s);

  // Defaults are written out explicitly; loss_scale, checkpoint and device_memory only when in use.
  const json plain = to_json(parse_scenario(minimal(), "m.json", test_resolver).value());
  CHECK(plain["optimizer"]["lr"] == 3e-4);
  CHECK(plain["data"]["seed"] == 0);
  CHECK(plain["model"]["max_positions"] == 64);
  CHECK_FALSE(plain.contains("loss_scale"));
  CHECK_FALSE(plain.contains("checkpoint"));
  CHECK_FALSE(plain.contains("device_memory"));
  CHECK_FALSE(plain["output"].contains("record"));
}

TEST_CASE("a model given as params resolves through the caller's shape rule") {
  json doc = minimal();
  doc["model"] = {{"params", "1M"}, {"vocab", 300}};
  doc["seq"] = 32;
  const Scenario s = parse_scenario(doc, "p.json", test_resolver).value();
  CHECK(s.params_requested == std::optional<std::uint64_t>(1000000));
  CHECK(s.shape.name == "test rule");
  CHECK(s.shape.layers == 5);  // 1e6 / (12·128²) = 5.08
  CHECK(s.shape.hidden == 128);
  CHECK(s.shape.vocab == 300);
  CHECK(s.shape.max_positions == 32);
  CHECK(to_json(s)["model"] == json{{"params", 1000000}, {"vocab", 300}});
  CHECK(parse_scenario(to_json(s), "p.json", test_resolver).value() == s);

  doc["model"] = {{"params", 2000000}};
  CHECK(parse_scenario(doc, "p.json", test_resolver).value().shape.vocab == kScenarioDefaultVocab);

  // The rule's own errors come out under the scenario field, without the CLI flag's name.
  doc["model"] = {{"params", "1K"}};
  CHECK(error_of(doc) == "scenario.model.params: 1000 is below the smallest shape");
  // Without a resolver a params model cannot be used.
  doc["model"] = {{"params", "1M"}};
  const Result<Scenario> unresolved = parse_scenario(doc, "p.json", ShapeResolver{});
  REQUIRE_FALSE(unresolved.is_ok());
  CHECK(unresolved.status().message().find("scenario.model.params: ") == 0);
}

TEST_CASE("bad inputs are refused with the field path, the value and what is allowed") {
  struct Case {
    json doc;
    std::string expected_start;  // the message must start with this
  };
  const std::vector<Case> cases = {
      {with("/batch", "8"), "scenario.batch: expected a positive integer, found \"8\" (string)"},
      {with("/batch", 0), "scenario.batch: expected a positive integer, found 0 (number)"},
      {with("/seq", 8.5), "scenario.seq: expected a positive integer, found 8.5 (number)"},
      {with("/steps", -3), "scenario.steps: expected a positive integer, found -3 (number)"},
      {json::parse(R"({"model": {"layers": 2, "hidden": 64, "heads": 4}})"),
       "scenario.steps: required field is missing"},
      {json::parse(R"({"steps": 3})"), "scenario.model: required field is missing"},
      {with("/optimizr", json::object()), "scenario.optimizr: unknown field (did you mean 'optimizer'?)"},
      {with("/model/heads", 7), "scenario.model.heads: 7 does not divide model.hidden 64"},
      {with("/model/layers", 0), "scenario.model.layers: expected a positive integer, found 0 (number)"},
      {with("/model/layrs", 2), "scenario.model.layrs: unknown field (did you mean 'layers'?)"},
      {with("/model/hidden", nullptr), "scenario.model.hidden: required field is missing"},
      {with("/model/params", "1M"), "scenario.model.layers: not allowed together with model.params"},
      {with("/model/bias", "yes"), "scenario.model.bias: expected true or false, found \"yes\" (string)"},
      {with("/model/max_positions", 32), "scenario.seq: 64 exceeds model.max_positions 32"},
      {with("/model/vocab", 1), "scenario.model.vocab: 1 is too small for data.source \"markov\""},
      {with("/precision", "fp17"),
       "scenario.precision: expected one of fp32, bf16, fp16, found \"fp17\" (string) (did you mean \"fp16\"?)"},
      {with("/precision", "fp64"), "scenario.precision: expected one of fp32, bf16, fp16, found \"fp64\" (string)"},
      {with("/precision", 16), "scenario.precision: expected one of fp32, bf16, fp16, found 16 (number)"},
      {with("/device", "gpu"), "scenario.device: expected one of cpu, cuda, found \"gpu\" (string)"},
      {with("/device_memory", "2 gigs"), "scenario.device_memory: '2 gigs' has an unknown unit 'gigs'"},
      {with("/device_memory", true), "scenario.device_memory: expected a size string"},
      {with("/threads", -1), "scenario.threads: expected a non-negative integer, found -1 (number)"},
      {with("/seed", -1), "scenario.seed: expected a non-negative integer, found -1 (number)"},
      {with("/tiling", 3), "scenario.tiling: 3 does not divide the MLP width 256 (model.ffn_hidden)"},
      {with("/loss_scale", json{{"initial", 1024}}),
       "scenario.loss_scale: only applies to precision fp16 (precision is fp32)"},
      {json::parse(R"({"model": {"layers": 2, "hidden": 64, "heads": 4}, "steps": 3, "precision": "fp16",
                       "loss_scale": {"initial": 0}})"),
       "scenario.loss_scale.initial: expected a number from 1 to 3.4e38 (the largest float), found 0 (number)"},
      // Issue 15: 1e308 used to pass here and fail later under the scaler's own name,
      // "scenario.optimizer.loss_scale.initial_scale".
      {json::parse(R"({"model": {"layers": 2, "hidden": 64, "heads": 4}, "steps": 3, "precision": "fp16",
                       "loss_scale": {"initial": 1e308}})"),
       "scenario.loss_scale.initial: expected a number from 1 to 3.4e38 (the largest float), found 1e+308 (number)"},
      // Issue 15: a tiling the model refuses (more tiles than the smallest tiled linear has output
      // features) was reported without the "scenario." prefix, after the model was half built.
      {with("/tiling", 128), "scenario.tiling: 128 is more than 64, the output features of the smallest tiled linear"},
      {with("/data", json{{"source", "markov"}, {"path", "t.bin"}}),
       "scenario.data.path: only applies to data.source \"file\""},
      {with("/data", json{{"source", "file"}, {"path", "t.bin"}, {"skew", 1}}),
       "scenario.data.skew: only applies to data.source \"markov\""},
      {with("/data", json{{"source", "file"}}), "scenario.data.path: required field is missing"},
      {with("/data", json{{"source", "hdf5"}}),
       "scenario.data.source: expected one of markov, file, found \"hdf5\" (string)"},
      {with("/data/successors", 65), "scenario.data.successors: 65 is too large (at most 64)"},
      {with("/data/skew", 17), "scenario.data.skew: expected a number in [0, 16], found 17 (number)"},
      {with("/optimizer/lr", 0), "scenario.optimizer.lr: expected a number > 0, found 0 (number)"},
      {with("/optimizer/lr", "3e-3"), "scenario.optimizer.lr: expected a number > 0, found \"3e-3\" (string)"},
      {with("/optimizer/beta2", 1.0), "scenario.optimizer.beta2: expected a number in [0, 1), found 1.0 (number)"},
      {with("/optimizer/type", "sgd"), "scenario.optimizer.type: expected one of adamw, adam, found \"sgd\" (string)"},
      {with("/optimizer/grad_clip", -1), "scenario.optimizer.grad_clip: expected a number >= 0"},
      {with("/optimizer/schedule", json{{"kind", "cosin"}}),
       "scenario.optimizer.schedule.kind: expected one of constant, cosine, linear, found \"cosin\" (string) (did you "
       "mean \"cosine\"?)"},
      {with("/optimizer/schedule", json{{"warmup_steps", 11}}),
       "scenario.optimizer.schedule.warmup_steps: 11 exceeds steps 10"},
      {with("/optimizer/schedule", json{{"min_lr_ratio", 2}}),
       "scenario.optimizer.schedule.min_lr_ratio: expected a number in [0, 1], found 2 (number)"},
      {with("/eval", json{{"batches", 0}}), "scenario.eval.batches: expected a positive integer, found 0 (number)"},
      {with("/checkpoint", json{{"every", 5}}), "scenario.checkpoint.dir: required field is missing"},
      {with("/checkpoint", json{{"dir", ""}}),
       "scenario.checkpoint.dir: expected a non-empty string, found \"\" (string)"},
      {with("/checkpoint", json{{"dir", "c"}, {"keep", 1}}), "scenario.checkpoint.keep: unknown field"},
      {with("/output", json{{"log_every", 0}}),
       "scenario.output.log_every: expected a positive integer, found 0 (number)"},
      {with("/output", "runs/x"), "scenario.output: expected a JSON object, found \"runs/x\" (string)"},
      {with("/name", 5), "scenario.name: expected a string, found 5 (number)"},
      {with("/activation_checkpointing", 1),
       "scenario.activation_checkpointing: expected true or false, found 1 (number)"},
      {with("/batch", 1 << 21), "scenario.batch: 2097152 is too large (at most 1048576)"},
      {json::array(), "scenario: expected a JSON object, found [] (array)"},
  };
  for (const Case& c : cases) {
    INFO(c.doc.dump());
    const std::string message = error_of(c.doc);
    CHECK(message.rfind(c.expected_start, 0) == 0);
    if (message.rfind(c.expected_start, 0) != 0) WARN("got: " << message);
  }
}

TEST_CASE("the memory wall: one layer's states and activations") {
  json doc = minimal();  // hidden 64, 4 heads, B 8, T 64
  const Scenario s = parse_scenario(doc, "m.json", test_resolver).value();
  const std::uint64_t layer_params = count_parameters(s.shape).per_layer;
  CHECK(layer_params == 12 * 64 * 64 + 13 * 64);
  const OneLayerDeviceBytes need = one_layer_device_bytes_breakdown(s);
  CHECK(need.model_states == layer_params * 16);
  // One block's activations and backward scratch: 24·C values, 4 norm statistics and one
  // log-sum-exp per head per token, fp32 (every tensor a multiple of 64 bytes here).
  CHECK(need.activations == 8ULL * 64 * (24 * 64 + 4 + 4) * 4);
  CHECK(one_layer_device_bytes(s) == need.model_states + need.activations);
  // Half precision keeps 16 B/param too (2 + 2 + 4 + 4 + 4).
  CHECK(one_layer_device_bytes_breakdown(parse_scenario(with("/precision", "bf16"), "m.json", test_resolver).value())
            .model_states == layer_params * 16);

  // A budget of exactly that much is accepted; one byte less is refused.
  doc["device_memory"] = one_layer_device_bytes(s);
  CHECK(parse_scenario(doc, "m.json", test_resolver).is_ok());
  doc["device_memory"] = one_layer_device_bytes(s) - 1;
  CHECK(error_of(doc).rfind("scenario.device_memory: ", 0) == 0);
  CHECK(error_of(doc).find("is too small for even one layer") != std::string::npos);
}

TEST_CASE("the fingerprint changes with what a checkpoint depends on, and only that") {
  const Scenario base = parse_scenario(minimal(), "f.json", test_resolver).value();
  const std::string print = fingerprint(base);
  CHECK(print.size() == 16);
  CHECK(print.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(fingerprint(base) == print);  // deterministic

  const auto print_of = [](const json& doc) {
    return fingerprint(parse_scenario(doc, "f.json", test_resolver).value());
  };
  // Must match to resume.
  CHECK(print_of(with("/optimizer/lr", 1e-3)) != print);
  CHECK(print_of(with("/batch", 4)) != print);
  CHECK(print_of(with("/seed", 1)) != print);
  CHECK(print_of(with("/model/layers", 3)) != print);
  CHECK(print_of(with("/data/skew", 0.5)) != print);
  CHECK(print_of(with("/precision", "bf16")) != print);
  // Free to change between runs.
  CHECK(print_of(with("/steps", 1000)) == print);
  CHECK(print_of(with("/threads", 2)) == print);
  CHECK(print_of(with("/output", json{{"log_every", 1}})) == print);
  CHECK(print_of(with("/eval", json{{"every", 5}})) == print);
  CHECK(print_of(with("/checkpoint", json{{"dir", "c"}})) == print);
  CHECK(print_of(with("/device_memory", "1GiB")) == print);
  CHECK(print_of(with("/name", "renamed")) == print);
}

}  // namespace
}  // namespace zinf::spec

namespace zinf::spec {
namespace {

TEST_CASE("the zero section: defaults, round trip, placement rules and one-line errors") {
  const Scenario plain = parse_scenario(minimal(), "s.json", test_resolver).value();
  CHECK(plain.zero == ZeroConfig{});
  CHECK_FALSE(plain.zero.partitioned());
  CHECK_FALSE(to_json(plain).contains("zero"));

  json doc = minimal();
  doc["zero"] = {{"params", "nvme"},
                 {"optimizer", "nvme"},
                 {"nvme_paths", {"/tmp/a", "/tmp/b"}},
                 {"host_memory", "8GiB"},
                 {"max_live_bytes", "1GiB"},
                 {"prefetch_bytes", 1 << 20},
                 {"persistence_threshold", 500},
                 {"sub_group_size", 1 << 24}};
  const Scenario offloaded = parse_scenario(doc, "s.json", test_resolver).value();
  CHECK(offloaded.zero.stage == 3);  // a zero section without a stage is the partitioned engine
  CHECK(offloaded.zero.params == Tier::kNvme);
  CHECK(offloaded.zero.grads == Tier::kCpu);  // gradients follow the optimizer
  CHECK(offloaded.zero.optimizer == Tier::kNvme);
  CHECK(offloaded.zero.nvme_paths == std::vector<std::string>{"/tmp/a", "/tmp/b"});
  CHECK(offloaded.zero.host_memory_bytes == (8ull << 30));
  CHECK(offloaded.zero.max_live_bytes == (1ull << 30));
  CHECK(offloaded.zero.prefetch_bytes == (1ull << 20));
  CHECK(offloaded.zero.persistence_threshold == 500);
  CHECK(offloaded.zero.sub_group_size == (1 << 24));
  CHECK(parse_scenario(to_json(offloaded), "echo.json", test_resolver).value() == offloaded);
  // The placement is not part of the fingerprint: a checkpoint resumes under another placement.
  CHECK(fingerprint(offloaded) == fingerprint(plain));
  // The memory wall counts only the states that stay on the device.
  json tight = doc;
  // One layer: 49,984 parameters x 16 B = 799,744 B of states, 512 tokens x 1544 fp32 values =
  // 3,162,112 B of activations.
  tight["device_memory"] = 3500000;
  CHECK(parse_scenario(tight, "s.json", test_resolver).is_ok());
  json device_only = minimal();
  device_only["device_memory"] = 3500000;
  CHECK_FALSE(parse_scenario(device_only, "s.json", test_resolver).is_ok());

  struct Case {
    json zero;
    std::string expected_start;
  };
  const std::vector<Case> cases = {
      {{{"stage", 4}}, "scenario.zero.stage: expected 0, 1, 2 or 3, found 4 (number)"},
      {{{"stage", "3"}}, "scenario.zero.stage: expected 0, 1, 2 or 3, found \"3\" (string)"},
      {{{"params", "disk"}}, "scenario.zero.params: expected \"device\", \"cpu\" or \"nvme\", found \"disk\" (string)"},
      {{{"grads", "nvme"}, {"optimizer", "nvme"}, {"nvme_paths", {"/tmp"}}},
       "scenario.zero.grads: \"nvme\" is not supported for gradients"},
      {{{"grads", "device"}, {"optimizer", "cpu"}},
       "scenario.zero.grads: \"device\" with optimizer on \"cpu\" is not supported; gradients live where the "
       "optimizer steps: \"cpu\""},
      {{{"stage", 0}, {"optimizer", "cpu"}}, "scenario.zero.stage: 0 keeps every state replicated on the device"},
      {{{"stage", 2}, {"params", "cpu"}, {"optimizer", "cpu"}}, "scenario.zero.params: \"cpu\" needs zero.stage 3"},
      {{{"params", "cpu"}}, "scenario.zero.params: \"cpu\" with optimizer on \"device\" is not supported"},
      {{{"optimizer", "nvme"}}, "scenario.zero.nvme_paths: required when a state is on \"nvme\""},
      {{{"optimizer", "cpu"}, {"nvme_paths", {"/tmp"}}},
       "scenario.zero.nvme_paths: given, but no state is on \"nvme\""},
      {{{"optimizer", "nvme"}, {"nvme_paths", json::array()}},
       "scenario.zero.nvme_paths: expected a non-empty list of directories, found [] (array)"},
      {{{"optimizer", "nvme"}, {"nvme_paths", {""}}}, "scenario.zero.nvme_paths[0]: expected a directory path"},
      {{{"host_memory", "lots"}}, "scenario.zero.host_memory: 'lots'"},
      {{{"max_live_bytes", "-1"}}, "scenario.zero.max_live_bytes: '-1'"},
      {{{"max_live_bytes", -5}}, "scenario.zero.max_live_bytes:"},
      {{{"persistence_threshold", -1}}, "scenario.zero.persistence_threshold: expected a number of elements"},
      {{{"sub_group_size", 1.5}},
       "scenario.zero.sub_group_size: expected a number of elements in 0..2^40 (0: derived), found 1.5 (number)"},
      {{{"prefetch", 1}}, "scenario.zero.prefetch: unknown field"},
      // Budgets above 2^60 bytes: 2 x max_live_bytes (the derived prefetch_bytes) would wrap.
      {{{"params", "nvme"}, {"optimizer", "nvme"}, {"nvme_paths", {"/tmp"}}, {"max_live_bytes", 1ull << 63}},
       "scenario.zero.max_live_bytes: 9223372036854775808 bytes (8.00 EiB) is above the limit of 2^60 bytes "
       "(1.00 EiB)"},
      {{{"params", "nvme"},
        {"optimizer", "nvme"},
        {"nvme_paths", {"/tmp"}},
        {"host_memory", "64MiB"},
        {"max_live_bytes", ~0ull}},
       "scenario.zero.max_live_bytes: 18446744073709551615 bytes (16.0 EiB) is above the limit of 2^60 bytes"},
      {{{"prefetch_bytes", "2048PiB"}}, "scenario.zero.prefetch_bytes: 2305843009213693952 bytes"},
      {{{"reduce_bucket_bytes", (1ull << 60) + 1}}, "scenario.zero.reduce_bucket_bytes: 1152921504606846977 bytes"},
      {{{"host_memory", "8192PiB"}}, "scenario.zero.host_memory: 9223372036854775808 bytes"},
  };
  for (const Case& c : cases) {
    json bad = minimal();
    bad["zero"] = c.zero;
    INFO(bad.dump());
    const std::string message = error_of(bad);
    CHECK(message.rfind(c.expected_start, 0) == 0);
    if (message.rfind(c.expected_start, 0) != 0) WARN("got: " << message);
  }
  CHECK(error_of(with("/zero", "cpu")).rfind("scenario.zero: expected a JSON object", 0) == 0);
  // Issue 24: 0 meant an error (device_memory), no budget (host_memory) and derived (the others).
  // One rule now: a size of 0 is the same as leaving the field out, and errors say what that is.
  json zeros = minimal();
  zeros["device_memory"] = 0;
  zeros["zero"] = {{"host_memory", 0}, {"max_live_bytes", "0"}, {"prefetch_bytes", 0}, {"reduce_bucket_bytes", 0}};
  json left_out = minimal();
  left_out["zero"] = json::object();
  const Result<Scenario> zeroed = parse_scenario(zeros, "s.json", test_resolver);
  REQUIRE(zeroed.is_ok());
  const Result<Scenario> absent = parse_scenario(left_out, "s.json", test_resolver);
  REQUIRE(absent.is_ok());
  CHECK_FALSE(zeroed->device_memory_bytes.has_value());
  CHECK(zeroed->zero == absent->zero);
  CHECK(to_json(*zeroed) == to_json(*absent));
  const auto zero_error = [&](const char* pointer, json value) {
    json bad = minimal();
    bad["zero"] = json::object();
    bad[json::json_pointer(pointer)] = std::move(value);
    return error_of(bad);
  };
  const auto ends_with = [](const std::string& text, const std::string& end) {
    INFO(text);
    return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
  };
  CHECK(ends_with(zero_error("/device_memory", "2 gigs"), "; 0 or leaving it out: no budget"));
  CHECK(ends_with(zero_error("/zero/host_memory", "lots"), "; 0 or leaving it out: no budget"));
  for (const char* derived : {"/zero/max_live_bytes", "/zero/prefetch_bytes", "/zero/reduce_bucket_bytes"}) {
    CHECK(ends_with(zero_error(derived, -1), "; 0 or leaving it out: derived"));
  }
  // The unknown-field line lists every field of the section, activations included.
  CHECK(ends_with(zero_error("/zero/activation", "cpu"),
                  "allowed: stage, params, grads, optimizer, nvme_paths, host_memory, prefetch_bytes, max_live_bytes, "
                  "persistence_threshold, overlap_optimizer, reduce_bucket_bytes, sub_group_size, activations"));
  json at_limit = minimal();
  at_limit["zero"] = {{"max_live_bytes", 1ull << 60}, {"reduce_bucket_bytes", 1ull << 60}};
  CHECK(parse_scenario(at_limit, "s.json", test_resolver).is_ok());
}

TEST_CASE("the offload scenarios parse with their placement") {
  const Scenario cpu = load_scenario(kScenariosDir + "/offload-cpu.json", test_resolver).value();
  CHECK(cpu.zero.params == Tier::kCpu);
  CHECK(cpu.zero.optimizer == Tier::kCpu);
  const Scenario nvme = load_scenario(kScenariosDir + "/offload-nvme.json", test_resolver).value();
  CHECK(nvme.zero.params == Tier::kNvme);
  CHECK(nvme.zero.optimizer == Tier::kNvme);
  CHECK(nvme.zero.nvme_paths.size() == 1);
}

}  // namespace
}  // namespace zinf::spec

namespace zinf::spec {
namespace {

TEST_CASE("decoder models: an hf_config with overrides, the arch form, round trips and one-line errors") {
  const Result<Scenario> tiny = load_scenario(kScenariosDir + "/llama-tiny.json", test_resolver);
  INFO(tiny.status().message());
  REQUIRE(tiny.is_ok());
  const ModelShape& s = tiny->shape;
  CHECK(s.name == "zinf/llama-tiny");
  CHECK(s.norm == NormKind::kRmsNorm);
  CHECK(s.mlp == MlpKind::kGated);
  CHECK(s.position == PositionKind::kRotary);
  CHECK(s.kv_heads == 2);
  CHECK(s.head_dim == 32);
  CHECK(s.norm_eps == 1e-6);
  CHECK_FALSE(s.tied_embeddings);
  // to_json writes the arch form with every field; it parses back to the same scenario.
  const json echoed = to_json(*tiny);
  CHECK(echoed["model"]["arch"] == "llama");
  CHECK(echoed["model"]["kv_heads"] == 2);
  CHECK(parse_scenario(echoed, "echo.json", test_resolver).value() == *tiny);
  CHECK(fingerprint(parse_scenario(echoed, "echo.json", test_resolver).value()) == fingerprint(*tiny));

  // Overrides on top of the config, the path relative to the scenario file.
  json doc = minimal();
  doc["model"] = {{"hf_config", "hf/llama-tiny/config.json"}, {"layers", 1}, {"rope_theta", 500000.0}};
  const Scenario overridden = parse_scenario(doc, kScenariosDir + "/x.json", test_resolver).value();
  CHECK(overridden.shape.layers == 1);
  CHECK(overridden.shape.rope.theta == 500000.0);
  CHECK(overridden.shape.hidden == 128);

  // The arch form: the family's defaults, fields over them.
  doc["model"] = {{"arch", "qwen2"}, {"layers", 2}, {"hidden", 64}, {"heads", 4}, {"kv_heads", 1}, {"vocab", 128}};
  const Scenario qwen = parse_scenario(doc, "q.json", test_resolver).value();
  CHECK(qwen.shape.qkv_bias);
  CHECK_FALSE(qwen.shape.mlp_bias);
  CHECK(qwen.shape.head_dim == 16);
  CHECK(qwen.shape.ffn_hidden == 256);
  CHECK(parse_scenario(to_json(qwen), "echo.json", test_resolver).value() == qwen);
  CHECK(fingerprint(qwen) != fingerprint(parse_scenario(minimal(), "m.json", test_resolver).value()));
  // A GPT-2-like scenario's fingerprint and echo are unchanged by the new fields.
  CHECK_FALSE(to_json(parse_scenario(minimal(), "m.json", test_resolver).value())["model"].contains("arch"));

  doc["model"]["norm"] = "batchnorm";
  CHECK(error_of(doc) ==
        "scenario.model.norm: expected one of \"layernorm\", \"rmsnorm\", found \"batchnorm\" (string)");
  doc["model"].erase("norm");
  doc["model"]["kv_heads"] = 3;
  CHECK(error_of(doc) ==
        "scenario.model.kv_heads: 3 does not divide heads 4; grouped-query attention needs heads to be a multiple of "
        "kv_heads");
  doc["model"]["kv_heads"] = 1;
  doc["model"]["arch"] = "falcon";
  CHECK(error_of(doc) ==
        "scenario.model.arch: expected one of \"gpt2\", \"llama\", \"mistral\", \"qwen2\", found \"falcon\" (string)");
  doc["model"] = {{"hf_config", "no/such/config.json"}};
  const Result<Scenario> missing = parse_scenario(doc, "bad.json", test_resolver);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);  // as a missing scenario file
  CHECK_THAT(missing.status().message(), Catch::StartsWith("no/such/config.json"));
  doc["model"] = {{"hf_config", "hf/llama-tiny/config.json"}, {"layerz", 1}};
  CHECK_THAT(error_of(doc), Catch::StartsWith("scenario.model.layerz: unknown field (did you mean 'layers'?)"));
}

}  // namespace
}  // namespace zinf::spec
