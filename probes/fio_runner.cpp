#include "probes/fio_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "libengine/core/check.h"

namespace zinf::probes {
namespace {

bool needs_quoting(std::string_view arg) {
  if (arg.empty()) return true;
  for (const char c : arg) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string_view("_-./:=,+@%").find(c) != std::string_view::npos;
    if (!plain) return true;
  }
  return false;
}

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const std::size_t newline = text.rfind('\n');
  return std::string(newline == std::string_view::npos ? text : text.substr(newline + 1));
}

Result<double> number_at(const nlohmann::json& parent, std::string_view key, std::string_view where) {
  const auto it = parent.find(std::string(key));
  if (it == parent.end() || !it->is_number()) {
    return Status::invalid_argument(fmt::format("fio report: {}.{} is missing or not a number", where, key));
  }
  return it->get<double>();
}

}  // namespace

FioDirection fio_direction(std::string_view rw) {
  if (rw == "read" || rw == "randread") return FioDirection::kRead;
  ZINF_CHECK(rw == "write" || rw == "randwrite", "fio rw must be read, randread, write or randwrite");
  return FioDirection::kWrite;
}

Result<std::vector<std::string>> fio_argv(const std::string& fio_path, const FioJob& job) {
  if (job.filenames.empty()) return Status::invalid_argument("fio job: no file names");
  if (job.size_bytes == 0 || job.block_bytes == 0 || job.iodepth == 0) {
    return Status::invalid_argument("fio job: size, block and iodepth must be positive");
  }
  std::string filenames;
  for (const std::string& name : job.filenames) {
    if (name.empty() || name.find(':') != std::string::npos) {
      return Status::invalid_argument(
          fmt::format("fio job: file name '{}' is empty or contains ':', which fio reads as a list separator", name));
    }
    filenames += (filenames.empty() ? "" : ":") + name;
  }
  const bool random = job.rw == "randread" || job.rw == "randwrite" || job.rw == "randrw";
  const bool mixed = job.rw == "rw" || job.rw == "randrw";
  if (!mixed && job.rw != "read" && job.rw != "write" && !random) {
    return Status::invalid_argument(
        fmt::format("fio job: rw '{}' is not one of read, write, randread, randwrite, rw, randrw", job.rw));
  }
  if (mixed && (job.rwmixread < 1 || job.rwmixread > 99)) {
    return Status::invalid_argument(
        fmt::format("fio job: rwmixread {} of a mixed job must be 1..99 (percent of I/Os that read)", job.rwmixread));
  }
  std::vector<std::string> argv = {
      fio_path,
      fmt::format("--name={}", job.name),
      fmt::format("--filename={}", filenames),
      fmt::format("--ioengine={}", job.ioengine),
      fmt::format("--direct={}", job.direct ? 1 : 0),
      fmt::format("--rw={}", job.rw),
      fmt::format("--bs={}", job.block_bytes),
      fmt::format("--iodepth={}", job.iodepth),
      fmt::format("--size={}", job.size_bytes),
      fmt::format("--iomem={}", job.iomem),
      // Never create or extend a file: the names are the store's own files.
      "--allow_file_create=0",
      "--group_reporting",
      "--output-format=json",
  };
  if (random) argv.emplace_back("--randrepeat=0");
  if (mixed) argv.push_back(fmt::format("--rwmixread={}", job.rwmixread));
  return argv;
}

std::uint64_t FioSplitLayout::read_bytes() const { return read_bytes_per_file * files; }
std::uint64_t FioSplitLayout::write_bytes() const { return write_bytes_per_file * files; }

Result<FioSplitLayout> fio_split_layout(const FioSplitMix& mix) {
  if (mix.filenames.empty()) return Status::invalid_argument("fio split mix: no file names");
  if (mix.size_bytes == 0 || mix.block_bytes == 0 || mix.iodepth == 0) {
    return Status::invalid_argument("fio split mix: size, block and iodepth must be positive");
  }
  if (mix.read_percent < 1 || mix.read_percent > 99) {
    return Status::invalid_argument(fmt::format(
        "fio split mix: read_percent {} must be 1..99 (percent of the bytes that are read)", mix.read_percent));
  }
  FioSplitLayout layout;
  layout.files = mix.filenames.size();
  // Whole blocks per file: what the size asks for, capped by what one file holds.
  const std::uint64_t blocks =
      std::min(mix.size_bytes / mix.block_bytes / layout.files, mix.file_bytes / mix.block_bytes);
  if (blocks < 2) {
    return Status::invalid_argument(
        fmt::format("fio split mix: {} blocks of {} bytes per file leave no block for one of the two jobs "
                    "(size {}, file {} bytes, {} files)",
                    blocks, mix.block_bytes, mix.size_bytes, mix.file_bytes, layout.files));
  }
  const double share = static_cast<double>(blocks) * mix.read_percent / 100.0;
  const auto read_blocks =
      static_cast<std::uint64_t>(std::clamp(std::round(share), 1.0, static_cast<double>(blocks - 1)));
  layout.read_bytes_per_file = read_blocks * mix.block_bytes;
  layout.write_bytes_per_file = (blocks - read_blocks) * mix.block_bytes;
  layout.read_iodepth = std::max(1u, mix.iodepth / 2);
  layout.write_iodepth = std::max(1u, mix.iodepth - mix.iodepth / 2);
  return layout;
}

