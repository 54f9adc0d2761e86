#include "apps/zinf/output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <sstream>

#include <fmt/format.h>

#include "reports/csv_writer.h"
#include "reports/markdown_writer.h"
#include "reports/text_writer.h"

namespace zinf::cli {

void add_output_options(CLI::App& command, OutputOptions& options) {
  command.add_option("--format", options.format, "Output format: table, json, csv or md")
      ->type_name("FMT")
      ->default_str("table");
  command.add_option("--out", options.out_path, "Write the output to FILE instead of stdout (atomically)")
      ->type_name("FILE");
}

Result<Format> parse_format(const std::string& text) {
  if (text == "table") return Format::kTable;
  if (text == "json") return Format::kJson;
  if (text == "csv") return Format::kCsv;
  if (text == "md" || text == "markdown") return Format::kMarkdown;
  return Status::invalid_argument(fmt::format("--format: '{}' is not one of table, json, csv, md", text));
}

Status write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = fmt::format("{}.tmp-{}", path, ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::invalid_argument(fmt::format("--out: '{}' cannot be created: {}", path, std::strerror(errno)));
  }
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      return Status::io_error(fmt::format("--out: writing '{}' failed: {}", path, std::strerror(err)));
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(temporary.c_str());
    return Status::io_error(fmt::format("--out: writing '{}' failed: {}", path, std::strerror(err)));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temporary.c_str());
    return Status::invalid_argument(fmt::format("--out: cannot replace '{}': {}", path, std::strerror(err)));
  }
  return Status::ok();
}

Status emit(const OutputOptions& options, const Rendered& rendered, const Io& io) {
  ZINF_ASSIGN_OR_RETURN(const Format format, parse_format(options.format));
  const bool to_file = !options.out_path.empty();
  std::ostringstream text;
  switch (format) {
    case Format::kTable: {
      const bool color = !to_file && io.out_is_terminal && io.color_allowed;
      reports::write_text(rendered.document, text, reports::TextStyle{color, io.terminal_width});
      break;
    }
    case Format::kJson: text << rendered.record.dump(2) << '\n'; break;
    case Format::kCsv: reports::write_csv(rendered.csv, text); break;
    case Format::kMarkdown: reports::write_markdown(rendered.document, text); break;
  }
  if (to_file) return write_file_atomically(options.out_path, text.str());
  io.out << text.str();
  io.out.flush();
  if (!io.out) return Status::io_error("writing to standard output failed");
  return Status::ok();
}

}  // namespace zinf::cli
