// io_bench_runner: the measuring part of `zinf bench io`. Runs sequential and random write/read
// passes of many tensors through a SwapStore, times each pass and each tensor, and checks what
// comes back. Returns plain result structs; prints nothing and knows nothing about fio or output
// formats (cmd_bench.cpp does both).
//
// Memory: --size may be far larger than RAM, so tensors are not kept in memory. A ring of
// `window_tensors` aligned buffers, one tensor each, is reused: tensor k of a pass goes through
// slot k % window. The window keeps queue_depth x block bytes (plus one tensor) in flight. The ring
// and the store's staging pool together stay within memory_limit_bytes (1 GiB, README's bound): the
// window shrinks to one tensor when two do not fit, and a tensor that does not fit even alone is
// refused before anything is allocated.
//
// Verification: before a tensor is written, a 32-byte stamp {magic ^ seed, tensor, pass, offset}
// is put every stamp_stride_bytes (at most 64 KiB, and a divisor of the block size, so every
// chunk the store cuts carries one). A read compares the stamps it got with the ones the last write
// pass put there, which catches misplaced chunks, stale data from an older pass and zero pages at
// a cost of one cache line per stamp. That check runs between waits on the timing thread and its
// time is measured separately (verify_seconds) so its share of the pass can be shown.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/io/swap_store.h"
#include "probes/latency_stats.h"

namespace zinf::probes {

enum class IoTest { kSeqWrite, kSeqRead, kRandWrite, kRandRead };
inline constexpr std::array kAllIoTests{IoTest::kSeqWrite, IoTest::kSeqRead, IoTest::kRandWrite, IoTest::kRandRead};

// "seq-write", "seq-read", "rand-write", "rand-read".
std::string_view io_test_name(IoTest test);
bool is_write_test(IoTest test);
bool is_random_test(IoTest test);
// A comma list of test names in the order to run them. InvalidArgument naming `field` for an
// unknown name, an empty item or a repeated one.
Result<std::vector<IoTest>> parse_io_tests(std::string_view text, std::string_view field);

// One timed pass over all tensors.
struct IoSample {
  double seconds = 0.0;  // first issue to last wait returning
  std::uint64_t bytes = 0;
  double gbps = 0.0;                      // bytes / seconds / 1e9
  std::vector<double> latencies_seconds;  // per tensor in issue order: issue -> wait() returned
  bool allocates_extents = false;         // the first write pass: write() into fresh extents
  std::uint64_t write_pass = 0;           // for writes: the pass number stamped; for reads: expected
  // Reads only:
  std::uint64_t tensors_wrong = 0;
  std::string first_mismatch;   // empty when none
  double verify_seconds = 0.0;  // time spent checking stamps (reads) or writing them (writes)
};

// What `zinf bench io` may hold in buffers, whatever --size, --tensor, --qd and --block say.
inline constexpr std::uint64_t kBenchIoMemoryBytes = std::uint64_t{1} << 30;
// The largest staging pool it gives the store (so that a large --qd x --block leaves room for tensors).
inline constexpr std::uint64_t kBenchIoStagingBytes = std::uint64_t{256} << 20;

struct IoBenchConfig {
  std::uint64_t size_bytes = 0;    // bytes per pass, over all tensors
  std::uint64_t tensor_bytes = 0;  // bytes per tensor; the last one may be smaller
  std::vector<IoTest> tests;       // run in this order, each `repeat` times before the next
  unsigned repeat = 1;
  std::uint64_t seed = 1;  // buffer pattern, stamps and random orders
  // The bound on the benchmark's buffers: the ring plus the store's staging pool (staging_bytes).
  std::uint64_t memory_limit_bytes = kBenchIoMemoryBytes;
  std::uint64_t staging_bytes = 0;  // the swap store's staging pool, counted in memory_limit_bytes
  // Called on the benchmark's thread after each timed run (index counts from 0 to count - 1), before
  // the next one: for progress lines, and for a baseline run on the same files, so that zinf's and
  // the baseline's runs alternate and a drive whose speed drifts (thermal throttling, a shared
  // disk) affects both alike. An error ends the benchmark with that error. May be empty.
  std::function<Status(IoTest test, unsigned index, unsigned count, const IoSample& sample)> after_sample;
  // after_sample writes into the store's files after write runs (fio does), which destroys the
  // extents' data; the runner then rewrites every extent, untimed, before the next read run.
  bool after_sample_overwrites = false;
};

// How the passes are cut and buffered; derived from the config and the store.
struct IoBenchLayout {
  std::uint64_t tensor_count = 0;
  std::uint64_t last_tensor_bytes = 0;
  std::size_t window_tensors = 0;  // tensors in flight at most, = ring buffers
  std::uint64_t ring_bytes = 0;    // memory of the ring
  std::uint64_t memory_bytes = 0;  // ring_bytes + the staging pool: at most memory_limit_bytes
  std::uint64_t buffer_alignment_bytes = 4096;
  std::uint64_t stamp_stride_bytes = 0;
};

// The bytes of one verification stamp: every tensor (the last one too) carries at least one whole.
inline constexpr std::uint64_t kIoBenchStampBytes = 32;

// Validates the config against the store's block size and queue depth and lays the run out.
// InvalidArgument names the flag (--size, --tensor, --repeat, --tests); a tensor (or the last one
// of a pass) shorter than a stamp is refused, as verification could not tell its pass; a tensor whose buffer and
// the staging pool exceed memory_limit_bytes is refused naming --tensor and the largest that fits.
inline constexpr std::uint64_t kMaxTensors = 1ull << 20;
Result<IoBenchLayout> plan_io_bench(const IoBenchConfig& config, std::uint64_t block_bytes, unsigned queue_depth,
                                    std::uint64_t buffer_alignment_bytes);

struct IoTestResult {
  IoTest test = IoTest::kSeqWrite;
  std::vector<IoSample> samples;
  SampleSpread gbps;             // over samples
  LatencySummary latency;        // seconds, over every tensor of every sample
  std::optional<bool> verified;  // reads: no tensor came back wrong; writes: nullopt
};

struct IoBenchResult {
  IoBenchLayout layout;
  bool prefilled = false;         // the first test read, so an untimed write pass made the extents first
  unsigned untimed_rewrites = 0;  // passes that restored the extents after after_sample overwrote them
  std::vector<IoTestResult> tests;
  std::optional<bool> verified;         // all read tests verified; nullopt when no test read
  io::SwapStoreStats stats;             // after the last pass, before the extents were released
  std::vector<io::SwapPathInfo> paths;  // the same moment
};

// Runs every test of `config` against `store`. Errors from the store (IoError with path, offset
// and errno) end the run after every op in flight has been waited for. Data that reads back wrong
// is not an error here: it is counted in the samples and `verified`.
Result<IoBenchResult> run_io_bench(io::SwapStore& store, const IoBenchConfig& config);

}  // namespace zinf::probes