Result<std::vector<std::string>> fio_split_mix_argv(const std::string& fio_path, const FioSplitMix& mix) {
  ZINF_ASSIGN_OR_RETURN(const FioSplitLayout layout, fio_split_layout(mix));
  // The shared options come from fio_argv's own checks and spelling: a one-direction job of the
  // same files, whose --name, --rw, --iodepth and --size are then left out of the global section.
  FioJob shared;
  shared.name = mix.name;
  shared.filenames = mix.filenames;
  shared.rw = "read";
  shared.ioengine = mix.ioengine;
  shared.direct = mix.direct;
  shared.iomem = mix.iomem;
  shared.block_bytes = mix.block_bytes;
  shared.iodepth = 1;
  shared.size_bytes = mix.size_bytes;
  ZINF_ASSIGN_OR_RETURN(const std::vector<std::string> one, fio_argv(fio_path, shared));
  std::vector<std::string> argv;
  for (const std::string& arg : one) {
    const bool per_job = arg.rfind("--name=", 0) == 0 || arg.rfind("--rw=", 0) == 0 ||
                         arg.rfind("--iodepth=", 0) == 0 || arg.rfind("--size=", 0) == 0;
    if (!per_job) argv.push_back(arg);
  }
  // Options before the first --name are global; each --name starts a job that takes them. Both
  // regions lie inside the files: fio would otherwise lay a file out anew, which
  // --allow_file_create=0 refuses (a run whose region ran past a plain file's end left that file
  // removed).
  const auto job = [&](const char* direction, std::uint64_t offset, std::uint64_t bytes, unsigned depth) {
    argv.push_back(fmt::format("--name={}-{}", mix.name, direction));
    argv.push_back(fmt::format("--rw={}", direction));
    argv.push_back(fmt::format("--offset={}", offset));
    argv.push_back(fmt::format("--size={}", bytes));
    argv.push_back(fmt::format("--iodepth={}", depth));
  };
  job("read", 0, layout.read_bytes(), layout.read_iodepth);
  job("write", layout.read_bytes_per_file, layout.write_bytes(), layout.write_iodepth);
  return argv;
}

std::uint64_t huge_page_bytes_free(std::string_view meminfo) {
  // "HugePages_Free:       64" and "Hugepagesize:       2048 kB".
  const auto value_of = [&meminfo](std::string_view key) -> std::optional<std::uint64_t> {
    const std::size_t at = meminfo.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = meminfo.substr(at + key.size());
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (error != std::errc() || end == rest.data()) return std::nullopt;
    return value;
  };
  const std::optional<std::uint64_t> free_pages = value_of("HugePages_Free:");
  const std::optional<std::uint64_t> page_kib = value_of("Hugepagesize:");
  if (!free_pages || !page_kib) return 0;
  return *free_pages * *page_kib * 1024;
}

std::string fio_iomem_for(std::uint64_t buffer_bytes, unsigned jobs, std::string_view meminfo) {
  const std::uint64_t free = huge_page_bytes_free(meminfo);
  constexpr std::uint64_t kPageSlack = 2ull << 20;  // one 2 MiB page per job for fio's rounding
  return free > 0 && free >= buffer_bytes + jobs * kPageSlack ? "shmhuge" : "malloc";
}

std::string shell_command_line(std::span<const std::string> argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    if (!needs_quoting(arg)) {
      line += arg;
      continue;
    }
    line += '\'';
    for (const char c : arg) {
      if (c == '\'') {
        line += "'\\''";
      } else {
        line += c;
      }
    }
    line += '\'';
  }
  return line;
}

