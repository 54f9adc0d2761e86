// Uses zinf as an installed library: parses a size and counts GPT-2 small's parameters.
// Exits 0 only when both come out as expected, so the package test fails on a broken install.
#include <cstdint>
#include <cstdio>

#include "libengine/core/units.h"
#include "libengine/spec/model_shape.h"

int main() {
  const zinf::Result<std::uint64_t> params = zinf::parse_count("1T", "--params");
  if (!params.is_ok()) {
    std::fprintf(stderr, "parse_count(\"1T\") failed: %s\n", params.status().message().c_str());
    return 1;
  }
  // GPT-2 small: 12 layers, hidden 768, 12 heads, vocab 50257, 1024 positions.
  const std::uint64_t gpt2_total =
      zinf::spec::count_parameters(zinf::spec::gpt_like_shape(12, 768, 12, 50257, 1024)).total;

  constexpr std::uint64_t kExpectedParams = 1'000'000'000'000;
  constexpr std::uint64_t kExpectedGpt2 = 124'439'808;
  const bool ok = *params == kExpectedParams && gpt2_total == kExpectedGpt2;
  std::printf("parse_count(\"1T\") = %llu (expected %llu); gpt2 parameters = %llu (expected %llu)%s: %s\n",
              static_cast<unsigned long long>(*params), static_cast<unsigned long long>(kExpectedParams),
              static_cast<unsigned long long>(gpt2_total), static_cast<unsigned long long>(kExpectedGpt2),
#ifdef ZINF_CONSUMER_HAS_PLANNER
              "; planner linked",
#else
              "",
#endif
              ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
