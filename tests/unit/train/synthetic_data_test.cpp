// MarkovTokenSource: the entropy rate matches closed forms and the empirical conditional entropy of
// its own stream; the stream is deterministic per seed, resumable by batch index and in range; bad
// specs give errors that name the field.
#include "libengine/train/synthetic_data.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/catch.h"

namespace zinf::train {
namespace {

MarkovTokenSource make(std::uint32_t vocab, std::uint32_t successors, double skew, std::uint64_t seed) {
  Result<MarkovTokenSource> src = MarkovTokenSource::create({vocab, successors, skew, seed});
  INFO(src.status().message());
  REQUIRE(src.is_ok());
  return std::move(src).value();
}

double binary_entropy(double p) { return -p * std::log(p) - (1 - p) * std::log(1 - p); }

TEST_CASE("MarkovTokenSource: uniform successors have entropy rate ln K", "[train][markov]") {
  for (std::uint32_t k : {1u, 2u, 3u, 7u, 64u}) {
    const MarkovTokenSource src = make(1000, k, 0.0, 42);
    INFO("K = " << k);
    CHECK(std::abs(src.entropy_rate_nats() - std::log(static_cast<double>(k))) < 1e-12);
    CHECK(src.unigram_entropy_nats() >= src.entropy_rate_nats() - 1e-9);
  }
}

TEST_CASE("MarkovTokenSource: a 2-state chain matches its closed-form stationary law and entropy", "[train][markov]") {
  const MarkovTokenSource src = make(2, 2, 3.0, 7);
  // State 0's successors are {1, 0}; state 1's are {0, 1}.
  REQUIRE(src.successors(0)[0] == 1);
  REQUIRE(src.successors(0)[1] == 0);
  REQUIRE(src.successors(1)[0] == 0);
  REQUIRE(src.successors(1)[1] == 1);
  const double a = src.transition_probability(0, 0);  // P(0 -> 1)
  const double b = src.transition_probability(1, 0);  // P(1 -> 0)
  CHECK(std::abs(src.transition_probability(0, 1) - (1 - a)) < 1e-15);
  const double pi0 = b / (a + b);
  const double pi1 = a / (a + b);
  CHECK(std::abs(src.stationary()[0] - pi0) < 1e-11);
  CHECK(std::abs(src.stationary()[1] - pi1) < 1e-11);
  const double rate = pi0 * binary_entropy(a) + pi1 * binary_entropy(b);
  CHECK(std::abs(src.entropy_rate_nats() - rate) < 1e-11);
  CHECK(std::abs(src.unigram_entropy_nats() - binary_entropy(pi0)) < 1e-11);
}

TEST_CASE("MarkovTokenSource: stationary distribution is a fixed point", "[train][markov]") {
  const MarkovTokenSource src = make(300, 4, 6.0, 3);
  const auto pi = src.stationary();
  std::vector<double> next(pi.size(), 0.0);
  double total = 0.0;
  for (std::uint32_t i = 0; i < pi.size(); ++i) {
    total += pi[i];
    for (std::uint32_t k = 0; k < 4; ++k)
      next[static_cast<std::size_t>(src.successors(i)[k])] += pi[i] * src.transition_probability(i, k);
  }
  double l1 = 0.0;
  for (std::size_t i = 0; i < pi.size(); ++i) l1 += std::abs(next[i] - pi[i]);
  CHECK(std::abs(total - 1.0) < 1e-12);
  CHECK(l1 < 1e-10);
}

// -sum p(a,b) ln p(b|a) over the transitions inside each row of the generated stream.
double empirical_conditional_entropy(MarkovTokenSource& src, std::uint64_t batches, std::uint64_t b, std::uint64_t t1) {
  const std::uint32_t v = src.spec().vocab;
  std::map<std::uint64_t, std::uint64_t> pair_counts;
  std::vector<std::uint64_t> from_counts(v, 0);
  std::vector<std::int32_t> buf(b * t1);
  std::uint64_t total = 0;
  for (std::uint64_t n = 0; n < batches; ++n) {
    src.next_batch(b, t1, buf.data());
    for (std::uint64_t r = 0; r < b; ++r) {
      for (std::uint64_t t = 0; t + 1 < t1; ++t) {
        const auto from = static_cast<std::uint64_t>(buf[r * t1 + t]);
        const auto to = static_cast<std::uint64_t>(buf[r * t1 + t + 1]);
        ++pair_counts[from * v + to];
        ++from_counts[from];
        ++total;
      }
    }
  }
  double h = 0.0;
  for (const auto& [key, count] : pair_counts) {
    const double joint = static_cast<double>(count) / static_cast<double>(total);
    const double conditional = static_cast<double>(count) / static_cast<double>(from_counts[key / v]);
    h -= joint * std::log(conditional);
  }
  return h;
}

TEST_CASE("MarkovTokenSource: empirical conditional entropy of 1e6 tokens matches the entropy rate",
          "[train][markov]") {
  struct Case {
    std::uint32_t vocab, successors;
    double skew;
  };
  for (const Case c : {Case{256, 8, 4.0}, Case{64, 16, 0.0}, Case{1000, 2, 10.0}, Case{50, 50, 12.0}}) {
    MarkovTokenSource src = make(c.vocab, c.successors, c.skew, 11);
    // 64 batches x 16 rows x 1024 transitions = 1,048,576 transitions.
    const double h = empirical_conditional_entropy(src, 64, 16, 1025);
    INFO("V = " << c.vocab << " K = " << c.successors << " skew = " << c.skew << " H = " << src.entropy_rate_nats()
                << " empirical = " << h);
    CHECK(std::abs(h - src.entropy_rate_nats()) < 0.01 * src.entropy_rate_nats());
  }
}

TEST_CASE("MarkovTokenSource: the same seed gives the same stream, another seed another", "[train][markov]") {
  MarkovTokenSource a = make(500, 8, 2.0, 1);
  MarkovTokenSource b = make(500, 8, 2.0, 1);
  MarkovTokenSource c = make(500, 8, 2.0, 2);
  std::vector<std::int32_t> ba(4 * 65), bb(4 * 65), bc(4 * 65);
  for (int n = 0; n < 5; ++n) {
    a.next_batch(4, 65, ba.data());
    b.next_batch(4, 65, bb.data());
    c.next_batch(4, 65, bc.data());
    CHECK(ba == bb);
    CHECK(ba != bc);
  }
  CHECK(a.entropy_rate_nats() == b.entropy_rate_nats());
  // Successive batches differ.
  std::vector<std::int32_t> next(4 * 65);
  a.next_batch(4, 65, next.data());
  CHECK(next != ba);
}

TEST_CASE("MarkovTokenSource: seek resumes at a batch index", "[train][markov]") {
  MarkovTokenSource fresh = make(777, 5, 1.0, 9);
  std::vector<std::vector<std::int32_t>> run;
  for (int n = 0; n < 8; ++n) {
    run.emplace_back(3 * 17);
    fresh.next_batch(3, 17, run.back().data());
  }
  CHECK(fresh.batch_index() == 8);
  MarkovTokenSource resumed = make(777, 5, 1.0, 9);
  resumed.seek(5);
  std::vector<std::int32_t> buf(3 * 17);
  for (int n = 5; n < 8; ++n) {
    resumed.next_batch(3, 17, buf.data());
    CHECK(buf == run[static_cast<std::size_t>(n)]);
  }
  resumed.batch_at(2, 3, 17, buf.data());
  CHECK(buf == run[2]);
  CHECK(resumed.batch_index() == 8);
}

TEST_CASE("MarkovTokenSource: tokens stay in range and follow allowed transitions", "[train][markov]") {
  for (std::uint32_t v : {2u, 3u, 100u, 50257u}) {
    const std::uint32_t k = v < 8 ? v : 8;
    MarkovTokenSource src = make(v, k, 5.0, 4);
    std::vector<std::int32_t> buf(8 * 129);
    src.next_batch(8, 129, buf.data());
    for (std::size_t r = 0; r < 8; ++r) {
      for (std::size_t t = 0; t < 129; ++t) {
        const std::int32_t tok = buf[r * 129 + t];
        REQUIRE(tok >= 0);
        REQUIRE(static_cast<std::uint32_t>(tok) < v);
        if (t > 0) {
          const auto succ = src.successors(static_cast<std::uint32_t>(buf[r * 129 + t - 1]));
          REQUIRE(std::find(succ.begin(), succ.end(), tok) != succ.end());
        }
      }
    }
  }
}

TEST_CASE("MarkovTokenSource: GPT-2 vocabulary with 64 successors builds", "[train][markov]") {
  const MarkovTokenSource src = make(50257, 64, 8.0, 5);
  CHECK(src.entropy_rate_nats() > 0.0);
  CHECK(src.entropy_rate_nats() < std::log(64.0));
  CHECK(src.unigram_entropy_nats() > src.entropy_rate_nats());
}

TEST_CASE("MarkovTokenSource: bad specs name the field", "[train][markov]") {
  auto message = [](MarkovSpec spec) {
    Result<MarkovTokenSource> src = MarkovTokenSource::create(spec);
    REQUIRE_FALSE(src.is_ok());
    CHECK(src.status().code() == ErrorCode::kInvalidArgument);
    return src.status().message();
  };
  CHECK(message({1, 1, 0.0, 0}) == "data.vocab: 1 is too small; expected at least 2");
  CHECK(message({0, 1, 0.0, 0}) == "data.vocab: 0 is too small; expected at least 2");
  CHECK(message({(1u << 24) + 1, 8, 0.0, 0}) == "data.vocab: 16777217 is too large; expected at most 16777216 (2^24)");
  CHECK(message({10, 0, 0.0, 0}) ==
        "data.successors: 0 is out of range; expected 1 to 10 (at most 64 and at most data.vocab = 10)");
  CHECK(message({10, 11, 0.0, 0}).rfind("data.successors: 11 is out of range; expected 1 to 10", 0) == 0);
  CHECK(message({1000, 65, 0.0, 0}).rfind("data.successors: 65 is out of range; expected 1 to 64", 0) == 0);
  CHECK(message({10, 2, -1.0, 0}).rfind("data.skew: -1 is out of range", 0) == 0);
  CHECK(message({10, 2, 16.5, 0}).rfind("data.skew: 16.5 is out of range", 0) == 0);
  CHECK(message({10, 2, std::nan(""), 0}).rfind("data.skew: nan is out of range", 0) == 0);
}

}  // namespace
}  // namespace zinf::train
