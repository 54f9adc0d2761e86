// CRC-32C throughput (bytes/s) for the dispatched implementation and the table fallback, on a 4 KiB
// block, a 1 MiB chunk (the default SwapStore block) and a 64 MiB tensor. Checksums run on every
// swapped extent when --checksum crc32c is on, so this bounds what that option can cost.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "libengine/io/checksum.h"
#include "libengine/io/checksum_internal.h"

namespace zinf::io {
namespace {

std::vector<std::byte> random_buffer(std::size_t bytes) {
  std::vector<std::byte> buffer(bytes);
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  for (auto& b : buffer) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG: content does not matter
    b = static_cast<std::byte>(state >> 56);
  }
  return buffer;
}

template <std::uint32_t (*Crc)(std::span<const std::byte>, std::uint32_t)>
void run_crc(benchmark::State& state) {
  const std::vector<std::byte> buffer = random_buffer(static_cast<std::size_t>(state.range(0)));
  std::uint32_t crc = 0;
  for (auto _ : state) {
    crc = Crc(buffer, crc);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}

void BM_Crc32c(benchmark::State& state) {
  state.SetLabel(std::string(crc32c_implementation()));
  run_crc<&crc32c>(state);
}

void BM_Crc32cTable(benchmark::State& state) { run_crc<&detail::crc32c_table>(state); }

BENCHMARK(BM_Crc32c)->Arg(4 << 10)->Arg(1 << 20)->Arg(64 << 20);
BENCHMARK(BM_Crc32cTable)->Arg(4 << 10)->Arg(1 << 20)->Arg(64 << 20);

}  // namespace
}  // namespace zinf::io
