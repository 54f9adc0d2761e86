// Trainer::load_latest and its helpers: the ranks' collective choice of the checkpoint to resume
// from. Each rank lists the directory itself (ranks may see different listings: they agree on
// steps, not on paths), proposes its newest step below the last one rejected, and the ranks take
// the highest proposal; each rank then checks that set (every shard's header against the manifest,
// the fingerprint, the trainer state) and the verdicts are exchanged; a set valid on every rank is
// loaded and the load's outcome (an array's CRC) exchanged again. Any rank's failure is every
// rank's: all fall back to the next older step together, or under checkpoint.strict all fail with
// the same error (failure_agreed(): the CLI prints it once). Every rank's reason reaches on_warning on every rank (rank
// 0 prints it).
#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "libengine/spec/json_input.h"
#include "libengine/train/checkpoint_set.h"
#include "libengine/train/rank_agreement.h"
#include "libengine/train/trainer.h"
#include "libengine/train/weights_source.h"

namespace zinf::train {
namespace {

// A rank's verdict on a candidate; the ranks' worst one decides.
enum Verdict : std::int64_t { kValid = 0, kInvalid = 1, kOtherRun = 2 };

struct Agreed {
  Verdict worst = kValid;
  std::string reasons;  // every rank's reason for the worst verdict, one line ("rank 1: ...; rank 2: ...")
};

// Exchanges every rank's verdict and reason. Reasons the same on every failing rank are given once;
// a reason only some ranks have is prefixed with them.
Result<Agreed> agree(comm::Communicator* comm, Verdict mine, const std::string& reason) {
  ZINF_ASSIGN_OR_RETURN(const std::vector<std::int64_t> verdicts, gather_integers(comm, mine));
  Agreed agreed;
  agreed.worst = static_cast<Verdict>(*std::max_element(verdicts.begin(), verdicts.end()));
  if (agreed.worst == kValid) return agreed;
  ZINF_ASSIGN_OR_RETURN(const std::vector<std::string> reasons,
                        gather_texts(comm, mine == agreed.worst ? reason : std::string()));
  std::vector<std::pair<std::string, std::vector<int>>> distinct;  // reason, the ranks giving it
  for (int rank = 0; rank < static_cast<int>(reasons.size()); ++rank) {
    const std::string& text = reasons[static_cast<std::size_t>(rank)];
    if (text.empty()) continue;
    auto it = std::find_if(distinct.begin(), distinct.end(), [&](const auto& d) { return d.first == text; });
    if (it == distinct.end()) it = distinct.insert(distinct.end(), {text, {}});
    it->second.push_back(rank);
  }
  for (const auto& [text, ranks] : distinct) {
    if (!agreed.reasons.empty()) agreed.reasons += "; ";
    if (ranks.size() < reasons.size()) {
      agreed.reasons += ranks.size() == 1 ? fmt::format("rank {}: ", ranks.front())
                                          : fmt::format("ranks {}: ", fmt::join(ranks, ", "));
    }
    agreed.reasons += text;
  }
  return agreed;
}

}  // namespace

Status Trainer::load_latest(TrainOutcome& outcome, std::int64_t& first_step) {
  comm::Communicator* comm = world_size_ > 1 ? options_.comm : nullptr;
  const std::string dir = options_.checkpoint_dir.string();
  Result<std::vector<CheckpointCandidate>> listed = checkpoint_candidates(options_.checkpoint_dir);
  // A rank that cannot list the directory stops every rank.
  {
    ZINF_ASSIGN_OR_RETURN(const Agreed listing, agree(comm, listed.is_ok() ? kValid : kInvalid,
                                                      listed.is_ok() ? std::string() : listed.status().message()));
    if (listing.worst != kValid) {
      failure_agreed_ = true;
      return Status::io_error(listing.reasons);
    }
  }
  const std::vector<CheckpointCandidate>& candidates = listed.value();
  std::vector<std::string> rejected;  // why each newer step was passed over, newest first
  std::int64_t below = std::numeric_limits<std::int64_t>::max();
  for (;;) {
    std::int64_t mine = -1;
    for (const CheckpointCandidate& c : candidates) {
      if (c.step < below) mine = std::max(mine, c.step);
    }
    ZINF_ASSIGN_OR_RETURN(const std::vector<std::int64_t> proposals, gather_integers(comm, mine));
    const std::int64_t step = *std::max_element(proposals.begin(), proposals.end());
    if (step < 0) {
      if (rejected.empty()) return Status::ok();  // no checkpoint at all: the run starts at step 0
      failure_agreed_ = true;
      return Status::io_error(
          fmt::format("no checkpoint in {} is valid on every rank: {}", dir, fmt::join(rejected, "; ")));
    }
    below = step;
    // The set of that step on this rank: a manifest before a plain file of the same step.
    const auto found = std::find_if(candidates.begin(), candidates.end(),
                                    [&](const CheckpointCandidate& c) { return c.step == step; });
    Verdict verdict = kValid;
    std::string reason;
    std::optional<OpenedCheckpoint> opened;
    if (found == candidates.end()) {
      verdict = kInvalid;
      reason = fmt::format("no checkpoint of step {} is complete in {} as this rank sees it", step, dir);
    } else {
      bool other_run = false;
      Result<OpenedCheckpoint> attempt = open_checkpoint_set(*found, other_run);
      if (attempt.is_ok()) {
        opened.emplace(std::move(attempt).value());
      } else {
        verdict = other_run ? kOtherRun : kInvalid;
        reason = attempt.status().message();
      }
    }
    ZINF_ASSIGN_OR_RETURN(Agreed agreed, agree(comm, verdict, reason));
    if (agreed.worst == kValid) {
      // Every rank checked its set: load it, and agree on whether every rank's load verified.
      const Status loaded = load_opened(*opened);
      ZINF_ASSIGN_OR_RETURN(agreed, agree(comm, loaded.is_ok() ? kValid : kInvalid, loaded.message()));
      if (agreed.worst == kValid) {
        first_step = opened->step;
        outcome.resumed_from = opened->path;
        outcome.losses_before = recent_losses_;
        for (const std::string& why : rejected) {
          outcome.resume_warnings.push_back(fmt::format(
              "{}; resuming from the checkpoint before it, {} (checkpoint.strict: true makes this an error)", why,
              opened->path.string()));
        }
        if (options_.on_warning) {
          for (const std::string& warning : outcome.resume_warnings) options_.on_warning(warning);
        }
        return Status::ok();
      }
    }
    // A whole checkpoint of another configuration is no damage: never a reason to go further back.
    if (agreed.worst == kOtherRun) {
      failure_agreed_ = true;
      return Status::invalid_argument(agreed.reasons);
    }
    if (options_.checkpoint_strict) {
      failure_agreed_ = true;
      return Status::io_error(
          fmt::format("{} (checkpoint.strict: true; false resumes from the newest checkpoint "
                      "valid on every rank)",
                      agreed.reasons));
    }
    rejected.push_back(agreed.reasons);
  }
}

Result<Trainer::OpenedCheckpoint> Trainer::open_checkpoint_set(const CheckpointCandidate& candidate, bool& other_run) {
  if (!candidate.set.is_ok()) return candidate.set.status();
  const CheckpointSet& set = candidate.set.value();
  const std::filesystem::path& latest = candidate.path;
  // A set's manifest names its run: another configuration's set is refused before its shards
  // are read (a shard that disagrees with its own manifest is damage, found below).
  const auto another_run = [&](const std::string& fingerprint) {
    other_run = true;
    return Status::invalid_argument(fmt::format(
        "checkpoint {} was written by a different run configuration (fingerprint {} vs this scenario's {}); "
        "move it away or set checkpoint.resume to false",
        latest.string(), fingerprint, options_.fingerprint));
  };
  if (!set.manifest.empty() && set.fingerprint != options_.fingerprint) return another_run(set.fingerprint);
  // Each rank reads its slices from whatever world size wrote the set; replicated states read
  // whole arrays (a world of one), assembled from the shards where partitioned states wrote them.
  OpenedCheckpoint opened;
  opened.path = latest;
  opened.whole = std::make_unique<zero::Partition>(states_.table(), 1, 0);
  const zero::Partition* partition = states_.partition() != nullptr ? states_.partition() : opened.whole.get();
  ZINF_ASSIGN_OR_RETURN(opened.source, ShardedCheckpointSource::open(set, states_.table(), *partition));
  const CheckpointMeta& meta = opened.source->meta();
  if (meta.fingerprint != options_.fingerprint) return another_run(meta.fingerprint);
  // The data's CRCs before the load: it runs collectives, which a rank failing half-way would
  // leave its peers waiting in.
  ZINF_RETURN_IF_ERROR(opened.source->verify_needed_data());
  opened.step = meta.step;
  // Integers are read exactly: a crafted float there must be an error, not a conversion.
  const auto integer = [](const nlohmann::json& value) {
    const std::optional<std::int64_t> exact = spec::exact_int64(value);
    if (!exact) throw std::invalid_argument(fmt::format("{} is not an integer", spec::describe_json_value(value)));
    return *exact;
  };
  try {
    opened.optimizer_steps = integer(meta.extra.at("optimizer_step"));
    opened.scaler.scale = meta.extra.at("loss_scale").get<double>();
    opened.scaler.clean_steps = integer(meta.extra.at("loss_scale_clean_steps"));
    // Absent in checkpoints written before the field existed: the summary then covers fewer steps.
    if (const auto it = meta.extra.find("recent_losses"); it != meta.extra.end()) {
      for (const nlohmann::json& entry : *it) {
        opened.recent_losses.push_back({integer(entry.at(0)), entry.at(1).get<double>()});
      }
      if (opened.recent_losses.size() > kRecentLossesKept) {
        opened.recent_losses.erase(opened.recent_losses.begin(), opened.recent_losses.end() - kRecentLossesKept);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid_argument(
        fmt::format("checkpoint {}: trainer state is malformed: {}", latest.string(), e.what()));
  } catch (const std::invalid_argument& e) {
    return Status::invalid_argument(
        fmt::format("checkpoint {}: trainer state is malformed: {}", latest.string(), e.what()));
  }
  return opened;
}

Status Trainer::load_init_weights() {
  comm::Communicator* comm = world_size_ > 1 ? options_.comm : nullptr;
  Result<std::unique_ptr<SafetensorsStateSource>> source =
      SafetensorsStateSource::open(options_.init_weights, model_.config().shape, states_.table(), states_.partition());
  ZINF_ASSIGN_OR_RETURN(const Agreed opened, agree(comm, source.is_ok() ? kValid : kInvalid,
                                                   source.is_ok() ? std::string() : source.status().message()));
  if (opened.worst != kValid) {
    failure_agreed_ = true;
    return Status::invalid_argument(opened.reasons);
  }
  const Status loaded = states_.load_checkpoint(*source.value());
  ZINF_ASSIGN_OR_RETURN(const Agreed done, agree(comm, loaded.is_ok() ? kValid : kInvalid, loaded.message()));
  if (done.worst != kValid) {
    failure_agreed_ = true;
    return Status::io_error(done.reasons);
  }
  return Status::ok();
}

Status Trainer::load_opened(OpenedCheckpoint& opened) {
  ZINF_RETURN_IF_ERROR(states_.load_checkpoint(*opened.source));
  ZINF_RETURN_IF_ERROR(optimizer_.set_step_count(opened.optimizer_steps));
  ZINF_RETURN_IF_ERROR(scaler_.set_state(opened.scaler));
  recent_losses_ = opened.recent_losses;
  return Status::ok();
}

}  // namespace zinf::train
