// `zinf bench comm` (bench_comm.h): flags into a validated CommBenchConfig (every error naming its
// flag), --ranks through the rank spawner, and the table, CSV and zinf.bench-comm/1 record from rank 0.
#include "apps/zinf/bench_comm.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/zinf/output.h"
#include "apps/zinf/rank_spawner.h"
#include "libengine/core/split.h"
#include "libengine/core/units.h"
#include "probes/comm_bench_runner.h"
#include "probes/latency_stats.h"
#include "reports/record_envelope.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::comm_op_name;
using probes::CommBenchConfig;
using probes::CommBenchResult;
using probes::CommBenchRow;
using probes::CommBenchSide;
using probes::CommOp;
using probes::run_comm_bench;
using probes::SampleSpread;
using probes::spread_of;

namespace {

using nlohmann::json;

constexpr double kTargetRatio = 0.9;                   // acceptance: busbw(zinf) >= 0.9 x busbw(MPI)
constexpr std::uint64_t kMaxBytes = 4ull << 30;        // one buffer per side: a bound a laptop survives
constexpr std::uint64_t kRatioFromBytes = 1ull << 20;  // sizes whose ratio counts in the summary
constexpr std::int64_t kMaxIters = 100000;

Result<std::vector<CommOp>> parse_ops(const std::string& text) {
  std::vector<CommOp> ops;
  for (const std::string_view item : split(text, ',')) {
    if (item == "all_gather") {
      ops.push_back(CommOp::kAllGather);
    } else if (item == "reduce_scatter") {
      ops.push_back(CommOp::kReduceScatter);
    } else if (item == "all_reduce") {
      ops.push_back(CommOp::kAllReduce);
    } else if (item == "all") {
      ops.insert(ops.end(), {CommOp::kAllGather, CommOp::kReduceScatter, CommOp::kAllReduce});
    } else {
      return Status::invalid_argument(
          fmt::format("--ops: '{}' is not one of all_gather, reduce_scatter, all_reduce, all (comma-separated)", item));
    }
  }
  if (ops.empty()) return Status::invalid_argument("--ops: '' is empty; expected e.g. all_gather,all_reduce");
  return ops;
}

std::string us_text(double us) { return us >= 100 ? fmt::format("{:.0f}", us) : fmt::format("{:.1f}", us); }
std::string gbps_text(double gbps) { return fmt::format("{:.2f}", gbps); }

class BenchCommCommand final : public Subcommand {
 public:
  explicit BenchCommCommand(CLI::App& bench) {
    cmd_ = bench.add_subcommand("comm",
                                "Collective bus bandwidth through zinf's MPI communicator next to plain MPI calls on "
                                "the same buffers (nccl-tests style); run under mpirun or with --ranks N");
    cmd_->add_option("--ops", ops_text_, "Comma list of all_gather, reduce_scatter, all_reduce (default all)")
        ->type_name("LIST");
    cmd_->add_option("--min-bytes", min_text_, "Smallest operation size (default 1KiB)")->type_name("SIZE");
    cmd_->add_option("--max-bytes", max_text_, "Largest operation size, doubling from --min-bytes (default 64MiB)")
        ->type_name("SIZE");
    cmd_->add_option("--dtype", dtype_text_, "fp32, bf16 or fp16 (default fp32)")->type_name("TYPE");
    cmd_->add_option("--iters", iters_text_, "Timed calls per repetition, at least (default 10)")->type_name("N");
    cmd_->add_option("--min-repetition-ms", min_rep_text_,
                     "Sizes whose --iters calls take less get more calls, as many as fill this (default 10; 0: "
                     "exactly --iters)")
        ->type_name("MS");
    cmd_->add_option("--warmup", warmup_text_, "Untimed calls per size and side (default 2)")->type_name("N");
    cmd_->add_option("--repeat", repeat_text_, "Repetitions per side, alternating; the median is reported (default 3)")
        ->type_name("N");
    cmd_->add_option("--timeout", timeout_text_, "Longest wait for a peer in one collective, seconds (default 300)")
        ->type_name("S");
    cmd_->add_option("--inline-max-bytes", inline_text_,
                     "zinf's all-gathers up to this size run on the calling thread when the collective stream is "
                     "idle; 0: every one goes through the stream's thread (default 1MiB)")
        ->type_name("SIZE");
    cmd_->add_option("--inline-max-reduce-bytes", inline_reduce_text_,
                     "The same for reduce_scatter and all_reduce (default 128KiB)")
        ->type_name("SIZE");
    cmd_->add_option("--ranks", ranks_text_, "Start mpirun with N ranks on this machine and run there")->type_name("N");
    add_output_options(*cmd_, output_);
  }

