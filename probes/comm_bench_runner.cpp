// run_comm_bench (comm_bench_runner.h): buffers, the two sides, timing and the closed-form check.
#include "probes/comm_bench_runner.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "kernels/convert.h"
#include "libengine/comm/half_sum.h"
#include "libengine/comm/mpi_communicator.h"
#include "libengine/core/units.h"
#include "libengine/device/cpu_device.h"
#include "probes/latency_stats.h"

namespace zinf::probes {
namespace {

using Clock = std::chrono::steady_clock;

extern "C" void zinf_bench_bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  comm::half_sum_in_place(DType::kBF16, in, inout, static_cast<std::size_t>(*len));
}
extern "C" void zinf_bench_f16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  comm::half_sum_in_place(DType::kF16, in, inout, static_cast<std::size_t>(*len));
}

// `value` stored as `dtype`, as raw bits in the low bytes of the result.
std::uint32_t encode(DType dtype, float value) {
  if (dtype == DType::kF32) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
  }
  std::uint16_t half = 0;
  kernels::cpu::f32_to_half(dtype == DType::kBF16 ? kernels::HalfFormat::kBF16 : kernels::HalfFormat::kF16, &value,
                            &half, 1);
  return half;
}

void fill(std::vector<std::byte>& buffer, DType dtype, float value) {
  const std::uint32_t bits = encode(dtype, value);
  const std::size_t size = dtype_size_bytes(dtype);
  for (std::size_t offset = 0; offset + size <= buffer.size(); offset += size) {
    std::memcpy(buffer.data() + offset, &bits, size);
  }
}

// Elements of `buffer` in [begin, end) whose bits differ from `value` in `dtype`.
std::uint64_t count_wrong(const std::vector<std::byte>& buffer, DType dtype, std::size_t begin, std::size_t end,
                          float value) {
  const std::uint32_t bits = encode(dtype, value);
  const std::size_t size = dtype_size_bytes(dtype);
  std::uint64_t wrong = 0;
  for (std::size_t i = begin; i < end; ++i) {
    std::uint32_t got = 0;
    std::memcpy(&got, buffer.data() + i * size, size);
    if (got != bits) ++wrong;
  }
  return wrong;
}

