#include "probes/io_bench_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <span>

#include "libengine/core/check.h"
#include "libengine/core/split.h"
#include "libengine/core/units.h"
#include "libengine/memory/aligned_buffer.h"

namespace zinf::probes {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kStampMagic = 0x7a696e662d62656eull;  // "zinf-ben"
constexpr std::uint64_t kMaxStampStride = 64 * 1024;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// splitmix64: a small, fast, well-mixed generator whose output is the same on every platform
// (std::shuffle's is not), so a seed names one pattern and one random order everywhere.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<std::uint32_t> in_order(std::uint64_t count) {
  std::vector<std::uint32_t> order(count);
  for (std::uint64_t i = 0; i < count; ++i) order[i] = static_cast<std::uint32_t>(i);
  return order;
}

// Fisher-Yates with splitmix64; the modulo bias is irrelevant for a benchmark's order.
std::vector<std::uint32_t> shuffled(std::uint64_t count, std::uint64_t seed) {
  std::vector<std::uint32_t> order = in_order(count);
  std::uint64_t state = seed;
  for (std::uint64_t i = count; i > 1; --i) {
    const std::uint64_t j = splitmix64(state) % i;
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

struct Stamp {
  std::uint64_t magic;
  std::uint64_t tensor;
  std::uint64_t pass;
  std::uint64_t offset;
};
static_assert(sizeof(Stamp) == kIoBenchStampBytes);

Stamp stamp_for(std::uint64_t seed, std::uint64_t tensor, std::uint64_t pass, std::uint64_t offset) {
  return Stamp{kStampMagic ^ seed, tensor, pass, offset};
}

// A tensor shorter than a stamp keeps as much of it as fits.
std::size_t stamp_bytes_at(std::uint64_t tensor_bytes, std::uint64_t offset) {
  return static_cast<std::size_t>(std::min<std::uint64_t>(sizeof(Stamp), tensor_bytes - offset));
}

void write_stamps(std::span<std::byte> buffer, std::uint64_t stride, std::uint64_t seed, std::uint64_t tensor,
                  std::uint64_t pass) {
  for (std::uint64_t offset = 0; offset < buffer.size(); offset += stride) {
    const Stamp stamp = stamp_for(seed, tensor, pass, offset);
    std::memcpy(buffer.data() + offset, &stamp, stamp_bytes_at(buffer.size(), offset));
  }
}

// Empty when every stamp is as expected; otherwise what the first wrong one held.
std::string check_stamps(std::span<const std::byte> buffer, std::uint64_t stride, std::uint64_t seed,
                         std::uint64_t tensor, std::uint64_t pass) {
  for (std::uint64_t offset = 0; offset < buffer.size(); offset += stride) {
    const Stamp expected = stamp_for(seed, tensor, pass, offset);
    const std::size_t bytes = stamp_bytes_at(buffer.size(), offset);
    if (std::memcmp(buffer.data() + offset, &expected, bytes) == 0) continue;
    Stamp found{};
    std::memcpy(&found, buffer.data() + offset, bytes);
    if (found.magic != expected.magic) {
      return fmt::format("tensor {} byte {}: no stamp there (found {:#018x}); expected tensor {} of write pass {}",
                         tensor, offset, found.magic, tensor, pass);
    }
    return fmt::format("tensor {} byte {}: found tensor {} byte {} of write pass {}; expected write pass {}", tensor,
                       offset, found.tensor, found.offset, found.pass, pass);
  }
  return {};
}

// Fills a buffer with the seeded pattern (the bytes between stamps).
void fill_pattern(std::span<std::byte> buffer, std::uint64_t seed) {
  std::uint64_t state = seed;
  std::size_t offset = 0;
  for (; offset + sizeof(std::uint64_t) <= buffer.size(); offset += sizeof(std::uint64_t)) {
    const std::uint64_t word = splitmix64(state);
    std::memcpy(buffer.data() + offset, &word, sizeof(word));
  }
  for (; offset < buffer.size(); ++offset) buffer[offset] = static_cast<std::byte>(splitmix64(state));
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

class PassRunner {
 public:
  PassRunner(io::SwapStore& store, const IoBenchConfig& config, const IoBenchLayout& layout,
             std::vector<memory::AlignedBuffer>& ring, std::vector<io::Ticket>& extents)
      : store_(store), config_(config), layout_(layout), ring_(ring), extents_(extents) {}

  // One pass over the tensors in `order`. kind: allocate (write), rewrite, or read.
  enum class Kind { kAllocate, kRewrite, kRead };
  Status run(Kind kind, const std::vector<std::uint32_t>& order, std::uint64_t pass, IoSample& sample) {
    struct InFlight {
      io::Ticket ticket;
      std::uint32_t tensor;
      std::size_t slot;
      Clock::time_point issued;
    };
    std::deque<InFlight> in_flight;
    sample.latencies_seconds.assign(order.size(), 0.0);
    sample.write_pass = pass;
    std::size_t completed = 0;
    Status failure;

    // Waits for the oldest op; on a read, checks its stamps.
    const auto retire_oldest = [&]() {
      const InFlight op = in_flight.front();
      in_flight.pop_front();
      const Status status = store_.wait(op.ticket);
      sample.latencies_seconds[completed++] = seconds_between(op.issued, Clock::now());
      if (!status.is_ok()) {
        if (failure.is_ok()) failure = status;
        return;
      }
      if (kind != Kind::kRead) return;
      const Clock::time_point verify_start = Clock::now();
      const std::string mismatch = check_stamps(std::span<const std::byte>(ring_[op.slot].data(), bytes_of(op.tensor)),
                                                layout_.stamp_stride_bytes, config_.seed, op.tensor, pass);
      sample.verify_seconds += seconds_between(verify_start, Clock::now());
      if (!mismatch.empty()) {
        ++sample.tensors_wrong;
        if (sample.first_mismatch.empty()) sample.first_mismatch = mismatch;
      }
    };

    const Clock::time_point start = Clock::now();
    for (std::size_t k = 0; k < order.size() && failure.is_ok(); ++k) {
      if (in_flight.size() == layout_.window_tensors) retire_oldest();
      if (!failure.is_ok()) break;
      const std::uint32_t tensor = order[k];
      const std::size_t slot = k % layout_.window_tensors;
      const std::span<std::byte> buffer(ring_[slot].data(), bytes_of(tensor));
      if (kind != Kind::kRead) {
        const Clock::time_point stamp_start = Clock::now();
        write_stamps(buffer, layout_.stamp_stride_bytes, config_.seed, tensor, pass);
        sample.verify_seconds += seconds_between(stamp_start, Clock::now());
      }
      const Clock::time_point issued = Clock::now();
      Result<io::Ticket> ticket = kind == Kind::kAllocate  ? store_.write(buffer)
                                  : kind == Kind::kRewrite ? store_.rewrite(extents_[tensor], buffer)
                                                           : store_.read(extents_[tensor], buffer);
      if (!ticket.is_ok()) {
        failure = ticket.status();
        break;
      }
      if (kind == Kind::kAllocate) extents_[tensor] = *ticket;
      in_flight.push_back({*ticket, tensor, slot, issued});
    }
    // Always drain: the ring's buffers must outlive every op that uses them.
    while (!in_flight.empty()) retire_oldest();
    const Clock::time_point end = Clock::now();
    if (!failure.is_ok()) return failure;

    sample.seconds = seconds_between(start, end);
    sample.bytes = config_.size_bytes;
    sample.gbps = sample.seconds > 0.0 ? static_cast<double>(sample.bytes) / sample.seconds / 1e9 : 0.0;
    sample.allocates_extents = kind == Kind::kAllocate;
    return Status::ok();
  }

 private:
  std::uint64_t bytes_of(std::uint32_t tensor) const {
    return tensor + 1 == layout_.tensor_count ? layout_.last_tensor_bytes : config_.tensor_bytes;
  }

  io::SwapStore& store_;
  const IoBenchConfig& config_;
  const IoBenchLayout& layout_;
  std::vector<memory::AlignedBuffer>& ring_;
  std::vector<io::Ticket>& extents_;
};

}  // namespace

std::string_view io_test_name(IoTest test) {
  switch (test) {
    case IoTest::kSeqWrite:
      return "seq-write";
    case IoTest::kSeqRead:
      return "seq-read";
    case IoTest::kRandWrite:
      return "rand-write";
    case IoTest::kRandRead:
      return "rand-read";
  }
  return "?";
}

bool is_write_test(IoTest test) { return test == IoTest::kSeqWrite || test == IoTest::kRandWrite; }
bool is_random_test(IoTest test) { return test == IoTest::kRandWrite || test == IoTest::kRandRead; }

Result<std::vector<IoTest>> parse_io_tests(std::string_view text, std::string_view field) {
  std::vector<IoTest> tests;
  for (const std::string_view item : split(text, ',')) {
    const auto known =
        std::find_if(kAllIoTests.begin(), kAllIoTests.end(), [&](IoTest t) { return io_test_name(t) == item; });
    if (known == kAllIoTests.end()) {
      return Status::invalid_argument(fmt::format(
          "{}: '{}' is not a test; expected a comma list of seq-write, seq-read, rand-write, rand-read", field, item));
    }
    if (std::find(tests.begin(), tests.end(), *known) != tests.end()) {
      return Status::invalid_argument(
          fmt::format("{}: '{}' is listed twice; use --repeat to run a test more often", field, item));
    }
    tests.push_back(*known);
  }
  return tests;
}

Result<IoBenchLayout> plan_io_bench(const IoBenchConfig& config, std::uint64_t block_bytes, unsigned queue_depth,
                                    std::uint64_t buffer_alignment_bytes) {
  if (config.size_bytes == 0) return Status::invalid_argument("--size: must be positive");
  if (config.tensor_bytes == 0) return Status::invalid_argument("--tensor: must be positive");
  if (config.tensor_bytes > config.size_bytes) {
    return Status::invalid_argument(fmt::format(
        "--tensor: {} is larger than --size {}; a pass needs at least one tensor",
        format_bytes(static_cast<double>(config.tensor_bytes)), format_bytes(static_cast<double>(config.size_bytes))));
  }
  if (config.tests.empty()) return Status::invalid_argument("--tests: no test given");
  if (config.repeat == 0) return Status::invalid_argument("--repeat: must be positive");
  if (block_bytes == 0 || queue_depth == 0) return Status::invalid_argument("--block/--qd: must be positive");
  IoBenchLayout layout;
  layout.tensor_count = ceil_div(config.size_bytes, config.tensor_bytes);
  if (layout.tensor_count > kMaxTensors) {
    return Status::invalid_argument(
        fmt::format("--tensor: {} cuts --size {} into {} tensors; at most {} are allowed, use a larger --tensor",
                    format_bytes(static_cast<double>(config.tensor_bytes)),
                    format_bytes(static_cast<double>(config.size_bytes)), layout.tensor_count, kMaxTensors));
  }
  layout.last_tensor_bytes = config.size_bytes - (layout.tensor_count - 1) * config.tensor_bytes;
  // Verification needs one whole stamp per tensor (its tensor and pass): a shorter tensor would be
  // "verified" on a few bytes of the magic only.
  if (config.tensor_bytes < kIoBenchStampBytes) {
    return Status::invalid_argument(fmt::format(
        "--tensor: {} is smaller than the {}-byte stamp that verifies each tensor read back; use --tensor {} or more",
        format_bytes(static_cast<double>(config.tensor_bytes)), kIoBenchStampBytes, kIoBenchStampBytes));
  }
  if (layout.last_tensor_bytes < kIoBenchStampBytes) {
    return Status::invalid_argument(fmt::format(
        "--size: {} leaves a last tensor of {} (after {} of --tensor {}), smaller than the {}-byte stamp that "
        "verifies each tensor read back; use a --size that is a multiple of --tensor",
        format_bytes(static_cast<double>(config.size_bytes)),
        format_bytes(static_cast<double>(layout.last_tensor_bytes)), layout.tensor_count - 1,
        format_bytes(static_cast<double>(config.tensor_bytes)), kIoBenchStampBytes));
  }
  layout.buffer_alignment_bytes = std::max<std::uint64_t>(4096, buffer_alignment_bytes);
  const std::uint64_t buffer_bytes =
      ceil_div(config.tensor_bytes, layout.buffer_alignment_bytes) * layout.buffer_alignment_bytes;
  // The ring gets what the staging pool leaves of the memory bound.
  if (config.staging_bytes >= config.memory_limit_bytes) {
    return Status::invalid_argument(fmt::format(
        "--qd/--block: {} of staging buffers leaves nothing of the {} memory bound for tensors; lower --qd or --block",
        format_bytes(static_cast<double>(config.staging_bytes)),
        format_bytes(static_cast<double>(config.memory_limit_bytes))));
  }
  const std::uint64_t ring_limit = config.memory_limit_bytes - config.staging_bytes;
  if (buffer_bytes > ring_limit) {
    return Status::invalid_argument(fmt::format(
        "--tensor: {} does not fit the {} memory bound of bench io next to {} of staging buffers; use --tensor {} or "
        "less",
        format_bytes(static_cast<double>(config.tensor_bytes)),
        format_bytes(static_cast<double>(config.memory_limit_bytes)),
        format_bytes(static_cast<double>(config.staging_bytes)),
        format_bytes(static_cast<double>(ring_limit / layout.buffer_alignment_bytes * layout.buffer_alignment_bytes))));
  }
  // queue_depth x block bytes in flight, plus one tensor so the queue stays full while the oldest
  // is retired; two tensors at least where the memory bound allows, never more than there are.
  std::uint64_t window = std::max<std::uint64_t>(2, ceil_div(block_bytes * queue_depth, config.tensor_bytes) + 1);
  const std::uint64_t by_memory = ring_limit / buffer_bytes;  // >= 1, checked above
  window = std::min({window, by_memory, layout.tensor_count});
  layout.window_tensors = static_cast<std::size_t>(window);
  layout.ring_bytes = buffer_bytes * window;
  layout.memory_bytes = layout.ring_bytes + config.staging_bytes;
  // The largest power of two dividing the block (so every chunk starts with a stamp), at most 64 KiB.
  layout.stamp_stride_bytes = std::min<std::uint64_t>(kMaxStampStride, block_bytes & (~block_bytes + 1));
  return layout;
}

Result<IoBenchResult> run_io_bench(io::SwapStore& store, const IoBenchConfig& config) {
  std::uint64_t alignment = 1;
  for (const io::SwapPathInfo& path : store.paths())
    alignment = std::max<std::uint64_t>(alignment, path.memory_alignment_bytes);
  IoBenchResult result;
  // The bound counts the staging pool the store really has.
  IoBenchConfig bounded = config;
  bounded.staging_bytes = store.stats().staging_bytes;
  ZINF_ASSIGN_OR_RETURN(result.layout, plan_io_bench(bounded, store.block_bytes(), store.queue_depth(), alignment));
  const IoBenchLayout& layout = result.layout;

  std::vector<memory::AlignedBuffer> ring;
  ring.reserve(layout.window_tensors);
  const std::uint64_t buffer_bytes = layout.ring_bytes / layout.window_tensors;
  for (std::size_t slot = 0; slot < layout.window_tensors; ++slot) {
    ZINF_ASSIGN_OR_RETURN(memory::AlignedBuffer buffer,
                          memory::AlignedBuffer::allocate(static_cast<std::size_t>(buffer_bytes),
                                                          static_cast<std::size_t>(layout.buffer_alignment_bytes)));
    fill_pattern(buffer.bytes(), config.seed * 1000003u + slot);
    ring.push_back(std::move(buffer));
  }

  std::vector<io::Ticket> extents(layout.tensor_count);
  PassRunner runner(store, config, layout, ring, extents);
  bool allocated = false;
  std::uint64_t last_write_pass = 0;
  // The order of a random pass depends on the seed, the test and the sample, so repeats differ.
  const auto order_for = [&](IoTest test, unsigned sample) {
    return is_random_test(test) ? shuffled(layout.tensor_count, config.seed ^ (0x51ed270b27c8a2f5ull * (1 + sample)) ^
                                                                    (static_cast<std::uint64_t>(test) << 56))
                                : in_order(layout.tensor_count);
  };

  Status status;
  if (!is_write_test(config.tests.front())) {
    IoSample untimed;
    status = runner.run(PassRunner::Kind::kAllocate, in_order(layout.tensor_count), ++last_write_pass, untimed);
    allocated = status.is_ok();
    result.prefilled = true;
  }
  bool overwritten = false;  // after_sample wrote over the extents since the last zinf write
  for (std::size_t t = 0; t < config.tests.size() && status.is_ok(); ++t) {
    const IoTest test = config.tests[t];
    IoTestResult test_result;
    test_result.test = test;
    for (unsigned r = 0; r < config.repeat && status.is_ok(); ++r) {
      IoSample sample;
      if (is_write_test(test)) {
        const auto kind = allocated ? PassRunner::Kind::kRewrite : PassRunner::Kind::kAllocate;
        status = runner.run(kind, order_for(test, r), ++last_write_pass, sample);
        allocated = allocated || status.is_ok();
        overwritten = false;
      } else {
        if (overwritten) {
          IoSample untimed;
          status = runner.run(PassRunner::Kind::kRewrite, in_order(layout.tensor_count), ++last_write_pass, untimed);
          ++result.untimed_rewrites;
          overwritten = false;
          if (!status.is_ok()) break;
        }
        status = runner.run(PassRunner::Kind::kRead, order_for(test, r), last_write_pass, sample);
      }
      if (status.is_ok() && config.after_sample) {
        status = config.after_sample(test, r, config.repeat, sample);
        overwritten = overwritten || (is_write_test(test) && config.after_sample_overwrites);
      }
      test_result.samples.push_back(std::move(sample));
    }
    if (!status.is_ok()) break;
    std::vector<double> gbps;
    std::vector<double> latencies;
    bool all_right = true;
    for (const IoSample& s : test_result.samples) {
      gbps.push_back(s.gbps);
      latencies.insert(latencies.end(), s.latencies_seconds.begin(), s.latencies_seconds.end());
      all_right = all_right && s.tensors_wrong == 0;
    }
    test_result.gbps = spread_of(gbps);
    test_result.latency = summarize_latencies(latencies);
    if (!is_write_test(test)) {
      test_result.verified = all_right;
      result.verified = result.verified.value_or(true) && all_right;
    }
    result.tests.push_back(std::move(test_result));
  }

  result.stats = store.stats();
  result.paths = store.paths();
  if (allocated) {
    for (const io::Ticket& extent : extents) {
      const Status released = store.release(extent);
      if (status.is_ok() && !released.is_ok()) status = released;
    }
  }
  if (!status.is_ok()) return status;
  return result;
}

}  // namespace zinf::probes
