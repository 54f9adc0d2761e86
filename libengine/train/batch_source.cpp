#include "libengine/train/batch_source.h"

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::train {
namespace {

// Markov eval batches start this far into the chain's batch stream: far beyond any training run, so
// they never coincide with a training batch.
constexpr std::uint64_t kMarkovEvalBase = std::uint64_t{1} << 40;

}  // namespace

Result<BatchSource> BatchSource::markov(const MarkovSpec& spec, BatchShape shape) {
  ZINF_ASSIGN_OR_RETURN(MarkovTokenSource source, MarkovTokenSource::create(spec));
  return BatchSource(std::move(source), shape);
}

Result<BatchSource> BatchSource::token_file(const std::string& path, std::uint32_t vocab, BatchShape shape) {
  TokenFileSpec spec;
  spec.path = path;
  spec.vocab = vocab;
  spec.batch = shape.batch;
  spec.seq = shape.seq;
  ZINF_ASSIGN_OR_RETURN(TokenFileSource source, TokenFileSource::open(spec));
  return BatchSource(std::move(source), shape);
}

Status BatchSource::train_batch(std::uint64_t index, std::int32_t* out) const {
  if (const auto* markov = std::get_if<MarkovTokenSource>(&source_)) {
    markov->batch_at(index, shape_.batch, shape_.seq + 1, out);
    return Status::ok();
  }
  return std::get<TokenFileSource>(source_).batch_at(index, shape_.batch, shape_.seq + 1, out);
}

Status BatchSource::eval_batch(std::uint64_t index, std::int32_t* out) const {
  if (const auto* markov = std::get_if<MarkovTokenSource>(&source_)) {
    markov->batch_at(kMarkovEvalBase + index, shape_.batch, shape_.seq + 1, out);
    return Status::ok();
  }
  const auto& file = std::get<TokenFileSource>(source_);
  const std::uint64_t per_epoch = file.batches_per_epoch();
  return file.batch_at(per_epoch - 1 - (index % per_epoch), shape_.batch, shape_.seq + 1, out);
}

bool BatchSource::eval_overlaps_training(std::uint64_t train_steps, std::uint64_t eval_batches) const {
  const auto* file = std::get_if<TokenFileSource>(&source_);
  if (file == nullptr || eval_batches == 0) return false;
  const std::uint64_t per_epoch = file->batches_per_epoch();
  return train_steps + eval_batches > per_epoch;
}

std::optional<double> BatchSource::entropy_rate_nats() const {
  if (const auto* markov = std::get_if<MarkovTokenSource>(&source_)) return markov->entropy_rate_nats();
  return std::nullopt;
}

std::optional<double> BatchSource::unigram_entropy_nats() const {
  if (const auto* markov = std::get_if<MarkovTokenSource>(&source_)) return markov->unigram_entropy_nats();
  return std::nullopt;
}

std::string BatchSource::describe() const {
  if (const auto* markov = std::get_if<MarkovTokenSource>(&source_)) {
    const MarkovSpec& spec = markov->spec();
    return fmt::format("markov chain: vocab {}, {} successors, skew {:g}, entropy rate {:.4f} nats/token", spec.vocab,
                       spec.successors, spec.skew, markov->entropy_rate_nats());
  }
  const auto& file = std::get<TokenFileSource>(source_);
  return fmt::format("token file {}: {} tokens, {} batches per epoch", file.spec().path,
                     format_count(static_cast<double>(file.token_count())), file.batches_per_epoch());
}

}  // namespace zinf::train