double bus_factor(CommOp op, int world) {
  const double n = world;
  return op == CommOp::kAllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

// The two sides over the same buffers.
class Bench {
 public:
  Bench(const CommBenchConfig& config, comm::Communicator& comm, device::Stream& stream, MPI_Comm base, MPI_Op half_op)
      : config_(config), comm_(comm), stream_(stream), base_(base), half_op_(half_op) {}

  Result<CommBenchRow> measure(CommOp op, std::uint64_t block) {
    const int world = comm_.world_size();
    const std::size_t elem = dtype_size_bytes(config_.dtype);
    const std::size_t total = block * static_cast<std::size_t>(world);
    send_.assign((op == CommOp::kReduceScatter ? total : block) * elem, std::byte{0});
    recv_.assign((op == CommOp::kAllGather ? total : block) * elem, std::byte{0});
    fill(send_, config_.dtype, static_cast<float>(comm_.rank() + 1));

    CommBenchRow row;
    row.op = op;
    row.count = op == CommOp::kAllReduce ? block : total;
    row.bytes = row.count * elem;
    for (int i = 0; i < config_.warmup; ++i) {
      ZINF_RETURN_IF_ERROR(run_ours(op, block, 1).status());
      ZINF_RETURN_IF_ERROR(run_mpi(op, block, 1).status());
    }
    // Enough calls for a repetition of min_repetition_seconds, at most 100,000, from an untimed
    // round of `iters` calls of each side (the slowest rank's mean: every rank picks the same count).
    row.iters = config_.iters;
    if (config_.min_repetition_seconds > 0) {
      ZINF_ASSIGN_OR_RETURN(const double ours_us, run_ours(op, block, config_.iters));
      ZINF_ASSIGN_OR_RETURN(const double mpi_us, run_mpi(op, block, config_.iters));
      const double per_call = std::max(ours_us, mpi_us) * 1e-6;
      if (per_call * config_.iters < config_.min_repetition_seconds) {
        row.iters = static_cast<int>(std::min(100000.0, std::ceil(config_.min_repetition_seconds / per_call)));
      }
    }
    for (int rep = 0; rep < config_.repeat; ++rep) {
      double ours_us = 0;
      double mpi_us = 0;
      // Which side goes first alternates: the second of two back-to-back runs finds caches, MPI's
      // free lists and the peer's timing warmed by the first.
      if (rep % 2 == 0) {
        ZINF_ASSIGN_OR_RETURN(ours_us, run_ours(op, block, row.iters));
        ZINF_ASSIGN_OR_RETURN(mpi_us, run_mpi(op, block, row.iters));
      } else {
        ZINF_ASSIGN_OR_RETURN(mpi_us, run_mpi(op, block, row.iters));
        ZINF_ASSIGN_OR_RETURN(ours_us, run_ours(op, block, row.iters));
      }
      row.ours.time_us.push_back(ours_us);
      row.mpi.time_us.push_back(mpi_us);
      row.ratio.push_back(mpi_us / ours_us);  // busbw ratio = inverse time ratio (same bytes)
    }
    ZINF_ASSIGN_OR_RETURN(row.ours.wrong, check(op, block, true));
    ZINF_ASSIGN_OR_RETURN(row.mpi.wrong, check(op, block, false));
    for (CommBenchSide* side : {&row.ours, &row.mpi}) {
      side->time_us_median = spread_of(side->time_us).median;
      side->algbw_gbps = static_cast<double>(row.bytes) / (side->time_us_median * 1e-6) / 1e9;
      side->busbw_gbps = side->algbw_gbps * bus_factor(op, world);
    }
    return row;
  }

 private:
  Status mpi_call(CommOp op, std::uint64_t block) {
    const MPI_Datatype type = config_.dtype == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T;
    const MPI_Op sum = config_.dtype == DType::kF32 ? MPI_SUM : half_op_;
    const int n = static_cast<int>(block);
    int rc = MPI_SUCCESS;
    switch (op) {
      case CommOp::kAllGather:
        rc = MPI_Allgather(send_.data(), n, type, recv_.data(), n, type, base_);
        break;
      case CommOp::kReduceScatter:
        rc = MPI_Reduce_scatter_block(send_.data(), recv_.data(), n, type, sum, base_);
        break;
      case CommOp::kAllReduce:
        rc = MPI_Allreduce(send_.data(), recv_.data(), n, type, sum, base_);
        break;
    }
    if (rc != MPI_SUCCESS) return Status::internal(fmt::format("bench comm: MPI baseline {} failed", comm_op_name(op)));
    return Status::ok();
  }

  void ours_call(CommOp op, std::uint64_t block) {
    switch (op) {
      case CommOp::kAllGather:
        comm_.all_gather(send_.data(), recv_.data(), block, config_.dtype, stream_);
        break;
      case CommOp::kReduceScatter:
        comm_.reduce_scatter(send_.data(), recv_.data(), block, config_.dtype, stream_);
        break;
      case CommOp::kAllReduce:
        comm_.all_reduce(send_.data(), recv_.data(), block, config_.dtype, stream_);
        break;
    }
  }

  // Mean microseconds per call over `iters` calls, the slowest rank's.
  Result<double> slowest(Clock::time_point start, int iters) {
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
    double max_us = 0;
    if (MPI_Allreduce(&us, &max_us, 1, MPI_DOUBLE, MPI_MAX, base_) != MPI_SUCCESS) {
      return Status::internal("bench comm: MPI_Allreduce of the timings failed");
    }
    return max_us;
  }

  Result<double> run_ours(CommOp op, std::uint64_t block, int iters) {
    MPI_Barrier(base_);
    const Clock::time_point start = Clock::now();
    // Enqueued back to back and synchronised once, as nccl-tests does on a stream.
    for (int i = 0; i < iters; ++i) ours_call(op, block);
    ZINF_RETURN_IF_ERROR(stream_.synchronize());
    return slowest(start, iters);
  }

  Result<double> run_mpi(CommOp op, std::uint64_t block, int iters) {
    MPI_Barrier(base_);
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < iters; ++i) ZINF_RETURN_IF_ERROR(mpi_call(op, block));
    return slowest(start, iters);
  }

  // One more call into a cleared receive buffer, checked against the closed form on every rank.
  Result<std::uint64_t> check(CommOp op, std::uint64_t block, bool ours) {
    std::fill(recv_.begin(), recv_.end(), std::byte{0});
    if (ours) {
      ours_call(op, block);
      ZINF_RETURN_IF_ERROR(stream_.synchronize());
    } else {
      ZINF_RETURN_IF_ERROR(mpi_call(op, block));
    }
    const int world = comm_.world_size();
    std::uint64_t wrong = 0;
    if (op == CommOp::kAllGather) {
      for (int r = 0; r < world; ++r) {
        const std::size_t begin = static_cast<std::size_t>(r) * block;
        wrong += count_wrong(recv_, config_.dtype, begin, begin + block, static_cast<float>(r + 1));
      }
    } else {
      wrong = count_wrong(recv_, config_.dtype, 0, block, static_cast<float>(world * (world + 1) / 2));
    }
    std::uint64_t total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_UINT64_T, MPI_SUM, base_);
    return total;
  }

  const CommBenchConfig& config_;
  comm::Communicator& comm_;
  device::Stream& stream_;
  MPI_Comm base_;
  MPI_Op half_op_;
  std::vector<std::byte> send_;
  std::vector<std::byte> recv_;
};

}  // namespace

