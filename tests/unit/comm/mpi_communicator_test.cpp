// MpiCommunicator under mpirun (CTest runs this binary with 2, 3 and 4 ranks): every collective for
// every dtype against closed forms (rank r contributes multiples of r + 1, small integers every
// dtype holds exactly), in place and out of place, bf16/fp16 sums of inexact values against an fp64
// reference with the rounding bound of one rounding per addition, the host all-reduce bit-identical
// on every rank, and LaunchInfo agreeing with MPI. Every rank runs the same test cases in the same
// order, as MPI requires.
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/convert.h"
#include "libengine/comm/launch_info.h"
#include "libengine/comm/mpi_communicator.h"
#include "libengine/device/cpu_device.h"
#include "tests/catch.h"

namespace zinf::comm {
namespace {

struct World {
  std::unique_ptr<device::Device> device = device::make_cpu_device({});
  std::unique_ptr<Communicator> comm;
  // Inline bounds (CommOptions): the defaults, or `inline_max_bytes` for every collective.
  World() : World(kDefaultInlineMaxBytes, kDefaultInlineMaxReduceBytes) {}
  explicit World(std::size_t inline_max_bytes) : World(inline_max_bytes, inline_max_bytes) {}
  World(std::size_t inline_max_bytes, std::size_t inline_max_reduce_bytes) {
    CommOptions options;
    options.timeout = std::chrono::seconds(60);
    options.inline_max_bytes = inline_max_bytes;
    options.inline_max_reduce_bytes = inline_max_reduce_bytes;
    Result<std::unique_ptr<Communicator>> made = make_mpi_communicator(*device, options);
    REQUIRE(made.is_ok());
    comm = std::move(made).value();
  }
  device::Stream& stream() { return device->stream(device::StreamRole::kCollective); }
};

// Values as stored in `dtype`, from fp32.
std::vector<std::uint16_t> to_half(DType dtype, const std::vector<float>& values) {
  std::vector<std::uint16_t> out(values.size());
  kernels::cpu::f32_to_half(dtype == DType::kBF16 ? kernels::HalfFormat::kBF16 : kernels::HalfFormat::kF16,
                            values.data(), out.data(), values.size());
  return out;
}
std::vector<float> from_half(DType dtype, const std::vector<std::uint16_t>& values) {
  std::vector<float> out(values.size());
  kernels::cpu::half_to_f32(dtype == DType::kBF16 ? kernels::HalfFormat::kBF16 : kernels::HalfFormat::kF16,
                            values.data(), out.data(), values.size());
  return out;
}

// A buffer of `values` in `dtype`: raw bytes to hand to the communicator, read back as fp32.
struct Buffer {
  DType dtype;
  std::vector<float> f32;
  std::vector<std::uint16_t> half;
  Buffer(DType type, const std::vector<float>& values) : dtype(type) {
    if (dtype == DType::kF32) {
      f32 = values;
    } else {
      half = to_half(dtype, values);
    }
  }
  void* data() { return dtype == DType::kF32 ? static_cast<void*>(f32.data()) : static_cast<void*>(half.data()); }
  std::vector<float> values() const { return dtype == DType::kF32 ? f32 : from_half(dtype, half); }
};

float pattern(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 5 + 1)); }

TEST_CASE("mpi communicator: ranks agree with the launcher's environment") {
  World w;
  CHECK(w.comm->backend() == "mpi");
  Result<LaunchInfo> launch = launch_info_from_environment();
  REQUIRE(launch.is_ok());
  CHECK(launch->launcher == "mpirun");
  CHECK(launch->rank == w.comm->rank());
  CHECK(launch->world_size == w.comm->world_size());
  CHECK(launch->local_rank == w.comm->local_rank());
  CHECK(launch->local_size == w.comm->local_size());
  CHECK(w.comm->barrier().is_ok());
}

