// TokenFileSource: validation, change detection and llm.c-order batches read with pread. See token_file.h.
#include "libengine/train/token_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "libengine/core/check.h"
#include "libengine/core/errno_text.h"

namespace zinf::train {
namespace {

std::uint32_t read_le32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

std::int32_t le16(const unsigned char* p) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8));
}

// When the file last changed: its status-change time (ctime), which every write of the contents
// moves and which, unlike the modification time, no user call can set back — a rewrite of the same
// size that restores the old mtime (touch -d, cp -p) still shows. (Its clock is coarse: a rewrite
// within the same few milliseconds as the open is not seen; the id check per batch remains.)
std::int64_t change_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
}

// Closes a descriptor on every path out of open() that does not hand it to the source.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Reads exactly `bytes` at `offset`; false with errno 0 on a short read (end of file).
bool pread_all(int fd, unsigned char* out, std::uint64_t bytes, std::uint64_t offset) {
  while (bytes > 0) {
    const ssize_t got =
        ::pread(fd, out, std::min<std::uint64_t>(bytes, std::uint64_t{1} << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = 0;
      return false;
    }
    out += got;
    offset += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::uint64_t>(got);
  }
  return true;
}

// The scan of open() and each batch read this many bytes at a time at most.
constexpr std::uint64_t kScanChunkBytes = std::uint64_t{1} << 20;

}  // namespace

Result<TokenFileSource> TokenFileSource::open(const TokenFileSpec& spec) {
  if (spec.vocab < 1) {
    return Status::invalid_argument(fmt::format("data.vocab: {} is too small; expected at least 1", spec.vocab));
  }
  if (spec.batch < 1) {
    return Status::invalid_argument(fmt::format("data.batch: {} is too small; expected at least 1", spec.batch));
  }
  if (spec.seq < 1) {
    return Status::invalid_argument(fmt::format("data.seq: {} is too small; expected at least 1", spec.seq));
  }
  if (spec.batch > (1ull << 40) / spec.seq) {
    return Status::invalid_argument(fmt::format(
        "data.batch: {} x data.seq {} is too many tokens per batch; expected at most 2^40", spec.batch, spec.seq));
  }

  // Non-blocking: a FIFO named as the token file is refused below instead of hanging here.
  const int fd = ::open(spec.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    const std::string text = fmt::format("data.path: cannot open '{}': {}", spec.path, errno_text(err));
    return err == ENOENT ? Status::not_found(text) : Status::io_error(text);
  }
  FdGuard guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return Status::io_error(fmt::format("data.path: cannot stat '{}': {}", spec.path, errno_text(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(fmt::format("data.path: '{}' is not a regular file", spec.path));
  }
  const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t needed_tokens = spec.batch * spec.seq + 1;

  TokenFileSource src;
  src.spec_ = spec;
  src.file_bytes_ = file_bytes;
  src.change_ns_ = change_ns(st);
  const auto changed_while_read = [&spec]() {
    return Status::io_error(
        fmt::format("data.path: '{}' changed while it was being read (shorter than its size)", spec.path));
  };

  std::uint64_t payload_offset = 0;
  unsigned char header[kLlmcHeaderBytes];
  if (file_bytes >= kLlmcHeaderBytes) {
    if (!pread_all(fd, header, kLlmcHeaderBytes, 0)) {
      if (errno == 0) return changed_while_read();
      return Status::io_error(fmt::format("data.path: cannot read '{}': {}", spec.path, errno_text(errno)));
    }
  }
  if (file_bytes >= kLlmcHeaderBytes && read_le32(header) == static_cast<std::uint32_t>(kLlmcMagic)) {
    src.has_header_ = true;
    payload_offset = kLlmcHeaderBytes;
    const std::uint32_t version = read_le32(header + 4);
    if (version != 1) {
      return Status::invalid_argument(
          fmt::format("data.path: '{}' has llm.c header version {}; expected 1 (uint16 tokens)", spec.path, version));
    }
    const std::uint64_t declared = read_le32(header + 8);
    if (file_bytes - kLlmcHeaderBytes != declared * 2) {
      return Status::invalid_argument(
          fmt::format("data.path: '{}' has an llm.c header declaring {} tokens ({} bytes after the 1024-byte header) "
                      "but {} bytes follow it; the file is truncated or not an llm.c token file",
                      spec.path, declared, declared * 2, file_bytes - kLlmcHeaderBytes));
    }
  } else if (file_bytes % 2 != 0) {
    return Status::invalid_argument(
        fmt::format("data.path: '{}' has {} bytes, an odd count; expected uint16 tokens (2 bytes each, no header, "
                    "or llm.c's 1024-byte header with magic {})",
                    spec.path, file_bytes, kLlmcMagic));
  }
  src.payload_offset_ = payload_offset;
  src.token_count_ = (file_bytes - payload_offset) / 2;

  if (src.token_count_ < needed_tokens) {
    return Status::invalid_argument(fmt::format(
        "data.path: '{}' holds {} tokens; a batch of data.batch {} x data.seq {} needs at least {} (B*T+1); "
        "use a larger file or a smaller batch",
        spec.path, src.token_count_, spec.batch, spec.seq, needed_tokens));
  }
  std::vector<unsigned char> chunk(static_cast<std::size_t>(std::min(kScanChunkBytes, src.token_count_ * 2)));
  for (std::uint64_t first = 0; first < src.token_count_;) {
    const std::uint64_t count = std::min<std::uint64_t>(chunk.size() / 2, src.token_count_ - first);
    if (!pread_all(fd, chunk.data(), count * 2, payload_offset + 2 * first)) {
      if (errno == 0) return changed_while_read();
      return Status::io_error(fmt::format("data.path: cannot read '{}': {}", spec.path, errno_text(errno)));
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::int32_t id = le16(chunk.data() + 2 * i);
      if (static_cast<std::uint32_t>(id) >= spec.vocab) {
        return Status::invalid_argument(
            fmt::format("data.path: '{}' token {} (byte offset {}) is {}; expected ids below data.vocab = {}",
                        spec.path, first + i, payload_offset + 2 * (first + i), id, spec.vocab));
      }
    }
    first += count;
  }
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // advisory; failure changes nothing
  src.fd_ = guard.release();
  return src;
}

TokenFileSource::TokenFileSource(TokenFileSource&& other) noexcept
    : spec_(std::move(other.spec_)),
      fd_(std::exchange(other.fd_, -1)),
      payload_offset_(other.payload_offset_),
      file_bytes_(other.file_bytes_),
      change_ns_(other.change_ns_),
      token_count_(std::exchange(other.token_count_, 0)),
      has_header_(other.has_header_),
      next_index_(other.next_index_) {}

TokenFileSource& TokenFileSource::operator=(TokenFileSource&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    spec_ = std::move(other.spec_);
    fd_ = std::exchange(other.fd_, -1);
    payload_offset_ = other.payload_offset_;
    file_bytes_ = other.file_bytes_;
    change_ns_ = other.change_ns_;
    token_count_ = std::exchange(other.token_count_, 0);
    has_header_ = other.has_header_;
    next_index_ = other.next_index_;
  }
  return *this;
}

TokenFileSource::~TokenFileSource() {
  if (fd_ >= 0) ::close(fd_);
}

Status TokenFileSource::read_tokens(std::uint64_t first, std::uint64_t count, std::int32_t* out) const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    return Status::io_error(fmt::format("data.path: cannot stat '{}': {}", spec_.path, errno_text(errno)));
  }
  if (static_cast<std::uint64_t>(st.st_size) != file_bytes_ || change_ns(st) != change_ns_) {
    return Status::io_error(fmt::format(
        "data.path: '{}' changed during the run ({} bytes when opened, {} now{}); a token file must not be modified "
        "while training reads it (copy it first, or restart the run to use the new contents)",
        spec_.path, file_bytes_, st.st_size,
        static_cast<std::uint64_t>(st.st_size) == file_bytes_ ? ", rewritten in place" : ""));
  }
  std::vector<unsigned char> bytes(static_cast<std::size_t>(count * 2));
  if (!pread_all(fd_, bytes.data(), bytes.size(), payload_offset_ + 2 * first)) {
    if (errno == 0) {
      return Status::io_error(
          fmt::format("data.path: '{}' changed during the run (a read came back short)", spec_.path));
    }
    return Status::io_error(fmt::format("data.path: cannot read '{}': {}", spec_.path, errno_text(errno)));
  }
  for (std::uint64_t i = 0; i < count; ++i) {
    out[i] = le16(bytes.data() + 2 * i);
    // open() checked every id; one out of range now means the file changed under the run, and the
    // id must not reach the embedding as an index.
    if (static_cast<std::uint32_t>(out[i]) >= spec_.vocab) {
      return Status::io_error(
          fmt::format("data.path: '{}' changed during the run: token {} is now {}, not below "
                      "data.vocab = {}",
                      spec_.path, first + i, out[i], spec_.vocab));
    }
  }
  return Status::ok();
}

