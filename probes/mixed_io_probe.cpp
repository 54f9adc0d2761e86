#include "probes/mixed_io_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>

#include "libengine/memory/aligned_buffer.h"

namespace zinf::probes {
namespace {

// Put at the start of every block of an extent: which extent, and which write of it.
struct MixStamp {
  std::uint64_t magic;
  std::uint64_t extent;
  std::uint64_t pass;
};
constexpr std::uint64_t kMixMagic = 0x7a696e662d6d6978ull;  // "zinf-mix"

void write_mix_stamps(std::span<std::byte> buffer, std::uint64_t stride, std::uint64_t extent, std::uint64_t pass) {
  for (std::uint64_t offset = 0; offset + sizeof(MixStamp) <= buffer.size(); offset += stride) {
    const MixStamp stamp{kMixMagic, extent, pass};
    std::memcpy(buffer.data() + offset, &stamp, sizeof(stamp));
  }
}

bool mix_stamps_match(std::span<const std::byte> buffer, std::uint64_t stride, std::uint64_t extent,
                      std::uint64_t pass) {
  for (std::uint64_t offset = 0; offset + sizeof(MixStamp) <= buffer.size(); offset += stride) {
    const MixStamp expected{kMixMagic, extent, pass};
    if (std::memcmp(buffer.data() + offset, &expected, sizeof(expected)) != 0) return false;
  }
  return true;
}

struct MixInFlight {
  io::Ticket ticket;
  std::uint64_t extent = 0;  // index into the extents
  std::size_t slot = 0;      // ring buffer of its direction
};

}  // namespace

std::uint64_t MixedIoLayout::read_bytes() const { return read_tensors * tensor_bytes; }
std::uint64_t MixedIoLayout::write_bytes() const { return write_tensors * tensor_bytes; }

Result<MixedIoLayout> plan_mixed_io(const MixedIoConfig& config, std::uint64_t block_bytes, unsigned queue_depth) {
  if (config.tensor_bytes < sizeof(MixStamp)) {
    return Status::invalid_argument(
        fmt::format("mixed I/O probe: tensor_bytes {} must be at least {}", config.tensor_bytes, sizeof(MixStamp)));
  }
  if (config.repeat == 0) return Status::invalid_argument("mixed I/O probe: repeat must be positive");
  if (config.read_percent < 1 || config.read_percent > 99) {
    return Status::invalid_argument(fmt::format(
        "mixed I/O probe: read_percent {} must be 1..99 (percent of the bytes that are read)", config.read_percent));
  }
  if (block_bytes == 0 || queue_depth == 0) {
    return Status::invalid_argument("mixed I/O probe: the store's block size and queue depth must be positive");
  }
  const std::uint64_t tensors = config.size_bytes / config.tensor_bytes;
  if (tensors < 2) {
    return Status::invalid_argument(
        fmt::format("mixed I/O probe: size_bytes {} holds {} tensors of {} bytes; it needs two (one each way)",
                    config.size_bytes, tensors, config.tensor_bytes));
  }
  MixedIoLayout layout;
  layout.tensor_bytes = config.tensor_bytes;
  const double share = static_cast<double>(tensors) * config.read_percent / 100.0;
  layout.read_tensors =
      static_cast<std::uint64_t>(std::clamp(std::round(share), 1.0, static_cast<double>(tensors - 1)));
  layout.write_tensors = tensors - layout.read_tensors;
  // A queue depth of blocks in flight per direction, plus one tensor so the queue stays full while
  // the oldest is retired; never more than there are.
  const std::uint64_t depth_tensors = (block_bytes * queue_depth + config.tensor_bytes - 1) / config.tensor_bytes + 1;
  layout.window =
      static_cast<std::size_t>(std::min(depth_tensors, std::max(layout.read_tensors, layout.write_tensors)));
  return layout;
}

Result<MixedIoResult> run_mixed_io(io::SwapStore& store, const MixedIoConfig& config) {
  MixedIoResult result;
  ZINF_ASSIGN_OR_RETURN(result.layout, plan_mixed_io(config, store.block_bytes(), store.queue_depth()));
  const MixedIoLayout& layout = result.layout;
  std::uint64_t alignment = 4096;
  for (const io::SwapPathInfo& path : store.paths()) {
    alignment = std::max<std::uint64_t>(alignment, path.memory_alignment_bytes);
  }
  const std::size_t window = layout.window;
  const auto buffer_bytes = static_cast<std::size_t>(config.tensor_bytes);
  std::vector<memory::AlignedBuffer> read_ring;
  std::vector<memory::AlignedBuffer> write_ring;
  for (std::size_t k = 0; k < window; ++k) {
    ZINF_ASSIGN_OR_RETURN(memory::AlignedBuffer r, memory::AlignedBuffer::allocate(buffer_bytes, alignment));
    ZINF_ASSIGN_OR_RETURN(memory::AlignedBuffer w, memory::AlignedBuffer::allocate(buffer_bytes, alignment));
    std::memset(r.data(), 0, r.size());
    std::memset(w.data(), 0, w.size());
    read_ring.push_back(std::move(r));
    write_ring.push_back(std::move(w));
  }
  const std::uint64_t stride = store.block_bytes();
  const std::uint64_t extents_total = layout.read_tensors + layout.write_tensors;
  std::vector<io::Ticket> extents;
  extents.reserve(extents_total);

  // Everything below ends here: ops in flight waited for, then every extent released.
  std::deque<MixInFlight> reads;
  std::deque<MixInFlight> writes;
  Status failure;
  const auto retire = [&](std::deque<MixInFlight>& ops, bool is_read) {
    const MixInFlight op = ops.front();
    ops.pop_front();
    const Status status = store.wait(op.ticket);
    if (!status.is_ok()) {
      if (failure.is_ok()) failure = status;
      return;
    }
    if (is_read && failure.is_ok() && !mix_stamps_match(read_ring[op.slot].bytes(), stride, op.extent, /*pass=*/0)) {
      failure = Status::io_error(
          fmt::format("mixed I/O probe: extent {} read back other bytes than were written", op.extent));
    }
  };
  const auto finish = [&]() -> Status {
    while (!reads.empty()) retire(reads, true);
    while (!writes.empty()) retire(writes, false);
    for (const io::Ticket& extent : extents) {
      const Status released = store.release(extent);
      if (failure.is_ok() && !released.is_ok()) failure = released;
    }
    return failure;
  };

  // The extents, written once: the read set keeps these bytes (pass 0); the write set is rewritten.
  for (std::uint64_t e = 0; e < extents_total && failure.is_ok(); ++e) {
    std::span<std::byte> buffer = write_ring[0].bytes();
    write_mix_stamps(buffer, stride, e, 0);
    Result<io::Ticket> ticket = store.write(buffer);
    if (!ticket.is_ok()) {
      failure = ticket.status();
      break;
    }
    extents.push_back(*ticket);
    failure = store.wait(*ticket);
  }
  if (!failure.is_ok()) return finish();

  for (unsigned pass = 1; pass <= config.repeat && failure.is_ok(); ++pass) {
    std::uint64_t next_read = 0;
    std::uint64_t next_write = 0;
    const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    while ((next_read < layout.read_tensors || next_write < layout.write_tensors) && failure.is_ok()) {
      // The direction behind its share of the bytes issued so far goes next (reads on a tie).
      const bool read_next =
          next_write == layout.write_tensors ||
          (next_read < layout.read_tensors && next_read * layout.write_tensors <= next_write * layout.read_tensors);
      std::deque<MixInFlight>& ops = read_next ? reads : writes;
      if (ops.size() == window) retire(ops, read_next);
      if (!failure.is_ok()) break;
      // Slot k % window of a direction is free: its op k - window was retired above (FIFO).
      if (read_next) {
        const std::uint64_t e = next_read++;
        const auto slot = static_cast<std::size_t>(e % window);
        // Clear the stamps a read of the slot left, so a read that delivers nothing is caught.
        write_mix_stamps(read_ring[slot].bytes(), stride, ~std::uint64_t{0}, ~std::uint64_t{0});
        Result<io::Ticket> t = store.read(extents[e], read_ring[slot].bytes(), io::IoPriority::kNeeded);
        if (!t.is_ok()) {
          failure = t.status();
          break;
        }
        reads.push_back({*t, e, slot});
      } else {
        const auto slot = static_cast<std::size_t>(next_write % window);
        const std::uint64_t e = layout.read_tensors + next_write++;
        std::span<std::byte> buffer = write_ring[slot].bytes();
        write_mix_stamps(buffer, stride, e, pass);
        Result<io::Ticket> t = store.rewrite(extents[e], buffer);
        if (!t.is_ok()) {
          failure = t.status();
          break;
        }
        writes.push_back({*t, e, slot});
      }
    }
    while (!reads.empty()) retire(reads, true);
    while (!writes.empty()) retire(writes, false);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!failure.is_ok()) break;
    MixedIoSample sample;
    sample.seconds = seconds;
    sample.read_bytes = layout.read_bytes();
    sample.write_bytes = layout.write_bytes();
    sample.gbps = seconds > 0 ? static_cast<double>(sample.read_bytes + sample.write_bytes) / seconds / 1e9 : 0.0;
    result.samples.push_back(sample);
  }
  ZINF_RETURN_IF_ERROR(finish());
  return result;
}

}  // namespace zinf::probes
