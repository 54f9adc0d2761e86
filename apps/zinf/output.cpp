#include "apps/zinf/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <sstream>

#include <fmt/format.h>

#include "libengine/core/errno_text.h"
#include "reports/csv_writer.h"
#include "reports/html_writer.h"
#include "reports/markdown_writer.h"
#include "reports/text_writer.h"

namespace zinf::cli {

void add_output_options(CLI::App& command, OutputOptions& options) {
  command.add_option("--format", options.format, "Output format: table, json, csv or md")
      ->type_name("FMT")
      ->default_str("table");
  command
      .add_option("--out", options.out_path,
                  "Write the output to FILE (atomically; - is stdout; FIFOs and devices are written through)")
      ->type_name("FILE");
}

Result<Format> parse_format(const std::string& text, bool allow_html) {
  if (text == "table") return Format::kTable;
  if (text == "json") return Format::kJson;
  if (text == "csv") return Format::kCsv;
  if (text == "md" || text == "markdown") return Format::kMarkdown;
  if (allow_html && text == "html") return Format::kHtml;
  return Status::invalid_argument(
      fmt::format("--format: '{}' is not one of table, json, csv, md{}", text, allow_html ? ", html" : ""));
}

Result<Format> output_format(const OutputOptions& options, bool allow_html, Format fallback) {
  if (!options.format.empty()) return parse_format(options.format, allow_html);
  if (options.out_path.empty() || options.out_path == "-") return fallback;
  std::string extension = std::filesystem::path(options.out_path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == ".json") return Format::kJson;
  if (extension == ".csv") return Format::kCsv;
  if (extension == ".md" || extension == ".markdown") return Format::kMarkdown;
  if (extension == ".txt") return Format::kTable;
  if (extension == ".html" || extension == ".htm") {
    if (allow_html) return Format::kHtml;
    return Status::invalid_argument(
        fmt::format("--out: '{}' asks for html, which this command does not write; give --format (table, json, csv, "
                    "md) or another extension (.txt, .json, .csv, .md)",
                    options.out_path));
  }
  return fallback;
}

void announce_written(const std::string& path, const Io& io) {
  if (!path.empty() && path != "-") io.err << "wrote " << path << '\n';
}

namespace {

namespace fs = std::filesystem;

// Follows `path` through symbolic links to the file they finally name (which may not exist yet).
// `info` is that file's stat when it exists.
struct Resolved {
  std::string path;
  bool exists = false;
  struct stat info {};
};

Result<Resolved> resolve(const std::string& path, std::string_view field) {
  Resolved out;
  out.path = path;
  for (int hops = 0;; ++hops) {
    struct stat link_info {};
    if (::lstat(out.path.c_str(), &link_info) != 0) {
      const int err = errno;
      if (err == ENOENT) return out;
      return Status::invalid_argument(fmt::format("{}: cannot use '{}': {}", field, path, errno_text(err)));
    }
    if (!S_ISLNK(link_info.st_mode)) {
      out.exists = true;
      out.info = link_info;
      return out;
    }
    if (hops == 40) {
      return Status::invalid_argument(
          fmt::format("{}: '{}' is a chain of more than 40 symbolic links (a loop?)", field, path));
    }
    std::string target(PATH_MAX, '\0');
    const ssize_t length = ::readlink(out.path.c_str(), target.data(), target.size());
    if (length < 0) {
      return Status::invalid_argument(
          fmt::format("{}: cannot read the link '{}': {}", field, out.path, errno_text(errno)));
    }
    target.resize(static_cast<std::size_t>(length));
    const fs::path next(target);
    out.path = next.is_absolute() ? target : (fs::path(out.path).parent_path() / next).string();
  }
}

std::string directory_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Creates and removes a file in `dir`: the honest test of "can a file be created here".
Status probe_directory(const std::string& dir, std::string_view field, const std::string& shown) {
  std::string probe = (fs::path(dir) / ".zinf-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    return Status::invalid_argument(fmt::format("{}: cannot write '{}': {}", field, shown, errno_text(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::ok();
}

Status directory_error(std::string_view field, const std::string& shown) {
  return Status::invalid_argument(
      fmt::format("{}: '{}' is a directory; expected a file path (or - for standard output)", field, shown));
}

Status write_all(int fd, std::string_view text, std::string_view field, const std::string& shown) {
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::io_error(fmt::format("{}: writing '{}' failed: {}", field, shown, errno_text(errno)));
    written += static_cast<std::size_t>(n);
  }
  return Status::ok();
}

// A FIFO, device or socket: open it and write; never replace it.
Status write_through(const Resolved& target, std::string_view text, std::string_view field, const std::string& shown) {
  const int fd = ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Status::invalid_argument(fmt::format("{}: cannot open '{}': {}", field, shown, errno_text(errno)));
  Status status = write_all(fd, text, field, shown);
  if (::close(fd) != 0 && status.is_ok()) {
    status = Status::io_error(fmt::format("{}: writing '{}' failed: {}", field, shown, errno_text(errno)));
  }
  return status;
}

Status write_atomically(const Resolved& target, std::string_view text, std::string_view field,
                        const std::string& shown) {
  const std::string temporary = fmt::format("{}.tmp-{}", target.path, ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::invalid_argument(fmt::format("{}: '{}' cannot be created: {}", field, shown, errno_text(errno)));
  }
  // Replacing a file keeps its permission bits (a record made group-readable stays so).
  if (target.exists) (void)::fchmod(fd, target.info.st_mode & 07777);
  Status status = write_all(fd, text, field, shown);
  if (status.is_ok() && ::fsync(fd) != 0) {
    status = Status::io_error(fmt::format("{}: writing '{}' failed: {}", field, shown, errno_text(errno)));
  }
  if (::close(fd) != 0 && status.is_ok()) {
    status = Status::io_error(fmt::format("{}: writing '{}' failed: {}", field, shown, errno_text(errno)));
  }
  if (status.is_ok() && ::rename(temporary.c_str(), target.path.c_str()) != 0) {
    status = Status::invalid_argument(fmt::format("{}: cannot replace '{}': {}", field, shown, errno_text(errno)));
  }
  if (!status.is_ok()) ::unlink(temporary.c_str());
  return status;
}

}  // namespace

Status write_output_file(const std::string& path, std::string_view text, std::string_view field, const Io& io) {
  if (path == "-") {
    io.out << text;
    io.out.flush();
    if (!io.out) return Status::io_error(fmt::format("{}: writing to standard output failed", field));
    return Status::ok();
  }
  if (path.empty()) return Status::invalid_argument(fmt::format("{}: '' is empty; expected a file path", field));
  ZINF_ASSIGN_OR_RETURN(const Resolved target, resolve(path, field));
  if (target.exists && S_ISDIR(target.info.st_mode)) return directory_error(field, path);
  if (target.exists && !S_ISREG(target.info.st_mode)) return write_through(target, text, field, path);
  return write_atomically(target, text, field, path);
}

Status check_output_path(const std::string& path, std::string_view field, bool create_parents) {
  if (path == "-") return Status::ok();
  if (path.empty()) return Status::invalid_argument(fmt::format("{}: '' is empty; expected a file path", field));
  ZINF_ASSIGN_OR_RETURN(const Resolved target, resolve(path, field));
  if (target.exists && S_ISDIR(target.info.st_mode)) return directory_error(field, path);
  if (target.exists && !S_ISREG(target.info.st_mode)) {
    if (::access(target.path.c_str(), W_OK) != 0) {
      return Status::invalid_argument(fmt::format("{}: cannot write '{}': {}", field, path, errno_text(errno)));
    }
    return Status::ok();
  }
  const std::string dir = directory_of(target.path);
  if (create_parents) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      return Status::invalid_argument(
          fmt::format("{}: cannot create the directory of '{}': {}", field, path, ec.message()));
  }
  struct stat dir_info {};
  if (::stat(dir.c_str(), &dir_info) != 0 || !S_ISDIR(dir_info.st_mode)) {
    return Status::invalid_argument(
        fmt::format("{}: '{}' cannot be created: its directory '{}' does not exist", field, path, dir));
  }
  return probe_directory(dir, field, path);
}

