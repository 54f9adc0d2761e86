// SwapFile: creating the anonymous swap file (O_TMPFILE, else create-then-unlink), choosing direct
// or buffered I/O, learning the direct-I/O alignment, and reserving blocks. No I/O on the data
// itself happens here: the I/O engines do that through fd().
#include "libengine/io/swap_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/errno_text.h"
#include "libengine/core/units.h"

namespace zinf::io {
namespace {

// The file system's name for messages, from statfs f_type (values from <linux/magic.h>).
std::string file_system_name(const std::string& directory) {
  struct statfs info {};
  if (::statfs(directory.c_str(), &info) != 0) return "unknown file system";
  switch (static_cast<std::uint64_t>(info.f_type)) {
    case 0x01021994:
      return "tmpfs";
    case 0x858458f6:
      return "ramfs";
    case 0x794c7630:
      return "overlay";
    case 0xef53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683e:
      return "btrfs";
    case 0x6969:
      return "nfs";
    case 0x65735546:
      return "fuse";
    case 0x2fc12fc1:
      return "zfs";
    case 0x9fa0:
      return "proc";
    case 0x62656572:
      return "sysfs";
    default:
      return fmt::format("file system type {:#x}", static_cast<std::uint64_t>(info.f_type));
  }
}

// Checks that `directory` can hold a swap file, with a message for each way it cannot.
Status validate_directory(const std::string& directory) {
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) {
    const int error = errno;
    if (error == ENOENT) return Status::invalid_argument(fmt::format("swap path '{}': does not exist", directory));
    return Status::io_error(fmt::format("swap path '{}': cannot stat: {}", directory, errno_text(error)));
  }
  if (!S_ISDIR(info.st_mode)) {
    return Status::invalid_argument(fmt::format("swap path '{}': is not a directory", directory));
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    const int error = errno;
    return Status::invalid_argument(
        fmt::format("swap path '{}': not writable ({}); choose a directory this user can create files in", directory,
                    errno_text(error)));
  }
  return Status::ok();
}

bool tmpfile_unsupported(int error) { return error == EOPNOTSUPP || error == EISDIR || error == EINVAL; }

// Creates "<directory>/.zinf-swap-XXXXXX" and unlinks it at once, so only a crash between those
// two calls could leave a name behind. Buffered: O_DIRECT is set afterwards, because an O_CREAT
// open that refuses O_DIRECT has already created the file. Returns the fd or -errno.
int create_named_then_unlink(const std::string& directory) {
  std::string name = directory + "/.zinf-swap-XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);  // mkostemp adds O_RDWR | O_CREAT | O_EXCL
  if (fd < 0) return -errno;
  if (::unlink(name.c_str()) != 0) {
    const int error = errno;
    ::close(fd);
    return -error;
  }
  return fd;
}

struct AnonymousFile {
  int fd = -1;
  int direct_error = 0;  // errno that refused O_DIRECT; 0 when the fd is in direct mode
};

// Opens an anonymous file in `directory`, in direct mode when the file system allows it. Returns
// -errno when no file could be created at all.
//   1. O_TMPFILE | O_DIRECT: the common case (ext4, xfs, btrfs; tmpfs from Linux 6.6).
//   2. O_TMPFILE without O_DIRECT: EINVAL in 1 may mean either "no O_TMPFILE" or "no O_DIRECT".
//   3. A named file unlinked at once, where there is no O_TMPFILE (EISDIR on kernels before 3.11,
//      EOPNOTSUPP or EINVAL on file systems without it).
// After 2 or 3, O_DIRECT is requested with fcntl, which refuses it exactly where open would.
int open_anonymous(const std::string& directory, AnonymousFile& file) {
  int fd = ::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC | O_DIRECT, 0600);
  if (fd >= 0) {
    file = {fd, 0};
    return 0;
  }
  if (!tmpfile_unsupported(errno)) return -errno;
  fd = ::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (!tmpfile_unsupported(errno)) return -errno;
    fd = create_named_then_unlink(directory);
    if (fd < 0) return fd;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0) {
    file = {fd, 0};
  } else {
    file = {fd, errno};
  }
  return 0;
}