  Status run(const Io& io) override;
  std::optional<int> delegated_exit_code() const override { return delegated_; }

 private:
  Status configure(CommBenchConfig& config) const;
  // Used only where MPI is built in (ZINF_CLI_WITH_MPI); without it, unused but kept compiling.
  [[maybe_unused]] Rendered render(const CommBenchConfig& config, const CommBenchResult& result,
                                   const reports::ConditionsSnapshot& started) const;

  CLI::App* cmd_ = nullptr;
  std::string ops_text_ = "all";
  std::string min_text_ = "1KiB";
  std::string max_text_ = "64MiB";
  std::string dtype_text_ = "fp32";
  std::string iters_text_ = "10";
  std::string min_rep_text_ = "10";
  std::string warmup_text_ = "2";
  std::string repeat_text_ = "3";
  std::string timeout_text_ = "300";
  std::string inline_text_;         // empty: CommOptions' default
  std::string inline_reduce_text_;  // empty: CommOptions' default
  std::string ranks_text_;
  OutputOptions output_;
  std::optional<int> delegated_;
};

Status BenchCommCommand::configure(CommBenchConfig& config) const {
  ZINF_ASSIGN_OR_RETURN(config.ops, parse_ops(ops_text_));
  ZINF_ASSIGN_OR_RETURN(config.min_bytes, parse_bytes(min_text_, "--min-bytes"));
  ZINF_ASSIGN_OR_RETURN(config.max_bytes, parse_bytes(max_text_, "--max-bytes"));
  if (config.max_bytes > kMaxBytes) {
    return Status::invalid_argument(
        fmt::format("--max-bytes: '{}' is more than {}", max_text_, format_bytes(static_cast<double>(kMaxBytes))));
  }
  if (config.min_bytes > config.max_bytes) {
    return Status::invalid_argument(
        fmt::format("--min-bytes: '{}' is larger than --max-bytes '{}'", min_text_, max_text_));
  }
  const std::optional<DType> dtype = dtype_from_name(dtype_text_);
  if (!dtype) return Status::invalid_argument(fmt::format("--dtype: '{}' is not one of fp32, bf16, fp16", dtype_text_));
  config.dtype = *dtype;
  // A size is a number of elements: one that is not whole would be measured as another size.
  const std::uint64_t element = dtype_size_bytes(config.dtype);
  for (const auto& [flag, text, bytes] : {std::tuple{"--min-bytes", min_text_, config.min_bytes},
                                          std::tuple{"--max-bytes", max_text_, config.max_bytes}}) {
    if (bytes % element != 0) {
      return Status::invalid_argument(fmt::format("{}: '{}' is not a whole number of {} elements ({} bytes each)", flag,
                                                  text, dtype_name(config.dtype), element));
    }
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t iters, parse_positive_int(iters_text_, "--iters", kMaxIters));
  ZINF_ASSIGN_OR_RETURN(const std::uint64_t warmup, parse_count(warmup_text_, "--warmup", ZeroIs::kAllowed));
  if (warmup > static_cast<std::uint64_t>(kMaxIters)) {
    return Status::invalid_argument(fmt::format("--warmup: '{}' is more than {}", warmup_text_, kMaxIters));
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t repeat, parse_positive_int(repeat_text_, "--repeat", 1000));
  ZINF_ASSIGN_OR_RETURN(const std::int64_t timeout_s, parse_positive_int(timeout_text_, "--timeout", 86400));
  ZINF_ASSIGN_OR_RETURN(const std::uint64_t min_rep_ms,
                        parse_count(min_rep_text_, "--min-repetition-ms", ZeroIs::kAllowed));
  if (min_rep_ms > 10000) {
    return Status::invalid_argument(fmt::format("--min-repetition-ms: '{}' is more than 10000", min_rep_text_));
  }
  config.iters = static_cast<int>(iters);
  config.min_repetition_seconds = static_cast<double>(min_rep_ms) * 1e-3;
  config.warmup = static_cast<int>(warmup);
  config.repeat = static_cast<int>(repeat);
  config.timeout = std::chrono::seconds(timeout_s);
  if (!inline_text_.empty()) {
    ZINF_ASSIGN_OR_RETURN(config.inline_max_bytes, parse_bytes(inline_text_, "--inline-max-bytes", ZeroIs::kAllowed));
  }
  if (!inline_reduce_text_.empty()) {
    ZINF_ASSIGN_OR_RETURN(config.inline_max_reduce_bytes,
                          parse_bytes(inline_reduce_text_, "--inline-max-reduce-bytes", ZeroIs::kAllowed));
  }
  return Status::ok();
}

Status BenchCommCommand::run(const Io& io) {
  CommBenchConfig config;
  ZINF_RETURN_IF_ERROR(configure(config));
  ZINF_RETURN_IF_ERROR(output_format(output_).status());
  if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));
  if (!ranks_text_.empty()) {
    ZINF_ASSIGN_OR_RETURN(const int ranks, parse_ranks(ranks_text_));
    const std::vector<std::string> args = args_without_ranks(*cmd_);
    ZINF_ASSIGN_OR_RETURN(delegated_, spawn_ranks(ranks, args));
    return Status::ok();
  }
