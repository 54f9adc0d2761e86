#include "libengine/core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "libengine/core/errno_text.h"
#include "libengine/core/units.h"

namespace zinf {
namespace {

// "is a FIFO, not a regular file".
std::string_view what_it_is(mode_t mode) {
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
  if (S_ISCHR(mode)) return "is a character device, not a regular file";
  if (S_ISBLK(mode)) return "is a block device, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  return "is not a regular file";
}

Status too_large(const std::string& path, std::string_view size, std::uint64_t max_bytes) {
  return Status::invalid_argument(fmt::format("{}: is {}; input files are limited to {}", path, size,
                                              format_bytes(static_cast<double>(max_bytes))));
}

}  // namespace

Result<std::string> read_input_file(const std::string& path, std::uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::not_found(fmt::format("{}: no such file", path));
    if (err == ENOTDIR)
      return Status::not_found(fmt::format("{}: no such file (a part of the path is not a directory)", path));
    // The system failing (EIO, out of descriptors or memory) is a runtime failure; any other refusal
    // (permissions, a name too long, a link loop) is about the path the user gave.
    if (err == EIO || err == EMFILE || err == ENFILE || err == ENOMEM) {
      return Status::io_error(fmt::format("{}: cannot open: {}", path, errno_text(err)));
    }
    return Status::invalid_argument(fmt::format("{}: cannot open: {}", path, errno_text(err)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) return Status::io_error(fmt::format("{}: cannot stat: {}", path, errno_text(errno)));
  if (S_ISDIR(info.st_mode)) return Status::invalid_argument(fmt::format("{}: is a directory; expected a file", path));
  if (!S_ISREG(info.st_mode)) {
    return Status::invalid_argument(fmt::format("{}: {}; expected a file", path, what_it_is(info.st_mode)));
  }
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > max_bytes) return too_large(path, format_bytes(static_cast<double>(size)), max_bytes);

  // Read up to one byte past the limit: files whose size fstat does not know (/proc) or that grow
  // while being read are caught here instead of being read without end.
  std::string text;
  text.resize(static_cast<std::size_t>(std::min<std::uint64_t>(size, max_bytes) + 1));
  std::size_t used = 0;
  for (;;) {
    if (used == text.size()) {
      if (used > max_bytes) return too_large(path, fmt::format("more than {} bytes", max_bytes), max_bytes);
      text.resize(std::min<std::size_t>(text.size() * 2, static_cast<std::size_t>(max_bytes) + 1));
    }
    const ssize_t got = ::read(fd, text.data() + used, text.size() - used);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(fmt::format("{}: read failed: {}", path, errno_text(errno)));
    }
    if (got == 0) break;
    used += static_cast<std::size_t>(got);
  }
  if (used > max_bytes) return too_large(path, fmt::format("more than {} bytes", max_bytes), max_bytes);
  text.resize(used);
  return text;
}

}  // namespace zinf
