// spec::choose_tiling ("tiling": "auto") against hand-computed smallest factors for a given budget,
// cross-checked by a linear scan; the padding of a tile's element count; the errors when a
// parameter that is not tiled cannot fit; validate_tiling; and the scenario's "tiling" field:
// "auto" resolved against zero.max_live_bytes, untiled with resident parameters, round trip.
#include "libengine/spec/operator_tiling.h"

#include <nlohmann/json.hpp>

#include "libengine/spec/scenario.h"
#include "tests/catch.h"

namespace zinf::spec {
namespace {

using nlohmann::json;

// C 64, F 256, V 1000, maxT 64, untied: qkv [192,64], attn.proj [64,64], wpe [64,64].
ModelShape shape(bool tied) {
  ModelShape s = gpt_like_shape(2, 64, 2, 1000, 64);
  s.tied_embeddings = tied;
  return s;
}

TEST_CASE("operator tiling: largest tile bytes, padded like the partitioner's slices") {
  CHECK(largest_tile_bytes(1000, 64, 6, 4) == 167 * 64 * 4);  // ceil(1000/6) = 167 rows
  CHECK(largest_tile_bytes(5, 7, 2, 4) == 32 * 4);            // 3 rows · 7 = 21 elements → 32
  CHECK(largest_tile_bytes(256, 64, 1, 2) == 256 * 64 * 2);
}

TEST_CASE("operator tiling: auto picks the hand-computed smallest factor per operator") {
  // 96 KiB: each gathered tile may take half, 49152 B = 12288 fp32 values.
  //   mlp.fc   [256,64]: ceil(256/t)·64  <= 12288 → ceil(256/t) <= 192 → t = 2 (128 rows)
  //   mlp.proj [64,256]: ceil(64/t)·256  <= 12288 → ceil(64/t)  <= 48  → t = 2 (32 rows)
  //   head, embedding [1000,64]: ceil(1000/t) <= 192 → t = 6 (167 rows; t = 5 gives 200)
  //   qkv [192,64] = 12288 values: fits exactly, untiled.
  for (const bool tied : {false, true}) {
    INFO("tied " << tied);
    Result<OperatorTiling> chosen = choose_tiling(shape(tied), 4, 96 * 1024, "scenario.tiling");
    INFO(chosen.status().message());
    REQUIRE(chosen.is_ok());
    CHECK(chosen.value() == OperatorTiling{2, 2, 6, 6});
    CHECK(validate_tiling(chosen.value(), shape(tied), "tiling").is_ok());
  }
  // bf16: 24576 elements per half budget → fc ceil(256/t) <= 384: 1; proj ceil(64/t) <= 96: 1;
  // head ceil(1000/t) <= 384 → t = 3 (334 rows).
  Result<OperatorTiling> bf16 = choose_tiling(shape(false), 2, 96 * 1024, "scenario.tiling");
  REQUIRE(bf16.is_ok());
  CHECK(bf16.value() == OperatorTiling{1, 1, 3, 3});
}

TEST_CASE("operator tiling: the choice is the smallest that fits, by a linear scan") {
  const ModelShape s = shape(false);
  for (const std::uint64_t budget : {96u * 1024, 100u * 1024, 131072u, 200000u, 1u << 20}) {
    INFO("budget " << budget);
    Result<OperatorTiling> chosen = choose_tiling(s, 4, budget, "tiling");
    REQUIRE(chosen.is_ok());
    const struct {
      std::int64_t out, in, tiles;
    } ops[] = {{256, 64, chosen.value().mlp_fc},
               {64, 256, chosen.value().mlp_proj},
               {1000, 64, chosen.value().head},
               {1000, 64, chosen.value().embedding}};
    for (const auto& op : ops) {
      std::int64_t smallest = 1;
      while (2 * largest_tile_bytes(op.out, op.in, smallest, 4) > budget) ++smallest;
      CHECK(op.tiles == smallest);
    }
  }
}

TEST_CASE("operator tiling: a parameter that is not tiled and does not fit is named") {
  // 64 KiB: half is 32 KiB, and qkv [192,64] fp32 is 48 KiB.
  Result<OperatorTiling> chosen = choose_tiling(shape(false), 4, 64 * 1024, "scenario.tiling");
  REQUIRE_FALSE(chosen.is_ok());
  CHECK(chosen.status().message() ==
        "scenario.tiling: \"auto\" cannot fit blocks.*.attn.qkv.weight (48.0 KiB, not tiled) in half of "
        "zero.max_live_bytes (32.0 KiB); raise zero.max_live_bytes to at least 96.0 KiB");
}

TEST_CASE("operator tiling: validate_tiling") {
  CHECK(validate_tiling({1, 1, 1000, 1000}, shape(false), "tiling").is_ok());
  CHECK(validate_tiling({1, 65, 1, 1}, shape(false), "tiling").message() ==
        "tiling: 65 tiles of mlp.proj is not in 1..64 (its output features)");
  CHECK(validate_tiling({1, 1, 2, 3}, shape(true), "tiling").message() ==
        "tiling: the head is tied to wte, so it has the embedding's tiles (head 2, embedding 3)");
  CHECK(OperatorTiling::uniform(4, true) == OperatorTiling{4, 4, 1, 1});
  CHECK(OperatorTiling::uniform(4, false) == OperatorTiling{4, 4, 4, 1});
}

json scenario(const json& tiling, const json& zero) {
  json out{{"model", {{"layers", 2}, {"hidden", 64}, {"heads", 2}, {"vocab", 1000}, {"max_positions", 64}}},
           {"steps", 2},
           {"seq", 16},
           {"tiling", tiling}};
  if (!zero.is_null()) out["zero"] = zero;
  return out;
}

TEST_CASE("scenario tiling \"auto\": resolved against zero.max_live_bytes, errors name the field") {
  const json offloaded{{"stage", 3}, {"params", "cpu"}, {"optimizer", "cpu"}, {"max_live_bytes", 96 * 1024}};
  Result<Scenario> parsed = parse_scenario(scenario("auto", offloaded), "t.json", {});
  INFO(parsed.status().message());
  REQUIRE(parsed.is_ok());
  CHECK(parsed.value().tiling_auto);
  CHECK(parsed.value().operator_tiling == OperatorTiling{2, 2, 6, 6});
  CHECK(describe_choice(parsed.value().operator_tiling, true, parsed.value().zero) ==
        "auto: mlp.fc 2, mlp.proj 2, head 6, embedding 6 (each tile at most half of zero.max_live_bytes 96.0 KiB)");
  // Round trip: "auto" is written back and chooses the same.
  Result<Scenario> again = parse_scenario(to_json(parsed.value()), "t.json", {});
  REQUIRE(again.is_ok());
  CHECK(again.value() == parsed.value());
  CHECK(to_json(parsed.value())["tiling"] == "auto");

  // Resident parameters: nothing to shrink, every operator untiled.
  Result<Scenario> resident = parse_scenario(scenario("auto", json{{"stage", 0}}), "t.json", {});
  REQUIRE(resident.is_ok());
  CHECK(resident.value().operator_tiling == OperatorTiling{});

  json no_budget = offloaded;
  no_budget.erase("max_live_bytes");
  Result<Scenario> missing = parse_scenario(scenario("auto", no_budget), "t.json", {});
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message() ==
        "scenario.tiling: \"auto\" sizes the tiles against zero.max_live_bytes (the device bytes of gathered "
        "parameters); give zero.max_live_bytes or a tiling factor");
  Result<Scenario> word = parse_scenario(scenario("most", offloaded), "t.json", {});
  REQUIRE_FALSE(word.is_ok());
  CHECK(word.status().message() == "scenario.tiling: expected a positive integer or \"auto\", found \"most\" (string)");
  json small = offloaded;
  small["max_live_bytes"] = 64 * 1024;
  Result<Scenario> too_small = parse_scenario(scenario("auto", small), "t.json", {});
  REQUIRE_FALSE(too_small.is_ok());
  CHECK_THAT(too_small.status().message(),
             Catch::StartsWith("scenario.tiling: \"auto\" cannot fit blocks.*.attn.qkv.weight"));
  // An integer keeps its meaning: the MLP linears and the untied head.
  Result<Scenario> fixed = parse_scenario(scenario(4, offloaded), "t.json", {});
  REQUIRE(fixed.is_ok());
  CHECK(fixed.value().operator_tiling == OperatorTiling{4, 4, 1, 1});  // tied by default
}

}  // namespace
}  // namespace zinf::spec