// Direct-I/O alignment of an open file: statx(STATX_DIOALIGN) where the kernel (6.1+) and file
// system report it; otherwise the file system block size (clamped to 512..4096) for offsets and
// the page size for memory, which every O_DIRECT implementation accepts.
void direct_io_alignment(int fd, std::uint32_t& memory_alignment_bytes, std::uint32_t& offset_alignment_bytes) {
  // glibc takes struct statx from <linux/stat.h> when the kernel headers have it, so the fields
  // exist exactly when STATX_DIOALIGN does (Linux headers 6.1+, e.g. Debian 12's).
#if defined(STATX_DIOALIGN)
  struct statx info {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &info) == 0 && (info.stx_mask & STATX_DIOALIGN) != 0 &&
      std::has_single_bit(info.stx_dio_mem_align) && std::has_single_bit(info.stx_dio_offset_align)) {
    memory_alignment_bytes = info.stx_dio_mem_align;
    offset_alignment_bytes = info.stx_dio_offset_align;
    return;
  }
#endif
  struct stat st {};
  std::uint32_t block_bytes = 4096;
  if (::fstat(fd, &st) == 0 && st.st_blksize > 0 && std::has_single_bit(static_cast<std::uint64_t>(st.st_blksize))) {
    block_bytes = static_cast<std::uint32_t>(std::clamp<blksize_t>(st.st_blksize, 512, 4096));
  }
  offset_alignment_bytes = block_bytes;
  memory_alignment_bytes = 4096;
}

}  // namespace

Result<SwapFile> SwapFile::create(const std::string& directory, bool allow_buffered_fallback,
                                  std::string_view how_to_allow_buffered) {
  ZINF_RETURN_IF_ERROR(validate_directory(directory));

  AnonymousFile anonymous;
  const int open_result = open_anonymous(directory, anonymous);
  if (open_result < 0) {
    const int error = -open_result;
    if (error == EACCES || error == EPERM || error == EROFS) {
      return Status::invalid_argument(fmt::format("swap path '{}': not writable ({})", directory, errno_text(error)));
    }
    // A writable directory where no file can be created (/proc: ENOENT; file systems without
    // regular files): the path is wrong, as for a missing one, not the disk.
    if (error == ENOENT || error == EOPNOTSUPP || error == EINVAL || error == EISDIR || error == ENOSYS) {
      return Status::invalid_argument(fmt::format(
          "swap path '{}': {} cannot hold a swap file ({}); choose a directory on a local disk file system (ext4, xfs)",
          directory, file_system_name(directory), errno_text(error)));
    }
    return Status::io_error(fmt::format("swap path '{}': cannot create a swap file: {}", directory, errno_text(error)));
  }

  SwapFile file;  // owns the fd from here on, so every return below closes it
  file.fd_ = anonymous.fd;
  file.directory_ = directory;
  if (anonymous.direct_error != 0) {
    // Typically ramfs, tmpfs before Linux 6.6, or a FUSE file system.
    const std::string why = fmt::format("{}: {}", file_system_name(directory), errno_text(anonymous.direct_error));
    if (!allow_buffered_fallback) {
      // The path does not fit the options: bad input, like a path that is not a directory.
      return Status::invalid_argument(fmt::format(
          "swap path '{}': O_DIRECT not supported ({}); put swap files on a local disk file system (ext4, xfs) or "
          "{}",
          directory, why, how_to_allow_buffered));
    }
    file.why_buffered_ = fmt::format("O_DIRECT not supported on {} ({})", directory, why);
  }
  file.direct_ = file.why_buffered_.empty();
  if (file.direct_) {
    direct_io_alignment(file.fd_, file.memory_alignment_bytes_, file.offset_alignment_bytes_);
  } else {
    // The page cache takes any address, offset and length; 1 says so (swap_file.h).
    file.memory_alignment_bytes_ = 1;
    file.offset_alignment_bytes_ = 1;
  }
  return file;
}

