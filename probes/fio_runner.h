// fio_runner: fio as the baseline of `zinf bench io`. Builds fio's argument vector for one job,
// runs fio as a child process (posix_spawn, no shell) capturing its output, and reads the figures
// that matter out of fio's JSON report.
//
// It knows nothing about SwapStore: the caller passes the file names fio should use (for zinf, the
// /proc/<pid>/fd/<n> paths of the store's own swap files, so fio and zinf measure the same blocks
// of the same files). Not a general fio wrapper: one job, size-based, group-reported.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/status.h"
#include "probes/process.h"

namespace zinf::probes {

enum class FioDirection { kRead, kWrite };

// One fio job, size-based (never time-based).
struct FioJob {
  std::string name;                    // --name, e.g. "zinf-seq-read"
  std::vector<std::string> filenames;  // one per swap path; fio takes them as a ':' list
  std::string rw;                      // write, read, randwrite, randread, or rw / randrw (mixed)
  unsigned rwmixread = 0;              // mixed jobs only: the percentage of I/Os that read, 1..99
  std::string ioengine = "io_uring";
  bool direct = true;            // --direct=1 (O_DIRECT) or 0 (buffered)
  std::string iomem = "malloc";  // --iomem: fio's own buffers; "shmhuge" puts them on huge pages
  std::uint64_t block_bytes = 1 << 20;
  unsigned iodepth = 32;
  std::uint64_t size_bytes = 0;  // total over all files; fio gives each file an equal share
};

// Whether `rw` reads or writes; ZINF_CHECK on anything but the four one-direction names above.
FioDirection fio_direction(std::string_view rw);

// fio's argv with `fio_path` as argv[0]. InvalidArgument when a file name contains ':' (fio's
// list separator), the job is incomplete (no files, zero size, block or depth), `rw` is none of
// the names above, or a mixed job's rwmixread is outside 1..99.
Result<std::vector<std::string>> fio_argv(const std::string& fio_path, const FioJob& job);

// The argv as one line a person can paste into a shell (arguments quoted where needed).
std::string shell_command_line(std::span<const std::string> argv);

// What fio measured for the job's one direction.
struct FioMeasurement {
  std::string fio_version;     // "fio-3.33"
  std::uint64_t io_bytes = 0;  // bytes transferred
  double runtime_seconds = 0.0;
  double bytes_per_second = 0.0;  // fio's bw_bytes
  std::uint64_t total_ios = 0;
  // Completion latency per I/O (one block), nanoseconds; percentiles are 0 when fio reported none.
  double clat_mean_ns = 0.0;
  double clat_p50_ns = 0.0;
  double clat_p90_ns = 0.0;
  double clat_p99_ns = 0.0;
  double clat_max_ns = 0.0;
};

// Parses fio's --output-format=json report (text before the first '{', such as warnings fio
// prints to stdout, is skipped) and returns jobs[0]'s figures for `direction`. InvalidArgument
// naming the missing or malformed field, or fio's own job error.
Result<FioMeasurement> parse_fio_json(std::string_view text, FioDirection direction);

// Runs fio with `argv` (from fio_argv) and parses its report. IoError with fio's last stderr line
// when fio fails.
Result<FioMeasurement> run_fio(std::span<const std::string> argv, FioDirection direction);

// What fio measured for a mixed (rw / randrw) job: both directions, and the drive's mixed rate —
// every byte moved over the job's run time (the longer of the two directions' runtimes; they run
// together).
struct FioMixedMeasurement {
  FioMeasurement read;
  FioMeasurement write;
  double bytes_per_second = 0.0;
};

// parse_fio_json for both directions of a mixed job. Errors as parse_fio_json's.
Result<FioMixedMeasurement> parse_fio_mixed_json(std::string_view text);
// run_fio for a mixed job.
Result<FioMixedMeasurement> run_fio_mixed(std::span<const std::string> argv);

}  // namespace zinf::probes
