// The measuring half of `zinf bench comm`: collectives through zinf's Communicator (the MPI one)
// next to an OSU-style baseline written here — plain blocking MPI calls (MPI_Allgather,
// MPI_Reduce_scatter_block, MPI_Allreduce) on the same buffers, in the same run, repetitions
// alternating so drift hits both alike. Sizes and bandwidths follow nccl-tests: size is the bytes
// of the whole operation (all_gather: the gathered buffer; reduce_scatter: the buffer reduced;
// all_reduce: the buffer), algbw = size / time, busbw = algbw x (n-1)/n (all_gather,
// reduce_scatter) or 2(n-1)/n (all_reduce), time the slowest rank's. Every result is checked
// against the closed form (rank r contributes r + 1): #wrong counts the wrong elements on all ranks.
// Every rank runs this; the figures come back identical on every rank. Needs MPI (ZINF_WITH_MPI).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/dtype.h"
#include "libengine/core/status.h"

namespace zinf::probes {

enum class CommOp { kAllGather, kReduceScatter, kAllReduce };
// "all_gather", "reduce_scatter", "all_reduce".
constexpr const char* comm_op_name(CommOp op) {
  return op == CommOp::kAllGather ? "all_gather" : op == CommOp::kReduceScatter ? "reduce_scatter" : "all_reduce";
}

struct CommBenchConfig {
  std::vector<CommOp> ops;
  std::uint64_t min_bytes = 1024;
  std::uint64_t max_bytes = 64ull << 20;
  DType dtype = DType::kF32;
  int iters = 10;  // timed calls per repetition, at least (see min_repetition_seconds)
  // Sizes whose `iters` calls take less than this get more calls, the same on both sides: a
  // repetition of 20 calls of a 1.5 us collective lasts 30 us, shorter than the clock and the
  // scheduler's noise (OSU's benchmarks likewise run 10x more iterations for small messages). At
  // 1 ms (~600 calls of a 4 KiB collective) one preemption still moved a repetition by 10%: single
  // runs of 33 sizes had one or two below 0.9x; at 10 ms none in three.
  double min_repetition_seconds = 10e-3;
  int warmup = 2;  // untimed calls before the repetitions, per side
  int repeat = 3;  // repetitions per side, alternating
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // The communicator's CommOptions::inline_max_bytes (all_gather) and inline_max_reduce_bytes
  // (reduce_scatter, all_reduce): zinf's collectives up to these sizes run on the calling thread
  // while the stream is idle; 0 enqueues every one (the stream thread's hand-off).
  std::uint64_t inline_max_bytes = comm::kDefaultInlineMaxBytes;
  std::uint64_t inline_max_reduce_bytes = comm::kDefaultInlineMaxReduceBytes;
};

struct CommBenchSide {
  std::vector<double> time_us;  // per repetition: mean per call, slowest rank
  double time_us_median = 0;
  double algbw_gbps = 0;  // from the median time
  double busbw_gbps = 0;
  std::uint64_t wrong = 0;
};

struct CommBenchRow {
  CommOp op = CommOp::kAllReduce;
  std::uint64_t bytes = 0;  // nccl-tests "size"
  std::uint64_t count = 0;  // elements of the whole operation
  int iters = 0;            // timed calls per repetition used for this size
  CommBenchSide ours;
  CommBenchSide mpi;
  std::vector<double> ratio;  // busbw ours / MPI per repetition
};

struct CommBenchResult {
  int rank = 0;  // this process's: rank 0 prints and writes
  int world_size = 1;
  int local_size = 1;
  std::string mpi_library;   // MPI_Get_library_version, first line
  std::string thread_level;  // what MPI granted
  std::vector<CommBenchRow> rows;
};

// Runs the benchmark on every rank (collective: every rank must call it with the same config).
// `progress` is called on rank 0 only. Fails when MPI cannot start or a collective fails.
Result<CommBenchResult> run_comm_bench(const CommBenchConfig& config,
                                       const std::function<void(const std::string&)>& progress);

}  // namespace zinf::probes
