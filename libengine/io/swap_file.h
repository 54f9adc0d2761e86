// SwapFile: one large, preallocated, anonymous swap file in a directory on the NVMe tier.
//
// The file is created without a name (O_TMPFILE, or create-then-unlink where the file system
// lacks O_TMPFILE), so the kernel frees its blocks when the last descriptor closes: on normal
// exit, on error paths, on SIGINT/SIGTERM and even on SIGKILL or a crash. No signal handler and
// no global registry of paths is needed, and nothing is ever left behind in the user's directory.
// The file is opened with O_DIRECT; where the file system refuses O_DIRECT (tmpfs) and the caller
// allows it, it is opened buffered and why_buffered() says why. Alignment for direct I/O comes from
// statx(STATX_DIOALIGN) where the kernel reports it, else from the file system's block size.
//
// Not thread-safe: the owner (SwapStore) serialises reserve(); the fd may be used for I/O from any
// thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "libengine/core/status.h"

namespace zinf::io {

class SwapFile {
 public:
  // Creates the anonymous file in `directory`. Errors (IoError/InvalidArgument) name the
  // directory and the errno text: missing directory, not a directory, not writable, O_DIRECT
  // refused while `allow_buffered_fallback` is false (InvalidArgument ending with
  // `how_to_allow_buffered`, e.g. the CLI flag that allows it), a directory where no file can be
  // created (InvalidArgument, e.g. /proc).
  static Result<SwapFile> create(const std::string& directory, bool allow_buffered_fallback,
                                 std::string_view how_to_allow_buffered = "allow buffered I/O");

  SwapFile(SwapFile&& other) noexcept;
  SwapFile& operator=(SwapFile&& other) noexcept;
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;
  ~SwapFile();  // closes the fd; the kernel then frees the blocks

  int fd() const { return fd_; }
  const std::string& directory() const { return directory_; }
  bool direct() const { return direct_; }
  // Non-empty when the file is buffered: e.g. "O_DIRECT not supported by tmpfs (EINVAL)".
  const std::string& why_buffered() const { return why_buffered_; }
  // Buffer addresses for direct I/O must be multiples of memory_alignment(); offsets and lengths
  // multiples of offset_alignment(). Both are powers of two; 1 means no requirement (buffered).
  std::uint32_t memory_alignment() const { return memory_alignment_bytes_; }
  std::uint32_t offset_alignment() const { return offset_alignment_bytes_; }
  std::uint64_t size_bytes() const { return size_bytes_; }
  // A path another process (fio) can open to reach this same file: "/proc/<pid>/fd/<fd>".
  std::string reopen_path() const;

  // Grows the file to `new_size_bytes` with real blocks reserved (fallocate; posix_fallocate where
  // fallocate is not supported). Shrinking is a no-op. ENOSPC becomes IoError naming the directory,
  // the bytes asked for and the bytes free; the file keeps its old size and contents.
  Status reserve(std::uint64_t new_size_bytes);

 private:
  SwapFile() = default;
  int fd_ = -1;
  std::string directory_;
  bool direct_ = false;
  std::string why_buffered_;
  std::uint32_t memory_alignment_bytes_ = 1;
  std::uint32_t offset_alignment_bytes_ = 1;
  std::uint64_t size_bytes_ = 0;
};

// Bytes an unprivileged user may still allocate on the file system holding `directory`
// (statvfs f_bavail * f_frsize). IoError names the directory when statvfs fails.
Result<std::uint64_t> free_space_bytes(const std::string& directory);

}  // namespace zinf::io