TEST_CASE("mpi communicator: every collective for every dtype against closed forms") {
  // Inline off, the default bounds (the stream is idle at the first call only), and on for every
  // size (collectives issued behind queued work still queue).
  const int inline_mode = GENERATE(0, 1, 2);
  CAPTURE(inline_mode);
  World w = inline_mode == 0 ? World(0) : inline_mode == 1 ? World() : World(SIZE_MAX);
  const int n = w.comm->world_size();
  const int me = w.comm->rank();
  const auto world = static_cast<std::size_t>(n);
  const std::size_t count = 1000;  // per rank block
  const float rank_sum = static_cast<float>(n * (n + 1) / 2);
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    CAPTURE(dtype_name(dtype));
    std::vector<float> mine(count);
    for (std::size_t i = 0; i < count; ++i) mine[i] = pattern(me, i);
    std::vector<float> whole(count * world);
    for (std::size_t i = 0; i < whole.size(); ++i) whole[i] = pattern(me, i);

    // all_gather, out of place and in place.
    Buffer send(dtype, mine);
    Buffer gathered(dtype, std::vector<float>(count * world, -1.0f));
    w.comm->all_gather(send.data(), gathered.data(), count, dtype, w.stream());
    std::vector<float> in_place_values(count * world, -1.0f);
    for (std::size_t i = 0; i < count; ++i) in_place_values[static_cast<std::size_t>(me) * count + i] = mine[i];
    Buffer in_place(dtype, in_place_values);
    char* base = static_cast<char*>(in_place.data());
    w.comm->all_gather(base + static_cast<std::size_t>(me) * count * dtype_size_bytes(dtype), in_place.data(), count,
                       dtype, w.stream());

    // reduce_scatter, out of place and in place; all_reduce, out of place and in place.
    Buffer rs_send(dtype, whole);
    Buffer rs_out(dtype, std::vector<float>(count, -1.0f));
    w.comm->reduce_scatter(rs_send.data(), rs_out.data(), count, dtype, w.stream());
    Buffer rs_in_place(dtype, whole);
    char* rs_base = static_cast<char*>(rs_in_place.data());
    void* rs_mine = rs_base + static_cast<std::size_t>(me) * count * dtype_size_bytes(dtype);
    w.comm->reduce_scatter(rs_in_place.data(), rs_mine, count, dtype, w.stream());
    Buffer ar_out(dtype, std::vector<float>(count, -1.0f));
    w.comm->all_reduce(send.data(), ar_out.data(), count, dtype, w.stream());
    Buffer ar_in_place(dtype, mine);
    w.comm->all_reduce(ar_in_place.data(), ar_in_place.data(), count, dtype, w.stream());
    REQUIRE(w.stream().synchronize().is_ok());

    const std::vector<float> g = gathered.values();
    const std::vector<float> gi = in_place.values();
    for (std::size_t r = 0; r < world; ++r) {
      for (std::size_t i = 0; i < count; ++i) {
        REQUIRE(g[r * count + i] == pattern(static_cast<int>(r), i));
        REQUIRE(gi[r * count + i] == pattern(static_cast<int>(r), i));
      }
    }
    const std::vector<float> rs = rs_out.values();
    const std::vector<float> rsi = rs_in_place.values();
    const std::vector<float> ar = ar_out.values();
    const std::vector<float> ari = ar_in_place.values();
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t global = static_cast<std::size_t>(me) * count + i;
      REQUIRE(rs[i] == rank_sum * static_cast<float>(global % 5 + 1));
      REQUIRE(rsi[global] == rank_sum * static_cast<float>(global % 5 + 1));
      REQUIRE(ar[i] == rank_sum * static_cast<float>(i % 5 + 1));
      REQUIRE(ari[i] == rank_sum * static_cast<float>(i % 5 + 1));
    }

    // broadcast from every root.
    for (int root = 0; root < n; ++root) {
      Buffer b(dtype, me == root ? mine : std::vector<float>(count, 0.0f));
      w.comm->broadcast(b.data(), count, dtype, root, w.stream());
      REQUIRE(w.stream().synchronize().is_ok());
      const std::vector<float> got = b.values();
      for (std::size_t i = 0; i < count; ++i) REQUIRE(got[i] == pattern(root, i));
    }
  }
  // A zero count is a no-op on every rank.
  w.comm->all_reduce(nullptr, nullptr, 0, DType::kF32, w.stream());
  CHECK(w.stream().synchronize().is_ok());
}

