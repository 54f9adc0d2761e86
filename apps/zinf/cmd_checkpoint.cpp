// `zinf checkpoint ls DIR` and `zinf checkpoint verify DIR [--step N]`: what a checkpoint directory
// holds and whether it can be resumed from, without a scenario. `ls` lists every complete
// checkpoint (a set with its manifest, or a plain file) with its step, world size, placement and
// size, checking what is cheap: the manifest and every shard's header against it (step,
// fingerprint, set id, rank, world size, size, header CRC). `verify` does the same and reads every
// byte, checking every array's CRC-32C and that the padding is zeros; exit 0 when every checkpoint it looked at is
// valid, 1 when one is not (one line per problem, naming the file), 2 for bad usage (no such directory or step). The
// run fingerprint is checked between the files of a set; whether it is this scenario's is the trainer's check at resume
// (a directory has no scenario).
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "apps/zinf/exit_codes.h"
#include "apps/zinf/output.h"
#include "apps/zinf/subcommand.h"
#include "libengine/core/units.h"
#include "libengine/train/checkpoint_set.h"
#include "reports/record_envelope.h"

namespace zinf::cli {
namespace {

namespace fs = std::filesystem;
using reports::Align;
using reports::Cell;
using reports::Emphasis;

// One checkpoint as ls and verify report it.
struct Entry {
  std::int64_t step = 0;
  std::string path;  // the manifest or the plain file
  int world_size = 1;
  std::string placement;
  std::uint64_t bytes = 0;  // the shards' sizes on disk
  std::vector<std::string> problems;
};

Entry examine(const train::CheckpointCandidate& candidate, bool read_data) {
  Entry entry;
  entry.step = candidate.step;
  entry.path = candidate.path.string();
  if (!candidate.set.is_ok()) {
    entry.problems.push_back(candidate.set.status().message());
    return entry;
  }
  const train::CheckpointSet& set = candidate.set.value();
  entry.world_size = set.world_size;
  entry.placement = set.placement;
  for (const fs::path& shard : set.shards) {
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(shard, ec);
    if (!ec) entry.bytes += size;
  }
  entry.problems = train::verify_checkpoint_set(set, read_data);
  return entry;
}

class CheckpointCommand final : public Subcommand {
 public:
  explicit CheckpointCommand(CLI::App& app) {
    CLI::App* c = app.add_subcommand("checkpoint", "Inspect a checkpoint directory: list its checkpoints, verify them");
    c->require_subcommand(1);
    ls_ = c->add_subcommand("ls",
                            "List the checkpoints in DIR: step, world size, placement, size, valid or why not "
                            "(headers and sizes; `verify` reads every byte)");
    ls_->add_option("dir", ls_dir_, "Checkpoint directory (scenario.checkpoint.dir)")->required()->type_name("DIR");
    add_output_options(*ls_, ls_output_);
    verify_ = c->add_subcommand("verify",
                                "Read every byte of the checkpoints in DIR and check every CRC, header and manifest");
    verify_->add_option("dir", verify_dir_, "Checkpoint directory (scenario.checkpoint.dir)")
        ->required()
        ->type_name("DIR");
    verify_->add_option("--step", step_text_, "Verify only the checkpoint of this step")->type_name("N");
    add_output_options(*verify_, verify_output_);
    verify_->footer(
        "Exit codes: 0 every checkpoint verified is valid, 1 one is not (a line per problem), 2 bad usage.");
  }

