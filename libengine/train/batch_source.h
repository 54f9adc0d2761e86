// BatchSource: where the trainer's token batches come from — the synthetic Markov chain (known
// entropy rate) or a flat uint16 token file — behind one random-access interface. Batches are
// addressed by index, not drawn from a cursor, so step s always trains on batch s: a run resumed
// from a checkpoint sees exactly the batches the uninterrupted run would have seen.
// Evaluation batches come from a separate index range (see eval_batch).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "libengine/core/status.h"
#include "libengine/train/synthetic_data.h"
#include "libengine/train/token_file.h"

namespace zinf::train {

struct BatchShape {
  std::uint64_t batch = 0;  // B
  std::uint64_t seq = 0;    // T: each row holds T inputs and T targets (T + 1 tokens)
};

class BatchSource {
 public:
  // Either source; errors name the field (data.*) as the sources do.
  static Result<BatchSource> markov(const MarkovSpec& spec, BatchShape shape);
  static Result<BatchSource> token_file(const std::string& path, std::uint32_t vocab, BatchShape shape);

  // Training batch `index` as rows [B, T+1] in `out` (B*(T+1) int32): inputs out[:, :T],
  // targets out[:, 1:]. Thread-compatible (const). The Markov chain cannot fail; a token file fails
  // with IoError when it changed under the run (TokenFileSource::batch_at).
  Status train_batch(std::uint64_t index, std::int32_t* out) const;
  // Held-out batch `index`: for the Markov chain a disjoint stretch of the token stream; for a file
  // the batches counted back from the end of the file (held out as long as training has not
  // reached them: eval_overlaps_training says when it has). Errors as train_batch's.
  Status eval_batch(std::uint64_t index, std::int32_t* out) const;
  bool eval_overlaps_training(std::uint64_t train_steps, std::uint64_t eval_batches) const;

  const BatchShape& shape() const { return shape_; }
  // The loss a perfect model approaches (Markov only).
  std::optional<double> entropy_rate_nats() const;
  std::optional<double> unigram_entropy_nats() const;
  // "markov chain: V=256, K=4, skew 1.0, entropy rate 1.093 nats/token" / "token file tokens.bin: 1.2M tokens".
  std::string describe() const;

 private:
  BatchSource(std::variant<MarkovTokenSource, TokenFileSource> source, BatchShape shape)
      : source_(std::move(source)), shape_(shape) {}
  std::variant<MarkovTokenSource, TokenFileSource> source_;
  BatchShape shape_;
};

}  // namespace zinf::train