TEST_CASE("mpi communicator: bf16 and fp16 sums of inexact values stay within the bound of one rounding per add") {
  World w;
  const int n = w.comm->world_size();
  const int me = w.comm->rank();
  const std::size_t count = 4096;
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    CAPTURE(dtype_name(dtype));
    // Every rank can compute every rank's inputs, so the fp64 reference needs no communication.
    auto input = [&](int rank) {
      std::vector<float> v(count);
      for (std::size_t i = 0; i < count; ++i) {
        v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) * (1.0 + 0.01 * rank));
      }
      return from_half(dtype, to_half(dtype, v));  // exactly representable in dtype
    };
    Buffer buf(dtype, input(me));
    w.comm->all_reduce(buf.data(), buf.data(), count, dtype, w.stream());
    REQUIRE(w.stream().synchronize().is_ok());
    const std::vector<float> got = buf.values();
    // Unit roundoff u: 2^-8 for bf16 (8 significant bits), 2^-11 for fp16. n - 1 additions, each
    // rounded once: |got - exact| <= (n - 1) u sum|x| (first order, plus the final rounding).
    const double u = dtype == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    std::vector<std::vector<float>> all;
    for (int r = 0; r < n; ++r) all.push_back(input(r));
    for (std::size_t i = 0; i < count; ++i) {
      double exact = 0.0;
      double magnitude = 0.0;
      for (int r = 0; r < n; ++r) {
        exact += all[static_cast<std::size_t>(r)][i];
        magnitude += std::fabs(all[static_cast<std::size_t>(r)][i]);
      }
      const double bound = static_cast<double>(n) * u * magnitude + 1e-7;
      REQUIRE(std::fabs(static_cast<double>(got[i]) - exact) <= bound);
    }
  }
}

TEST_CASE("mpi communicator: host all-reduce is exact and identical on every rank") {
  World w;
  const int n = w.comm->world_size();
  const int me = w.comm->rank();
  std::vector<double> values = {static_cast<double>(me + 1), 0.1 * (me + 1)};
  REQUIRE(w.comm->all_reduce_host(values).is_ok());
  CHECK(values[0] == static_cast<double>(n * (n + 1) / 2));
  // Summed in rank order on every rank: the same bits as this loop.
  double expected = 0.0;
  for (int r = 0; r < n; ++r) expected += 0.1 * (r + 1);
  CHECK(values[1] == expected);
  // Gathering per-rank figures: each rank fills its own block of a zeroed vector.
  std::vector<double> blocks(static_cast<std::size_t>(n), 0.0);
  blocks[static_cast<std::size_t>(me)] = 10.0 * me;
  REQUIRE(w.comm->all_reduce_host(blocks).is_ok());
  for (int r = 0; r < n; ++r) CHECK(blocks[static_cast<std::size_t>(r)] == 10.0 * r);
  CHECK(w.comm->barrier().is_ok());
}

TEST_CASE("mpi communicator: a small collective on an idle stream has finished when the call returns") {
  World w;
  const int n = w.comm->world_size();
  const std::size_t count = 256;  // 1 KiB: under CommOptions::inline_max_bytes
  std::vector<float> values(count, static_cast<float>(w.comm->rank() + 1));
  REQUIRE(w.stream().synchronize().is_ok());  // idle
  w.comm->all_reduce(values.data(), values.data(), count, DType::kF32, w.stream());
  // Run on this thread (Stream::run_if_idle): the sum is there before any synchronize().
  const float sum = static_cast<float>(n * (n + 1) / 2);
  CHECK(values[0] == sum);
  CHECK(values[count - 1] == sum);
  REQUIRE(w.stream().synchronize().is_ok());
}