  Status run(const Io& io) override {
    const bool verify = verify_->parsed();
    const OutputOptions& output = verify ? verify_output_ : ls_output_;
    const std::string& dir = verify ? verify_dir_ : ls_dir_;
    ZINF_RETURN_IF_ERROR(output_format(output).status());
    if (!output.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output.out_path, "--out"));
    std::optional<std::int64_t> step;
    if (verify && !step_text_.empty()) {
      ZINF_ASSIGN_OR_RETURN(step, parse_int_in_range(step_text_, "--step", 0, std::int64_t{1} << 53));
    }
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      return Status::not_found(fmt::format("checkpoint directory {}: no such directory", dir));
    }
    ZINF_ASSIGN_OR_RETURN(const std::vector<train::CheckpointCandidate> candidates, train::checkpoint_candidates(dir));
    std::vector<Entry> entries;
    for (const train::CheckpointCandidate& candidate : candidates) {
      if (step && candidate.step != *step) continue;
      entries.push_back(examine(candidate, verify));
    }
    if (step && entries.empty()) {
      return Status::not_found(fmt::format("--step: no checkpoint of step {} in {}", *step, dir));
    }
    invalid_ = verify && entries.empty();
    for (const Entry& entry : entries) invalid_ = invalid_ || !entry.problems.empty();
    return emit(output, render(dir, entries, verify, io.started), io);
  }

  int exit_code_on_success() const override { return invalid_ ? kExitFailure : kExitOk; }

 private:
  static Rendered render(const std::string& dir, const std::vector<Entry>& entries, bool verify,
                         const reports::ConditionsSnapshot& started) {
    Rendered out;
    out.record = reports::make_record_envelope(verify ? "checkpoint-verify" : "checkpoint-ls", 1, started);
    out.record["dir"] = dir;
    out.record["data_read"] = verify;
    nlohmann::json list = nlohmann::json::array();
    reports::Section section;
    section.title = fmt::format("checkpoints in {}", dir);
    section.table.columns = {{"step", Align::kRight},
                             {"ranks", Align::kRight},
                             {"placement", Align::kLeft},
                             {"size", Align::kRight},
                             {"status", Align::kLeft}};
    out.csv.columns = {{"step"}, {"world_size"}, {"placement"}, {"bytes"}, {"valid"}, {"problem"}};
    for (const Entry& entry : entries) {
      list.push_back({{"step", entry.step},
                      {"path", entry.path},
                      {"world_size", entry.world_size},
                      {"placement", entry.placement},
                      {"bytes", entry.bytes},
                      {"valid", entry.problems.empty()},
                      {"problems", entry.problems}});
      const std::string placement = entry.placement.empty() ? "-" : entry.placement;
      if (entry.problems.empty()) {
        section.table.rows.push_back({std::to_string(entry.step), std::to_string(entry.world_size), placement,
                                      format_bytes(static_cast<double>(entry.bytes)),
                                      Cell(verify ? "valid (every byte read)" : "valid", Emphasis::kGood)});
        out.csv.rows.push_back({std::to_string(entry.step), std::to_string(entry.world_size), entry.placement,
                                std::to_string(entry.bytes), "true", ""});
      }
      // One row per problem: each names its file and says why.
      for (const std::string& problem : entry.problems) {
        section.table.rows.push_back({std::to_string(entry.step), std::to_string(entry.world_size), placement,
                                      format_bytes(static_cast<double>(entry.bytes)),
                                      Cell("invalid: " + problem, Emphasis::kBad)});
        out.csv.rows.push_back({std::to_string(entry.step), std::to_string(entry.world_size), entry.placement,
                                std::to_string(entry.bytes), "false", problem});
      }
    }
    if (entries.empty()) section.notes.push_back(fmt::format("no complete checkpoint in {}", dir));
    out.record["checkpoints"] = std::move(list);
    out.record["valid"] = !entries.empty() && std::all_of(entries.begin(), entries.end(),
                                                          [](const Entry& e) { return e.problems.empty(); });
    out.document.title = verify ? "zinf checkpoint verify" : "zinf checkpoint ls";
    out.document.sections.push_back(std::move(section));
    return out;
  }

  CLI::App* ls_ = nullptr;
  CLI::App* verify_ = nullptr;
  std::string ls_dir_;
  std::string verify_dir_;
  std::string step_text_;
  OutputOptions ls_output_;
  OutputOptions verify_output_;
  bool invalid_ = false;
};

}  // namespace

std::unique_ptr<Subcommand> add_checkpoint_command(CLI::App& app) { return std::make_unique<CheckpointCommand>(app); }

}  // namespace zinf::cli