Result<FioMeasurement> parse_fio_json(std::string_view text, FioDirection direction) {
  const std::size_t start = text.find('{');
  if (start == std::string_view::npos) return Status::invalid_argument("fio report: no JSON object in fio's output");
  const nlohmann::json report = nlohmann::json::parse(text.substr(start), nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded() || !report.is_object()) return Status::invalid_argument("fio report: malformed JSON");
  const auto jobs = report.find("jobs");
  if (jobs == report.end() || !jobs->is_array() || jobs->empty() || !(*jobs)[0].is_object()) {
    return Status::invalid_argument("fio report: 'jobs' is missing or empty");
  }
  const nlohmann::json& job = (*jobs)[0];
  if (const auto error = job.find("error"); error != job.end() && error->is_number() && error->get<int>() != 0) {
    return Status::io_error(fmt::format("fio report: job '{}' failed with error {} ({})", job.value("jobname", "?"),
                                        error->get<int>(), std::strerror(error->get<int>())));
  }
  const char* side = direction == FioDirection::kRead ? "read" : "write";
  const auto figures = job.find(side);
  if (figures == job.end() || !figures->is_object()) {
    return Status::invalid_argument(fmt::format("fio report: jobs[0].{} is missing", side));
  }
  const std::string where = fmt::format("jobs[0].{}", side);
  FioMeasurement m;
  m.fio_version = report.value("fio version", std::string("unknown"));
  ZINF_ASSIGN_OR_RETURN(const double io_bytes, number_at(*figures, "io_bytes", where));
  ZINF_ASSIGN_OR_RETURN(const double bw_bytes, number_at(*figures, "bw_bytes", where));
  ZINF_ASSIGN_OR_RETURN(const double runtime_ms, number_at(*figures, "runtime", where));
  m.io_bytes = static_cast<std::uint64_t>(io_bytes);
  m.bytes_per_second = bw_bytes;
  m.runtime_seconds = runtime_ms / 1e3;
  if (const auto ios = figures->find("total_ios"); ios != figures->end() && ios->is_number()) {
    m.total_ios = ios->get<std::uint64_t>();
  }
  if (m.io_bytes == 0) return Status::io_error(fmt::format("fio report: {} moved no bytes", where));
  const auto clat = figures->find("clat_ns");
  if (clat == figures->end() || !clat->is_object()) {
    return Status::invalid_argument(fmt::format("fio report: {}.clat_ns is missing", where));
  }
  const std::string clat_where = where + ".clat_ns";
  ZINF_ASSIGN_OR_RETURN(m.clat_mean_ns, number_at(*clat, "mean", clat_where));
  ZINF_ASSIGN_OR_RETURN(m.clat_max_ns, number_at(*clat, "max", clat_where));
  if (const auto pct = clat->find("percentile"); pct != clat->end() && pct->is_object()) {
    const std::string pct_where = clat_where + ".percentile";
    ZINF_ASSIGN_OR_RETURN(m.clat_p50_ns, number_at(*pct, "50.000000", pct_where));
    ZINF_ASSIGN_OR_RETURN(m.clat_p90_ns, number_at(*pct, "90.000000", pct_where));
    ZINF_ASSIGN_OR_RETURN(m.clat_p99_ns, number_at(*pct, "99.000000", pct_where));
  }
  return m;
}

Result<FioMixedMeasurement> parse_fio_mixed_json(std::string_view text) {
  FioMixedMeasurement m;
  ZINF_ASSIGN_OR_RETURN(m.read, parse_fio_json(text, FioDirection::kRead));
  ZINF_ASSIGN_OR_RETURN(m.write, parse_fio_json(text, FioDirection::kWrite));
  const double seconds = std::max(m.read.runtime_seconds, m.write.runtime_seconds);
  if (seconds <= 0) return Status::invalid_argument("fio report: the mixed job's runtime is 0");
  m.bytes_per_second = static_cast<double>(m.read.io_bytes + m.write.io_bytes) / seconds;
  return m;
}

namespace {

// fio's stdout, or IoError with its last line when it failed.
Result<std::string> fio_output(std::span<const std::string> argv) {
  ZINF_ASSIGN_OR_RETURN(ProcessOutput output, run_process(argv));
  if (output.exit_status != 0) {
    const std::string why = last_line(output.err.empty() ? output.out : output.err);
    return Status::io_error(
        fmt::format("fio exited with status {}: {}", output.exit_status, why.empty() ? "no message" : why));
  }
  return std::move(output.out);
}

// Bad fio output is not the user's input: report it as a runtime failure.
template <typename T>
Result<T> as_runtime_failure(Result<T> parsed) {
  if (!parsed.is_ok() && parsed.status().code() == ErrorCode::kInvalidArgument) {
    return Status::io_error(parsed.status().message());
  }
  return parsed;
}

}  // namespace

Result<FioMeasurement> run_fio(std::span<const std::string> argv, FioDirection direction) {
  ZINF_ASSIGN_OR_RETURN(const std::string out, fio_output(argv));
  return as_runtime_failure(parse_fio_json(out, direction));
}

Result<FioMixedMeasurement> run_fio_mixed(std::span<const std::string> argv) {
  ZINF_ASSIGN_OR_RETURN(const std::string out, fio_output(argv));
  return as_runtime_failure(parse_fio_mixed_json(out));
}

}  // namespace zinf::probes