TEST_CASE("mpi communicator: small collectives inline and queued, mixed with host work, keep stream order") {
  for (const bool inline_on : {true, false}) {
    CAPTURE(inline_on);
    World w = inline_on ? World() : World(0);
    const int n = w.comm->world_size();
    const float s = static_cast<float>(n * (n + 1) / 2);  // sum over ranks of rank + 1
    const std::size_t count = 512;
    std::vector<float> x(count, static_cast<float>(w.comm->rank() + 1));
    std::vector<float> y(count, -1.0f);
    std::vector<float> big(count * 1024 * static_cast<std::size_t>(n), 0.0f);  // 2 MiB x ranks: always queued
    std::vector<float> mine(count * 1024, static_cast<float>(w.comm->rank() + 1));
    device::Stream& stream = w.stream();
    REQUIRE(stream.synchronize().is_ok());
    // 1. y = s (inline where allowed: the stream is idle).
    w.comm->all_reduce(x.data(), y.data(), count, DType::kF32, stream);
    // 2. host work that takes a while, queued: y += 1 on every rank.
    stream.enqueue([&y] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      for (float& v : y) v += 1.0f;
      return Status::ok();
    });
    // 3. behind it (the stream is busy): y = n (s + 1); y = n s + 1 if it overtook step 2.
    w.comm->all_reduce(y.data(), y.data(), count, DType::kF32, stream);
    // 4. a large gather, then a latency-bound host step and another small collective behind it.
    w.comm->all_gather(mine.data(), big.data(), mine.size(), DType::kF32, stream);
    device::enqueue_latency_bound(stream, [&y] {
      for (float& v : y) v *= 2.0f;
      return Status::ok();
    });
    w.comm->all_reduce(y.data(), y.data(), count, DType::kF32, stream);  // y = 2 n^2 (s + 1)
    REQUIRE(stream.synchronize().is_ok());
    const float expected = 2.0f * static_cast<float>(n * n) * (s + 1.0f);
    for (std::size_t i = 0; i < count; ++i) REQUIRE(y[i] == expected);
    for (int r = 0; r < n; ++r) {
      REQUIRE(big[static_cast<std::size_t>(r) * mine.size()] == static_cast<float>(r + 1));
      REQUIRE(big[static_cast<std::size_t>(r + 1) * mine.size() - 1] == static_cast<float>(r + 1));
    }
  }
}

TEST_CASE("mpi communicator: an inline collective's error reaches synchronize() as a queued one's does") {
  // More elements than MPI's int count: refused before any MPI call, so every rank may fail alike.
  const std::size_t too_many = static_cast<std::size_t>(INT_MAX) + 1;
  std::string messages[2];
  for (int i = 0; i < 2; ++i) {
    World w(i == 0 ? SIZE_MAX : 0);  // inline (the stream is idle) / queued
    w.comm->all_reduce(nullptr, nullptr, too_many, DType::kF32, w.stream());
    const Status status = w.stream().synchronize();
    CHECK(status.code() == ErrorCode::kInvalidArgument);
    messages[i] = status.message();
    CHECK(w.stream().synchronize().is_ok());  // reported once; the communicator is not broken
    std::vector<float> one(1, 1.0f);
    w.comm->all_reduce(one.data(), one.data(), 1, DType::kF32, w.stream());
    REQUIRE(w.stream().synchronize().is_ok());
    CHECK(one[0] == static_cast<float>(w.comm->world_size()));
  }
  CHECK(messages[0] == messages[1]);
  CHECK(messages[0].find("all_reduce #1 (8.00 GiB fp32) on rank") != std::string::npos);
  CHECK(messages[0].find("exceed MPI's int count") != std::string::npos);
}

}  // namespace
}  // namespace zinf::comm
