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

// The step's NVMe traffic as fio runs it: two jobs in one group on the same files, started
// together, one reading a region while the other writes another (the engine reads some extents
// while it writes others, never one offset stream alternating directions, which is what a single
// `rw` job does). Each job's size is its direction's share of the step's bytes, and the rate is
// every byte over the longer job's runtime (parse_fio_mixed_json): the time the drive needs to
// move the step's reads and writes started together. fio's `flow=` weights would hold the two at
// the ratio throughout, but on a 2-core VM its flow control halved the rate (1.21 against 2.42
// GB/s, same files, same run; docs/nvme.md), so it is not used.
// Both directions are group-reported together.
struct FioSplitMix {
  std::string name;                    // jobs "<name>-read" and "<name>-write"
  std::vector<std::string> filenames;  // one per swap path, as FioJob's
  unsigned read_percent = 50;          // of the bytes, 1..99 (step_read_percent)
  std::string ioengine = "io_uring";
  bool direct = true;
  std::string iomem = "malloc";
  std::uint64_t block_bytes = 1 << 20;
  // Chunks in flight over both jobs (the swap store's queue depth: it never has more in flight in
  // all); the read job gets half, rounded down, the write job the rest, each at least 1.
  unsigned iodepth = 32;
  std::uint64_t size_bytes = 0;  // bytes of both jobs together, over all files
  std::uint64_t file_bytes = 0;  // bytes of each file: the two regions must fit in it
};

// How a FioSplitMix divides its files, in whole blocks: per file, the read job covers
// [0, read_bytes_per_file) and the write job [read_bytes_per_file, read + write_bytes_per_file).
struct FioSplitLayout {
  std::uint64_t read_bytes_per_file = 0;
  std::uint64_t write_bytes_per_file = 0;
  unsigned read_iodepth = 0;
  unsigned write_iodepth = 0;
  std::uint64_t read_bytes() const;  // over all files (FioSplitMix::filenames.size() of them)
  std::uint64_t write_bytes() const;
  std::uint64_t files = 0;
};

// The layout: size_bytes cut into whole blocks, the read job's share of them the nearest to
// read_percent with at least one block per file for each job, then capped to what the files hold.
// InvalidArgument when the job is incomplete, read_percent is outside 1..99, or a file cannot hold
// one block of each job.
Result<FioSplitLayout> fio_split_layout(const FioSplitMix& mix);

// fio's argv for the two jobs: global options first, then each job's --name, --rw, --offset,
// --size and --iodepth. Errors as fio_split_layout's, and file names as fio_argv's.
Result<std::vector<std::string>> fio_split_mix_argv(const std::string& fio_path, const FioSplitMix& mix);

// The bytes of huge pages free now, from /proc/meminfo's text (HugePages_Free x Hugepagesize); 0
// when either line is missing. fio's `--iomem=shmhuge` needs them: with 4 KiB-page buffers
// (`malloc`) a 1 MiB direct request spans 256 segments and is split at a virtio disk's 254,
// which held fio at a third of the drive's rate (docs/nvme.md).
std::uint64_t huge_page_bytes_free(std::string_view meminfo);
// The fio buffers (--iomem) for jobs holding `buffer_bytes` in flight: "shmhuge" when the
// machine has that many bytes of huge pages free plus one page per job, else "malloc".
std::string fio_iomem_for(std::uint64_t buffer_bytes, unsigned jobs, std::string_view meminfo);

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
