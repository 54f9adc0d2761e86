// `zinf train` end to end with the two memory options of issue 12, in process:
// - zero.activations "cpu": the run says where its checkpoints live, records the bytes each way,
//   trains the in-device run's losses bit for bit, and a device budget the in-device checkpoints
//   overflow is refused before step 1 (exit 2, naming scenario.device_memory) but trains with
//   them in host memory;
// - "tiling": "auto": the start line and the record say what was chosen per operator; a run that
//   does not fit zero.max_live_bytes untiled (exit 2 naming it) trains with auto's tiles.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace {

using nlohmann::json;
using zinf::cli::test_support::check_usage_error;
using zinf::cli::test_support::losses_of;
using zinf::cli::test_support::read_text;
using zinf::cli::test_support::run_zinf;
using zinf::testing::TempDir;

json scenario(std::int64_t layers, std::int64_t vocab) {
  return json{{"model", {{"layers", layers}, {"hidden", 32}, {"heads", 4}, {"vocab", vocab}, {"max_positions", 16}}},
              {"data", {{"source", "markov"}, {"successors", 4}, {"skew", 1.0}}},
              {"batch", 4},
              {"seq", 16},
              {"steps", 6},
              {"seed", 3},
              {"threads", 1},
              {"optimizer", {{"lr", 3e-3}}}};
}

}  // namespace

TEST_CASE("train: activation checkpoints in host memory, recorded, bit-identical, and fitting a smaller budget") {
  TempDir dir;
  json offloaded = scenario(6, 64);
  offloaded["activation_checkpointing"] = true;
  offloaded["zero"] = {{"stage", 0}, {"activations", "cpu"}};
  offloaded["output"] = {{"record", dir.path() + "/cpu.json"}};
  const auto o = run_zinf({"train", dir.write("cpu.json", offloaded.dump())});
  INFO("stderr: " << o.err);
  REQUIRE(o.code == 0);
  // 7 checkpoints of [4,16,32] fp32 = 8 KiB, a ring of 3 on the device.
  CHECK(o.err.find("activation checkpoints: 4 of 7 in host memory (8.00 KiB each), 3 device slots") !=
        std::string::npos);
  CHECK(o.out.find("activation checkpoints  4 of 7 in host memory") != std::string::npos);
  const json record = json::parse(read_text(dir.path() + "/cpu.json"));
  const json& checkpoints = record.at("engine").at("activation_checkpoints");
  CHECK(checkpoints.at("tier") == "cpu");
  CHECK(checkpoints.at("in_host_memory") == 4);
  CHECK(checkpoints.at("to_host_bytes_per_step").get<double>() == 4 * 8192.0);
  CHECK(checkpoints.at("to_device_bytes_per_step").get<double>() == 4 * 8192.0);
  CHECK(record.at("engine").at("zero").at("activations") == "cpu");
  CHECK(record.at("steps").at(2).at("engine").at("checkpoint_to_host_bytes") == 4 * 8192);

  json in_device = offloaded;
  in_device["zero"]["activations"] = "device";
  in_device["output"]["record"] = dir.path() + "/device.json";
  REQUIRE(run_zinf({"train", dir.write("device.json", in_device.dump())}).code == 0);
  const json device_record = json::parse(read_text(dir.path() + "/device.json"));
  CHECK(losses_of(device_record) == losses_of(record));
  CHECK(device_record.at("engine").at("activation_checkpoints").at("tier") == "gpu");

  // The offloaded run's device peak as the budget: the in-device checkpoints do not fit it.
  const auto peak = record.at("memory").at("device").at("peak_bytes").get<std::uint64_t>();
  in_device["device_memory"] = peak;
  check_usage_error(run_zinf({"train", dir.write("tight-device.json", in_device.dump())}), "scenario.device_memory:");
  offloaded["device_memory"] = peak;
  CHECK(run_zinf({"train", dir.write("tight-cpu.json", offloaded.dump())}).code == 0);

  json bad = offloaded;
  bad["activation_checkpointing"] = false;
  check_usage_error(run_zinf({"train", dir.write("bad.json", bad.dump())}), "scenario.zero.activations:");
}

TEST_CASE("train: \"tiling\": \"auto\" tiles the vocabulary so a run fits zero.max_live_bytes") {
  TempDir dir;
  // wte [2048,32] fp32 = 256 KiB; zero.max_live_bytes 128 KiB holds two 64 KiB tiles: 4 tiles of
  // 512 rows. The MLP weights (16 KiB) fit untiled.
  json untiled = scenario(2, 2048);
  untiled["zero"] = {{"stage", 3},
                     {"params", "cpu"},
                     {"optimizer", "cpu"},
                     {"max_live_bytes", "128KiB"},
                     {"persistence_threshold", 64}};
  check_usage_error(run_zinf({"train", dir.write("untiled.json", untiled.dump())}), "scenario.zero.max_live_bytes:");
  json automatic = untiled;
  automatic["tiling"] = "auto";
  automatic["output"] = {{"record", dir.path() + "/auto.json"}};
  const auto o = run_zinf({"train", dir.write("auto.json", automatic.dump())});
  INFO("stderr: " << o.err);
  REQUIRE(o.code == 0);
  CHECK(o.err.find("tiling: auto: mlp.fc 1, mlp.proj 1, head 4, embedding 4 (each tile at most half of "
                   "zero.max_live_bytes 128 KiB)") != std::string::npos);
  const json record = json::parse(read_text(dir.path() + "/auto.json"));
  CHECK(record.at("engine").at("tiling").at("per_operator") ==
        json{{"mlp_fc", 1}, {"mlp_proj", 1}, {"head", 4}, {"embedding", 4}});
  CHECK(record.at("scenario").at("tiling") == "auto");
}