Status check_writable_directory(const std::string& dir, std::string_view field) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::invalid_argument(fmt::format("{}: cannot create '{}': {}", field, dir, ec.message()));
  if (!fs::is_directory(dir, ec))
    return Status::invalid_argument(fmt::format("{}: '{}' is not a directory", field, dir));
  return probe_directory(dir, field, dir);
}

Status emit(const OutputOptions& options, const Rendered& rendered, const Io& io, bool allow_html, Format fallback) {
  ZINF_ASSIGN_OR_RETURN(const Format format, output_format(options, allow_html, fallback));
  const bool to_file = !options.out_path.empty() && options.out_path != "-";
  std::ostringstream text;
  switch (format) {
    case Format::kTable: {
      const bool color = !to_file && io.out_is_terminal && io.color_allowed;
      reports::write_text(rendered.document, text, reports::TextStyle{color, io.terminal_width});
      break;
    }
    case Format::kJson:
      text << rendered.record.dump(2) << '\n';
      break;
    case Format::kCsv:
      reports::write_csv(rendered.csv, text);
      break;
    case Format::kMarkdown:
      reports::write_markdown(rendered.document, text);
      break;
    case Format::kHtml:
      reports::write_html(rendered.document, text);
      break;
  }
  if (to_file) {
    ZINF_RETURN_IF_ERROR(write_output_file(options.out_path, text.str(), "--out", io));
    announce_written(options.out_path, io);
    return Status::ok();
  }
  io.out << text.str();
  io.out.flush();
  if (!io.out) return Status::io_error("writing to standard output failed");
  return Status::ok();
}

}  // namespace zinf::cli