#if ZINF_CLI_WITH_MPI
  ZINF_ASSIGN_OR_RETURN(const CommBenchResult result, run_comm_bench(config, [&io](const std::string& line) {
                          io.err << "bench comm: " << line << '\n';
                        }));
  if (result.rank != 0) return Status::ok();  // rank 0 prints and writes
  return emit(output_, render(config, result, io.started), io);
#else
  (void)io;
  return Status::invalid_argument(
      "bench comm: this zinf was built without MPI; install libopenmpi-dev (scripts/install-deps.sh) and rebuild");
#endif
}

Rendered BenchCommCommand::render(const CommBenchConfig& config, const CommBenchResult& result,
                                  const reports::ConditionsSnapshot& started) const {
  Rendered out;
  json rows = json::array();
  std::vector<double> counted;  // ratios of the sizes >= kRatioFromBytes, every repetition
  for (const CommBenchRow& row : result.rows) {
    const SampleSpread ratio = spread_of(row.ratio);
    if (row.bytes >= kRatioFromBytes) counted.insert(counted.end(), row.ratio.begin(), row.ratio.end());
    auto side_json = [](const CommBenchSide& side) {
      return json{{"time_us", side.time_us},
                  {"time_us_median", side.time_us_median},
                  {"algbw_gbps", side.algbw_gbps},
                  {"busbw_gbps", side.busbw_gbps},
                  {"wrong", side.wrong}};
    };
    rows.push_back(
        {{"op", comm_op_name(row.op)},
         {"size_bytes", row.bytes},
         {"count", row.count},
         {"iters", row.iters},
         {"zinf", side_json(row.ours)},
         {"mpi", side_json(row.mpi)},
         {"busbw_ratio", {{"median", ratio.median}, {"min", ratio.min}, {"max", ratio.max}, {"samples", row.ratio}}}});
  }
  const bool has_summary = !counted.empty();
  const SampleSpread summary = has_summary ? spread_of(counted) : SampleSpread{};

  out.record = reports::make_record_envelope("bench-comm", 1, started);
  out.record["ranks"] = {{"world_size", result.world_size}, {"local_size", result.local_size}};
  out.record["mpi"] = {{"library", result.mpi_library}, {"thread_level", result.thread_level}};
  out.record["config"] = {{"dtype", dtype_name(config.dtype)},
                          {"min_bytes", config.min_bytes},
                          {"max_bytes", config.max_bytes},
                          {"iters", config.iters},
                          {"min_repetition_ms", config.min_repetition_seconds * 1e3},
                          {"warmup", config.warmup},
                          {"repeat", config.repeat},
                          {"inline_max_bytes", config.inline_max_bytes},
                          {"inline_max_reduce_bytes", config.inline_max_reduce_bytes}};
  out.record["rows"] = rows;
  out.record["target_ratio"] = kTargetRatio;
  if (has_summary) {
    out.record["busbw_ratio_from_1MiB"] = {{"median", summary.median}, {"min", summary.min}, {"max", summary.max}};
  }

  out.document.title = "zinf bench comm";
  reports::Section setup;
  setup.title = "Setup";
  setup.fields.emplace_back("ranks", fmt::format("{} ({} on this node)", result.world_size, result.local_size));
  setup.fields.emplace_back("MPI", fmt::format("{}, {}", result.mpi_library, result.thread_level));
  setup.fields.emplace_back(
      "runs", fmt::format("{} warm-up + {} repetitions x at least {} calls per size and side (more where they take "
                          "under {:g} ms: rows' iters in the record), alternating zinf / MPI and which goes first; "
                          "time = slowest rank's mean per call",
                          config.warmup, config.repeat, config.iters, config.min_repetition_seconds * 1e3));
  auto bound = [](std::uint64_t bytes) {
    return bytes == 0 ? std::string("none") : format_bytes(static_cast<double>(bytes));
  };
  setup.fields.emplace_back("inline",
                            fmt::format("zinf collectives run on the calling thread while the stream is idle up to {} "
                                        "(all_gather), {} (reduce_scatter, all_reduce); larger ones through its thread",
                                        bound(config.inline_max_bytes), bound(config.inline_max_reduce_bytes)));
  out.document.sections.push_back(std::move(setup));

  reports::Section table;
  table.title = "Bus bandwidth (GB/s): zinf's Communicator vs plain blocking MPI on the same buffers";
  table.table.columns = {{"op"},
                         {"size", reports::Align::kRight},
                         {"count", reports::Align::kRight},
                         {"type"},
                         {"time_us", reports::Align::kRight},
                         {"algbw", reports::Align::kRight},
                         {"busbw", reports::Align::kRight},
                         {"#wrong", reports::Align::kRight},
                         {"MPI time_us", reports::Align::kRight},
                         {"MPI busbw", reports::Align::kRight},
                         {"MPI #wrong", reports::Align::kRight},
                         {"zinf/MPI", reports::Align::kRight},
                         {"spread", reports::Align::kRight}};
  for (const CommBenchRow& row : result.rows) {
    const SampleSpread ratio = spread_of(row.ratio);
    table.table.rows.push_back(
        {comm_op_name(row.op), format_bytes(static_cast<double>(row.bytes)), std::to_string(row.count),
         std::string(dtype_name(config.dtype)), us_text(row.ours.time_us_median), gbps_text(row.ours.algbw_gbps),
         reports::Cell(gbps_text(row.ours.busbw_gbps), reports::Emphasis::kStrong), std::to_string(row.ours.wrong),
         us_text(row.mpi.time_us_median), gbps_text(row.mpi.busbw_gbps), std::to_string(row.mpi.wrong),
         reports::Cell(fmt::format("{:.2f}x", ratio.median),
                       ratio.median >= kTargetRatio ? reports::Emphasis::kGood : reports::Emphasis::kBad),
         fmt::format("{:.2f}-{:.2f}", ratio.min, ratio.max)});
  }
  if (has_summary) {
    table.fields.emplace_back(
        "zinf/MPI from 1 MiB",
        reports::Cell(fmt::format("{:.2f}x median ({:.2f}-{:.2f} over sizes and repetitions; target >= {:.1f}x)",
                                  summary.median, summary.min, summary.max, kTargetRatio),
                      summary.median >= kTargetRatio ? reports::Emphasis::kGood : reports::Emphasis::kBad));
  }
  table.notes.push_back("#wrong: elements that differ from the closed form (rank r contributes r + 1), all ranks");
  out.document.sections.push_back(std::move(table));

  out.csv.columns = {{"op"},          {"size_bytes"},     {"count"},      {"dtype"},
                     {"time_us"},     {"algbw_gbps"},     {"busbw_gbps"}, {"wrong"},
                     {"mpi_time_us"}, {"mpi_busbw_gbps"}, {"mpi_wrong"},  {"busbw_ratio"}};
  for (const CommBenchRow& row : result.rows) {
    out.csv.rows.push_back({comm_op_name(row.op), std::to_string(row.bytes), std::to_string(row.count),
                            std::string(dtype_name(config.dtype)), fmt::format("{:.3f}", row.ours.time_us_median),
                            fmt::format("{:.4f}", row.ours.algbw_gbps), fmt::format("{:.4f}", row.ours.busbw_gbps),
                            std::to_string(row.ours.wrong), fmt::format("{:.3f}", row.mpi.time_us_median),
                            fmt::format("{:.4f}", row.mpi.busbw_gbps), std::to_string(row.mpi.wrong),
                            fmt::format("{:.4f}", spread_of(row.ratio).median)});
  }
  return out;
}

}  // namespace

std::unique_ptr<Subcommand> add_bench_comm_command(CLI::App& bench) {
  return std::make_unique<BenchCommCommand>(bench);
}

}  // namespace zinf::cli
