// MarkovTokenSource: synthetic training tokens whose difficulty is known exactly.
//
// Tokens come from a seeded random first-order Markov chain over a vocabulary of V tokens. The
// chain's entropy rate H (nats/token) is the cross-entropy loss a perfect next-token model
// approaches, so a training run on this data has a known floor: a loss that falls towards H shows
// the engine learns; a loss below H (beyond noise) shows a bug (e.g. targets leaking into inputs).
//
// The chain (all of it a pure function of the spec):
//   - Every state i has K distinct successors (K = spec.successors, 1 <= K <= min(64, V)).
//     Successor slot 0 is (i + 1) mod V, so the chain is irreducible (the cycle 0->1->...->V-1->0
//     reaches every state). For K >= 2, state 0's slot 1 is 0 itself: a self-loop next to a cycle of
//     length V makes the chain aperiodic, so the stationary distribution is unique and the sampled
//     stream mixes. The remaining slots are distinct tokens drawn uniformly from [0, V).
//   - Slot k of state i gets weight w_ik = exp(-skew * x_ik), x_ik ~ Uniform[0, 1) drawn per slot,
//     normalised over the K slots. skew = 0 gives every successor probability 1/K, so H = ln K
//     exactly; larger skew concentrates each row (H falls towards 0) and makes rows differ, so the
//     stationary distribution matters. The probabilities are quantised to multiples of 2^-32 (every
//     slot keeps at least 2^-32) and the quantised values ARE the chain: the sampler and the entropy
//     use the same numbers.
//   - The stationary distribution pi is exact (uniform) for K = 1 and otherwise comes from power
//     iteration in fp64 until the L1 change between iterates is below 1e-12.
//   - Entropy rate H = -sum_i pi_i sum_k P_ik ln P_ik.
//
// Sampling: batch n (a [B, T+1] block) is a pure function of (seed, n, B, T+1): row r is drawn by a
// xoshiro256** generator seeded through splitmix64 from (seed, n, r); its first token is drawn from pi
// (so every row is a stationary sample) and each next token from the current token's row. No
// std::random distributions are used, so the stream is the same on every standard library.
//
// Cost of create(): power iteration, O(V*K) per iteration times the chain's mixing time. At -O2 with
// V = 50257: ~0.3 s for K = 64 (any skew) or K = 2 with skew 8; ~20 s for the slowest corner, K = 2
// with skew 16 (rows nearly deterministic, so mass drains out of near-cycles slowly).
// Memory: V*K int32 successors + V*K uint32 thresholds + 2V doubles, ~26 MiB for V = 50257, K = 64.
// Thread-safety: const methods may be called concurrently; next_batch/seek mutate the cursor.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "libengine/core/status.h"

namespace zinf::train {

struct MarkovSpec {
  std::uint32_t vocab = 0;       // V, number of token ids (2 .. 2^24)
  std::uint32_t successors = 8;  // K, allowed successors per state (1 .. min(64, V))
  double skew = 0.0;             // concentration of each row, 0 (uniform over K) .. 16
  std::uint64_t seed = 0;        // picks the chain and the token stream
};

class MarkovTokenSource {
 public:
  static constexpr std::uint32_t kMaxVocab = 1u << 24;
  static constexpr std::uint32_t kMaxSuccessors = 64;
  static constexpr double kMaxSkew = 16.0;

  // Builds the chain and its stationary distribution. InvalidArgument names the field, the value and
  // what is allowed ("data.vocab: 1 is too small; expected at least 2"). Infeasible if power iteration
  // does not converge (a very high skew with few successors mixes too slowly); the message says so.
  static Result<MarkovTokenSource> create(const MarkovSpec& spec);

  const MarkovSpec& spec() const { return spec_; }

  // The loss (nats/token) a perfect model of this chain approaches: -sum_i pi_i sum_j P_ij ln P_ij.
  double entropy_rate_nats() const { return entropy_rate_nats_; }
  // The loss of the best context-free (unigram) model: -sum_i pi_i ln pi_i. Always >= the entropy rate.
  double unigram_entropy_nats() const { return unigram_entropy_nats_; }

  // Stationary distribution pi, V entries summing to 1.
  std::span<const double> stationary() const { return stationary_; }
  // Successor token ids of `state` (K entries) and the probability of each, in the same order.
  // Precondition: state < V.
  std::span<const std::int32_t> successors(std::uint32_t state) const;
  double transition_probability(std::uint32_t state, std::uint32_t slot) const;

  // Fills out[B * seq_plus_one] (row-major [B, T+1]) with batch number batch_index() and advances the
  // cursor by one. Inputs are out[:, :T], targets out[:, 1:]. Preconditions: batch >= 1,
  // seq_plus_one >= 2, out holds batch * seq_plus_one int32. Every token is in [0, V).
  void next_batch(std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out);
  // The same batch as the index-th call of next_batch on a fresh source; does not move the cursor.
  void batch_at(std::uint64_t index, std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out) const;
  // Resume: the next next_batch returns batch `index` (for checkpoint/resume).
  void seek(std::uint64_t index) { next_index_ = index; }
  std::uint64_t batch_index() const { return next_index_; }

 private:
  MarkovTokenSource() = default;
  std::uint64_t threshold(std::uint64_t state, std::uint32_t slot) const;  // cumulative, last = 2^32
  std::uint32_t sample_successor(std::uint32_t state, std::uint32_t r32) const;

  MarkovSpec spec_;
  std::vector<std::int32_t> successors_;   // [V, K]
  std::vector<std::uint32_t> thresholds_;  // [V, K] cumulative quantised weights; slot K-1 unused
  std::vector<double> stationary_;         // [V]
  std::vector<double> stationary_cdf_;     // [V] inclusive prefix sums of pi; last forced to 1
  double entropy_rate_nats_ = 0.0;
  double unigram_entropy_nats_ = 0.0;
  std::uint64_t next_index_ = 0;
};

}  // namespace zinf::train
