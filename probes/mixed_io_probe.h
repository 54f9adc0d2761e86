// mixed_io_probe: zinf's own swap store reading some extents while it rewrites others, at a given
// read:write byte ratio — the pattern of an offloaded training step (parameter and optimizer-state
// reads of some extents while the optimizer's write-behind rewrites others), measured on the
// store's own engine, files, block size and queue depth. The drive's mixed capacity for that
// pattern is the better of this and fio's two-job run of it (fio_runner.h, FioSplitMix); both go
// into `zinf bench train --zero0`'s record (offload_bench.h).
//
// How it runs: the extents are written once, untimed. A timed pass then issues reads (as the
// engine's parameter reads: IoPriority::kNeeded) and rewrites (written behind until waited for),
// choosing each time the direction that is behind its share of the bytes issued so far, with at
// most `window` tensors of each direction in flight (the store's queue depth in blocks, plus one
// tensor, as io_bench_runner's ring). A full window waits for its oldest op. The pass's rate is
// both directions' bytes over the time from the first issue to the last completion. Reads are
// checked against what was written (a stamp per block), so a probe that reads back wrong bytes
// fails instead of reporting a rate.
#pragma once

#include <cstdint>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/io/swap_store.h"

namespace zinf::probes {

struct MixedIoConfig {
  std::uint64_t size_bytes = 0;    // bytes of one pass, both directions together
  std::uint64_t tensor_bytes = 0;  // bytes of each extent (each op moves one whole extent)
  unsigned read_percent = 50;      // of the bytes, 1..99
  unsigned repeat = 3;             // timed passes
};

// The pass's shape, from the config alone (and the store's block size and queue depth).
struct MixedIoLayout {
  std::uint64_t read_tensors = 0;   // extents read each pass
  std::uint64_t write_tensors = 0;  // other extents rewritten each pass
  std::size_t window = 0;           // tensors in flight per direction at most
  std::uint64_t read_bytes() const;
  std::uint64_t write_bytes() const;
  std::uint64_t tensor_bytes = 0;
};

// size_bytes cut into whole tensors; the read share the nearest whole number of tensors to
// read_percent, with at least one tensor each way. InvalidArgument naming the field when a size,
// the tensor or repeat is 0, read_percent is outside 1..99, or the size holds fewer than two
// tensors.
Result<MixedIoLayout> plan_mixed_io(const MixedIoConfig& config, std::uint64_t block_bytes, unsigned queue_depth);

struct MixedIoSample {
  double seconds = 0.0;  // first issue to last completion
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;
  double gbps = 0.0;  // (read + write bytes) / seconds / 1e9
};

struct MixedIoResult {
  MixedIoLayout layout;
  std::vector<MixedIoSample> samples;  // one per timed pass
};

// Runs the passes on `store`, which must have room for read_tensors + write_tensors extents. Every
// extent is released before it returns, also on failure (after the ops in flight finished). Errors
// from the store end it; a read that returns other bytes than the last write put there is an
// IoError naming the extent.
Result<MixedIoResult> run_mixed_io(io::SwapStore& store, const MixedIoConfig& config);

}  // namespace zinf::probes
