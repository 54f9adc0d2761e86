// MarkovTokenSource: chain construction, stationary distribution, entropy rate, sampling.
// See synthetic_data.h for the definition of the chain.
#include "libengine/train/synthetic_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "libengine/core/check.h"

namespace zinf::train {
namespace {

constexpr std::uint64_t kOne32 = 1ull << 32;  // total quantised weight of a row
constexpr double kConvergenceL1 = 1e-12;
constexpr int kMaxPowerIterations = 200000;

// splitmix64 (Steele, Lea, Flood 2014; constants from Vigna's reference code): a bijective mixer,
// used to seed xoshiro and to derive independent streams from (seed, index) keys.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** 1.0 (Blackman, Vigna 2018): fast, 256-bit state, passes BigCrush; fully specified,
// so the token stream is the same on every platform and standard library.
class Xoshiro256 {
 public:
  // Seeds from a list of 64-bit keys; different key lists give unrelated streams.
  Xoshiro256(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
    std::uint64_t sm = a;
    std::uint64_t mixed = splitmix64(sm);
    sm = mixed ^ b;
    mixed = splitmix64(sm);
    sm = mixed ^ c;
    for (std::uint64_t& word : s_) word = splitmix64(sm);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n) without modulo bias worth mentioning for n <= 2^24 (Lemire's multiply-shift).
  std::uint32_t below(std::uint32_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4] = {};
};

// Domain separators so the chain's generator and the batches' generators never share a stream.
constexpr std::uint64_t kChainDomain = 0x636861696E000000ull;  // "chain"
constexpr std::uint64_t kBatchDomain = 0x6261746368000000ull;  // "batch"

// Quantises normalised probabilities to integers >= 1 summing to exactly 2^32.
std::vector<std::uint64_t> quantise(const std::vector<double>& p) {
  std::vector<std::uint64_t> q(p.size());
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    q[k] = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(p[k] * static_cast<double>(kOne32))));
    sum += q[k];
  }
  // The rounding error is at most a few units per slot; the largest slot absorbs it.
  const std::size_t largest = static_cast<std::size_t>(std::max_element(q.begin(), q.end()) - q.begin());
  if (sum > kOne32) {
    q[largest] -= sum - kOne32;
  } else {
    q[largest] += kOne32 - sum;
  }
  return q;
}

}  // namespace

Result<MarkovTokenSource> MarkovTokenSource::create(const MarkovSpec& spec) {
  if (spec.vocab < 2) {
    return Status::invalid_argument(fmt::format("data.vocab: {} is too small; expected at least 2", spec.vocab));
  }
  if (spec.vocab > kMaxVocab) {
    return Status::invalid_argument(
        fmt::format("data.vocab: {} is too large; expected at most {} (2^24)", spec.vocab, kMaxVocab));
  }
  const std::uint32_t max_k = std::min(kMaxSuccessors, spec.vocab);
  if (spec.successors < 1 || spec.successors > max_k) {
    return Status::invalid_argument(
        fmt::format("data.successors: {} is out of range; expected 1 to {} (at most 64 and at most data.vocab = {})",
                    spec.successors, max_k, spec.vocab));
  }
  if (!(spec.skew >= 0.0 && spec.skew <= kMaxSkew)) {  // also rejects NaN
    return Status::invalid_argument(fmt::format(
        "data.skew: {} is out of range; expected 0 (uniform over the successors) to {}", spec.skew, kMaxSkew));
  }

  MarkovTokenSource src;
  src.spec_ = spec;
  const std::uint32_t v = spec.vocab;
  const std::uint32_t k_count = spec.successors;
  const std::size_t cells = static_cast<std::size_t>(v) * k_count;
  src.successors_.resize(cells);
  src.thresholds_.resize(cells);

  Xoshiro256 rng(spec.seed, kChainDomain, 0);
  std::vector<double> p(k_count);
  for (std::uint32_t i = 0; i < v; ++i) {
    std::int32_t* succ = &src.successors_[static_cast<std::size_t>(i) * k_count];
    std::uint32_t filled = 0;
    succ[filled++] = static_cast<std::int32_t>((i + 1) % v);
    if (i == 0 && k_count >= 2) succ[filled++] = 0;  // self-loop: aperiodicity
    while (filled < k_count) {
      const auto candidate = static_cast<std::int32_t>(rng.below(v));
      if (std::find(succ, succ + filled, candidate) == succ + filled) succ[filled++] = candidate;
    }
    double total = 0.0;
    for (std::uint32_t k = 0; k < k_count; ++k) {
      p[k] = std::exp(-spec.skew * rng.uniform());
      total += p[k];
    }
    for (double& pk : p) pk /= total;
    const std::vector<std::uint64_t> q = quantise(p);
    std::uint64_t cumulative = 0;
    std::uint32_t* thr = &src.thresholds_[static_cast<std::size_t>(i) * k_count];
    for (std::uint32_t k = 0; k < k_count; ++k) {
      cumulative += q[k];
      // Slot K-1's threshold is 2^32 by construction and does not fit; threshold() supplies it.
      thr[k] = k + 1 < k_count ? static_cast<std::uint32_t>(cumulative) : 0;
    }
  }

  // Stationary distribution.
  src.stationary_.assign(v, 1.0 / v);
  if (k_count >= 2) {
    // The probabilities as doubles for the inner loop (temporary: V*K*8 bytes, 26 MB at most for GPT-2).
    std::vector<double> probability(cells);
    for (std::uint32_t i = 0; i < v; ++i) {
      for (std::uint32_t k = 0; k < k_count; ++k) {
        probability[static_cast<std::size_t>(i) * k_count + k] = src.transition_probability(i, k);
      }
    }
    std::vector<double> next(v);
    bool converged = false;
    for (int iter = 0; iter < kMaxPowerIterations && !converged; ++iter) {
      std::fill(next.begin(), next.end(), 0.0);
      for (std::uint32_t i = 0; i < v; ++i) {
        const double mass = src.stationary_[i];
        const std::int32_t* succ = &src.successors_[static_cast<std::size_t>(i) * k_count];
        const double* prob = &probability[static_cast<std::size_t>(i) * k_count];
        for (std::uint32_t k = 0; k < k_count; ++k) next[static_cast<std::size_t>(succ[k])] += mass * prob[k];
      }
      double total = 0.0;
      for (double x : next) total += x;
      double change = 0.0;
      for (std::uint32_t i = 0; i < v; ++i) {
        next[i] /= total;  // keeps rounding drift from accumulating
        change += std::abs(next[i] - src.stationary_[i]);
      }
      src.stationary_.swap(next);
      converged = change < kConvergenceL1;
    }
    if (!converged) {
      return Status::infeasible(
          fmt::format("data.skew: {} with data.successors = {} gives a chain that mixes too slowly: its stationary "
                      "distribution did not converge in {} power iterations; lower data.skew or raise data.successors",
                      spec.skew, k_count, kMaxPowerIterations));
    }
  }  // K = 1: the chain is the cycle i -> i+1, whose stationary distribution is uniform exactly.

  src.stationary_cdf_.resize(v);
  double cumulative = 0.0;
  double unigram = 0.0;
  double rate = 0.0;
  for (std::uint32_t i = 0; i < v; ++i) {
    const double pi = src.stationary_[i];
    cumulative += pi;
    src.stationary_cdf_[i] = cumulative;
    if (pi > 0.0) unigram -= pi * std::log(pi);
    double row = 0.0;
    for (std::uint32_t k = 0; k < k_count; ++k) {
      const double pk = src.transition_probability(i, k);
      row -= pk * std::log(pk);  // pk >= 2^-32 > 0 by construction
    }
    rate += pi * row;
  }
  src.stationary_cdf_.back() = 1.0;
  src.unigram_entropy_nats_ = unigram;
  src.entropy_rate_nats_ = rate;
  return src;
}

