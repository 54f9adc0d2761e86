// MemFile: fuzz input bytes as a file with a path (a memfd seen through /proc/self/fd), for parsers
// that take a path: token files and checkpoints. Nothing touches the disk; the file is gone when
// the MemFile is.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace zinf::fuzz {

class MemFile {
 public:
  MemFile(const void* data, std::size_t size) : fd_(::memfd_create("zinf-fuzz", MFD_CLOEXEC)) {
    const auto* bytes = static_cast<const char*>(data);
    for (std::size_t done = 0; fd_ >= 0 && done < size;) {
      const ssize_t n = ::write(fd_, bytes + done, size - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

}  // namespace zinf::fuzz
