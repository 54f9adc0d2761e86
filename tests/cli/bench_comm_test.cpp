// `zinf bench comm`: bad flags are one error line and exit 2 (in-process); the real binary under
// `--ranks 2` (the spawner starts mpirun) and under a plain `mpirun -np 3` measures every op with
// no wrong element on either side, and rank 0 alone prints and writes the zinf.bench-comm/1 record.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/process.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::ProcessOutput;
using probes::run_process;

namespace {

using test_support::check_usage_error;
using test_support::run_zinf;

TEST_CASE("bench comm: bad flags are one line and exit 2") {
  check_usage_error(run_zinf({"bench", "comm", "--ops", "all_gather,gossip"}),
                    "--ops: 'gossip' is not one of all_gather, reduce_scatter, all_reduce, all");
  check_usage_error(run_zinf({"bench", "comm", "--ops", ""}), "--ops: ");
  check_usage_error(run_zinf({"bench", "comm", "--min-bytes", "1MiB", "--max-bytes", "1KiB"}),
                    "--min-bytes: '1MiB' is larger than --max-bytes '1KiB'");
  check_usage_error(run_zinf({"bench", "comm", "--max-bytes", "lots"}), "--max-bytes");
  check_usage_error(run_zinf({"bench", "comm", "--max-bytes", "1TiB"}), "--max-bytes: '1TiB' is more than");
  check_usage_error(run_zinf({"bench", "comm", "--min-bytes", "0"}), "--min-bytes");
  check_usage_error(run_zinf({"bench", "comm", "--dtype", "int8"}), "--dtype: 'int8' is not one of fp32, bf16, fp16");
  // Sizes are whole elements: 3 bytes of bf16 would be measured as 2 (below the minimum).
  check_usage_error(run_zinf({"bench", "comm", "--min-bytes", "3", "--max-bytes", "8", "--dtype", "bf16"}),
                    "--min-bytes: '3' is not a whole number of bf16 elements (2 bytes each)");
  check_usage_error(run_zinf({"bench", "comm", "--min-bytes", "4", "--max-bytes", "7", "--dtype", "bf16"}),
                    "--max-bytes: '7' is not a whole number of bf16 elements (2 bytes each)");
  check_usage_error(run_zinf({"bench", "comm", "--min-bytes", "6", "--max-bytes", "64"}),
                    "--min-bytes: '6' is not a whole number of fp32 elements (4 bytes each)");
  check_usage_error(run_zinf({"bench", "comm", "--iters", "0"}), "--iters");
  check_usage_error(run_zinf({"bench", "comm", "--min-repetition-ms", "soon"}), "--min-repetition-ms: 'soon'");
  check_usage_error(run_zinf({"bench", "comm", "--min-repetition-ms", "-1"}), "--min-repetition-ms");
  check_usage_error(run_zinf({"bench", "comm", "--min-repetition-ms", "20000"}),
                    "--min-repetition-ms: '20000' is more than 10000");
  check_usage_error(run_zinf({"bench", "comm", "--ranks", "0"}), "--ranks");
  check_usage_error(run_zinf({"bench", "comm", "--ranks", "four"}), "--ranks");
  check_usage_error(run_zinf({"bench", "comm", "--ranks", "5000"}), "--ranks");
  check_usage_error(run_zinf({"bench", "comm", "--timeout", "-1"}), "--timeout");
  check_usage_error(run_zinf({"bench", "comm", "--format", "xml"}), "--format");
  check_usage_error(run_zinf({"bench", "comm", "--inline-max-bytes", "some"}), "--inline-max-bytes");
  check_usage_error(run_zinf({"bench", "comm", "--inline-max-reduce-bytes", "-1"}), "--inline-max-reduce-bytes");
}

// `inline_max_bytes`: the bound the record must show for every op (0: inline off), or none for the
// defaults (1 MiB all_gather, 128 KiB reductions).
void check_record(const nlohmann::json& record, int world, const std::string& dtype,
                  std::optional<std::uint64_t> inline_max_bytes) {
  CHECK(record["schema"] == "zinf.bench-comm/1");
  CHECK(record["ranks"]["world_size"] == world);
  CHECK(record["config"]["dtype"] == dtype);
  CHECK(record["config"]["inline_max_bytes"] == inline_max_bytes.value_or(1 << 20));
  CHECK(record["config"]["inline_max_reduce_bytes"] == inline_max_bytes.value_or(128 << 10));
  // 64 KiB .. 256 KiB, doubling, for each of the three ops.
  REQUIRE(record["rows"].size() == 9);
  for (const nlohmann::json& row : record["rows"]) {
    INFO(row.dump());
    CHECK(row["zinf"]["wrong"] == 0);
    CHECK(row["mpi"]["wrong"] == 0);
    CHECK(row["zinf"]["busbw_gbps"].get<double>() > 0.0);
    CHECK(row["mpi"]["busbw_gbps"].get<double>() > 0.0);
    CHECK(row["busbw_ratio"]["samples"].size() == 2);
  }
  CHECK(record["rows"][0]["op"] == "all_gather");
  // all_gather splits the size over the ranks: 64 KiB rounded up to whole elements per rank (at 3
  // ranks 65544 bytes), never below --min-bytes.
  const int elem = dtype == "fp32" ? 4 : 2;
  CHECK(record["rows"][0]["size_bytes"] == (65536 / elem + world - 1) / world * world * elem);
  for (const nlohmann::json& row : record["rows"]) CHECK(row["size_bytes"].get<std::uint64_t>() >= 65536);
  CHECK(record["rows"][8]["op"] == "all_reduce");
  CHECK(record["rows"][8]["size_bytes"] == 262144);
}

TEST_CASE("bench comm: --ranks 2 runs under mpirun and rank 0 writes the record") {
  testing::TempDir dir;
  const std::string out = dir.path() + "/comm.json";
  const std::vector<std::string> argv = {ZINF_BINARY, "bench",
                                         "comm",      "--ranks",
                                         "2",         "--min-bytes",
                                         "64KiB",     "--max-bytes",
                                         "256KiB",    "--iters",
                                         "3",         "--repeat",
                                         "2",         "--dtype",
                                         "bf16",      "--format",
                                         "json",      "--out",
                                         out,         "--inline-max-bytes",
                                         "0",         "--inline-max-reduce-bytes",
                                         "0"};  // all through the stream's thread
  Result<ProcessOutput> run = run_process(argv);
  REQUIRE(run.is_ok());
  INFO("stderr: " << run->err);
  REQUIRE(run->exit_status == 0);
  check_record(nlohmann::json::parse(test_support::read_text(out)), 2, "bf16", 0);
}

TEST_CASE("bench comm: a plain mpirun -np 3 prints one table, from rank 0") {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::vector<std::string> argv = {
      ZINF_MPIEXEC,  "--oversubscribe", "-np",     "3", ZINF_BINARY, "bench", "comm",     "--min-bytes", "64KiB",
      "--max-bytes", "256KiB",          "--iters", "3", "--repeat",  "2",     "--format", "json"};
  Result<ProcessOutput> run = run_process(argv);
  REQUIRE(run.is_ok());
  INFO("stderr: " << run->err);
  REQUIRE(run->exit_status == 0);
  check_record(nlohmann::json::parse(run->out), 3, "fp32", std::nullopt);  // one JSON document: rank 0's only
}

}  // namespace
}  // namespace zinf::cli