SwapFile::SwapFile(SwapFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      directory_(std::move(other.directory_)),
      direct_(other.direct_),
      why_buffered_(std::move(other.why_buffered_)),
      memory_alignment_bytes_(other.memory_alignment_bytes_),
      offset_alignment_bytes_(other.offset_alignment_bytes_),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

SwapFile& SwapFile::operator=(SwapFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    directory_ = std::move(other.directory_);
    direct_ = other.direct_;
    why_buffered_ = std::move(other.why_buffered_);
    memory_alignment_bytes_ = other.memory_alignment_bytes_;
    offset_alignment_bytes_ = other.offset_alignment_bytes_;
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

SwapFile::~SwapFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string SwapFile::reopen_path() const { return fmt::format("/proc/{}/fd/{}", ::getpid(), fd_); }

Status SwapFile::reserve(std::uint64_t new_size_bytes) {
  if (new_size_bytes <= size_bytes_) return Status::ok();
  const auto too_large = [&](int error) {
    return Status::io_error(fmt::format("swap path '{}': cannot grow the swap file to {} ({} bytes): {}", directory_,
                                        format_bytes(static_cast<double>(new_size_bytes)), new_size_bytes,
                                        errno_text(error)));
  };
  if (new_size_bytes > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) return too_large(EFBIG);
  const auto length = static_cast<off_t>(new_size_bytes);
  const auto no_space = [&](std::uint64_t free_bytes) {
    return Status::io_error(fmt::format("swap path '{}': no space for {} (needs {} more, {} free)", directory_,
                                        format_bytes(static_cast<double>(new_size_bytes)),
                                        format_bytes(static_cast<double>(new_size_bytes - size_bytes_)),
                                        format_bytes(static_cast<double>(free_bytes))));
  };
  // Refused up front when it cannot fit: some file systems (xfs) would otherwise allocate until the
  // disk is full before failing, starving every other writer on it until the size is put back.
  // File systems that keep no block counts (ramfs reports 0 of 0) are left to fallocate.
  struct statvfs fs {};
  if (::statvfs(directory_.c_str(), &fs) == 0 && fs.f_blocks > 0) {
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (new_size_bytes - size_bytes_ > free_bytes) return no_space(free_bytes);
  }

  int error = 0;
  while (::fallocate(fd_, 0, 0, length) != 0) {
    error = errno;
    if (error != EINTR) break;
    error = 0;
  }
  if (error == EOPNOTSUPP) error = ::posix_fallocate(fd_, 0, length);  // returns the error, not -1
  if (error == 0) {
    size_bytes_ = new_size_bytes;
    return Status::ok();
  }

  // A failed fallocate may have allocated some blocks and moved the end of file; put the size back
  // so the file is exactly as it was (contents below the old size are untouched).
  if (::ftruncate(fd_, static_cast<off_t>(size_bytes_)) != 0) {
    const int truncate_error = errno;
    return Status::io_error(
        fmt::format("swap path '{}': growing the swap file failed ({}) and restoring its size "
                    "failed too: {}",
                    directory_, errno_text(error), errno_text(truncate_error)));
  }
  if (error == ENOSPC) {
    const auto free_after = free_space_bytes(directory_);
    return no_space(free_after.is_ok() ? *free_after : 0);
  }
  return too_large(error);
}

Result<std::uint64_t> free_space_bytes(const std::string& directory) {
  struct statvfs info {};
  if (::statvfs(directory.c_str(), &info) != 0) {
    const int error = errno;
    return Status::io_error(fmt::format("swap path '{}': cannot read free space: {}", directory, errno_text(error)));
  }
  return static_cast<std::uint64_t>(info.f_bavail) * static_cast<std::uint64_t>(info.f_frsize);
}

}  // namespace zinf::io