std::span<const std::int32_t> MarkovTokenSource::successors(std::uint32_t state) const {
  ZINF_CHECK(state < spec_.vocab, "state out of range");
  return {&successors_[static_cast<std::size_t>(state) * spec_.successors], spec_.successors};
}

std::uint64_t MarkovTokenSource::threshold(std::uint64_t state, std::uint32_t slot) const {
  if (slot + 1 == spec_.successors) return kOne32;
  return thresholds_[state * spec_.successors + slot];
}

double MarkovTokenSource::transition_probability(std::uint32_t state, std::uint32_t slot) const {
  ZINF_CHECK(state < spec_.vocab && slot < spec_.successors, "state or slot out of range");
  const std::uint64_t lo = slot == 0 ? 0 : threshold(state, slot - 1);
  return static_cast<double>(threshold(state, slot) - lo) * 0x1.0p-32;
}

std::uint32_t MarkovTokenSource::sample_successor(std::uint32_t state, std::uint32_t r32) const {
  // The first slot whose cumulative threshold exceeds r32; thresholds are strictly increasing.
  const std::uint32_t* thr = &thresholds_[static_cast<std::size_t>(state) * spec_.successors];
  const std::uint32_t* end = thr + (spec_.successors - 1);
  const auto slot = static_cast<std::uint32_t>(std::upper_bound(thr, end, r32) - thr);
  return static_cast<std::uint32_t>(successors_[static_cast<std::size_t>(state) * spec_.successors + slot]);
}

void MarkovTokenSource::batch_at(std::uint64_t index, std::uint64_t batch, std::uint64_t seq_plus_one,
                                 std::int32_t* out) const {
  ZINF_CHECK(batch >= 1 && seq_plus_one >= 2 && out != nullptr, "next_batch needs B >= 1, T+1 >= 2 and a buffer");
  for (std::uint64_t r = 0; r < batch; ++r) {
    Xoshiro256 rng(spec_.seed ^ kBatchDomain, index, r);
    std::int32_t* row = out + r * seq_plus_one;
    const double u = rng.uniform();
    auto first = static_cast<std::uint32_t>(std::upper_bound(stationary_cdf_.begin(), stationary_cdf_.end(), u) -
                                            stationary_cdf_.begin());
    first = std::min(first, spec_.vocab - 1);
    std::uint32_t state = first;
    row[0] = static_cast<std::int32_t>(state);
    for (std::uint64_t t = 1; t < seq_plus_one; ++t) {
      state = sample_successor(state, static_cast<std::uint32_t>(rng.next() >> 32));
      row[t] = static_cast<std::int32_t>(state);
    }
  }
}

void MarkovTokenSource::next_batch(std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out) {
  batch_at(next_index_, batch, seq_plus_one, out);
  ++next_index_;
}

}  // namespace zinf::train