Result<CommBenchResult> run_comm_bench(const CommBenchConfig& config,
                                       const std::function<void(const std::string&)>& progress) {
  std::unique_ptr<device::Device> device = device::make_cpu_device({});
  comm::CommOptions options;
  options.timeout = config.timeout;
  options.inline_max_bytes = static_cast<std::size_t>(config.inline_max_bytes);
  options.inline_max_reduce_bytes = static_cast<std::size_t>(config.inline_max_reduce_bytes);
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> comm, comm::make_mpi_communicator(*device, options));

  CommBenchResult result;
  result.rank = comm->rank();
  result.world_size = comm->world_size();
  result.local_size = comm->local_size();
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  result.mpi_library = std::string(version, static_cast<std::size_t>(length));
  result.mpi_library = result.mpi_library.substr(0, result.mpi_library.find_first_of("\n,"));
  int provided = 0;
  MPI_Query_thread(&provided);
  result.thread_level = provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_SERIALIZED";

  // The baseline's own communicator and 16-bit sum, so neither side shares state with the other.
  MPI_Comm base = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  MPI_Op half_op = MPI_OP_NULL;
  if (config.dtype != DType::kF32) {
    MPI_Op_create(config.dtype == DType::kBF16 ? zinf_bench_bf16_sum : zinf_bench_f16_sum, 1, &half_op);
  }
  Bench bench(config, *comm, device->stream(device::StreamRole::kCollective), base, half_op);
  const std::size_t elem = dtype_size_bytes(config.dtype);
  Status status;
  for (const CommOp op : config.ops) {
    std::uint64_t previous_block = 0;
    for (std::uint64_t bytes = config.min_bytes; bytes <= config.max_bytes && status.is_ok(); bytes *= 2) {
      // Per-rank block: all_reduce moves `bytes` per rank; the others split it over the ranks,
      // rounded up to whole elements per rank so that no size is below --min-bytes (the sizes
      // are whole elements: bench_comm.cpp refuses others). Rounding can give two sizes the same
      // block (fewer elements than ranks): that one is measured once.
      const std::uint64_t divisor = op == CommOp::kAllReduce ? 1 : static_cast<std::uint64_t>(result.world_size);
      const std::uint64_t block = (bytes / elem + divisor - 1) / divisor;
      if (block == previous_block) continue;
      previous_block = block;
      // The size measured, as the table and the record show it.
      const std::uint64_t measured = block * divisor * elem;
      if (result.rank == 0) {
        progress(fmt::format("{} {}", comm_op_name(op), format_bytes(static_cast<double>(measured))));
      }
      Result<CommBenchRow> row = bench.measure(op, block);
      if (!row.is_ok()) {
        status = row.status();
        break;
      }
      result.rows.push_back(std::move(row).value());
    }
  }
  if (!status.is_ok()) return status;  // the communicator is broken: MPI is not touched again
  if (half_op != MPI_OP_NULL) MPI_Op_free(&half_op);
  MPI_Comm_free(&base);
  return result;
}

}  // namespace zinf::probes