std::uint64_t TokenFileSource::batches_per_epoch() const { return (token_count_ - 1) / (spec_.batch * spec_.seq); }

Status TokenFileSource::batch_at(std::uint64_t index, std::uint64_t batch, std::uint64_t seq_plus_one,
                                 std::int32_t* out) const {
  ZINF_CHECK(batch >= 1 && seq_plus_one >= 2 && out != nullptr, "next_batch needs B >= 1, T+1 >= 2 and a buffer");
  const std::uint64_t seq = seq_plus_one - 1;
  ZINF_CHECK(batch <= (token_count_ - 1) / seq, "next_batch: B*T+1 exceeds the tokens in the file");
  const std::uint64_t window = batch * seq;
  const std::uint64_t windows = (token_count_ - 1) / window;
  const std::uint64_t start = (index % windows) * window;
  // Rows overlap by one token: read the window's B*T+1 tokens once, then lay the rows out.
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(window + 1));
  ZINF_RETURN_IF_ERROR(read_tokens(start, window + 1, tokens.data()));
  for (std::uint64_t r = 0; r < batch; ++r) {
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(r * seq), seq_plus_one, out + r * seq_plus_one);
  }
  return Status::ok();
}

Status TokenFileSource::next_batch(std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out) {
  ZINF_RETURN_IF_ERROR(batch_at(next_index_, batch, seq_plus_one, out));
  ++next_index_;
  return Status::ok();
}

}  // namespace zinf::train
