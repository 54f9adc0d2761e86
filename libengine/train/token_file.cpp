// TokenFileSource: mmap, validation and llm.c-order batches. See token_file.h.
#include "libengine/train/token_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "libengine/core/check.h"
#include "libengine/core/errno_text.h"

namespace zinf::train {
namespace {

std::uint32_t read_le32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// Closes a descriptor on every path out of open().
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;

 private:
  int fd_;
};

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

  const int fd = ::open(spec.path.c_str(), O_RDONLY | O_CLOEXEC);
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
  if (file_bytes > 0) {
    void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      return Status::io_error(
          fmt::format("data.path: cannot map '{}' ({} bytes): {}", spec.path, file_bytes, errno_text(errno)));
    }
    src.map_ = map;  // from here the destructor unmaps on every error path
    src.map_bytes_ = file_bytes;
    (void)::madvise(map, file_bytes, MADV_SEQUENTIAL);  // advisory; failure changes nothing
  }
  const auto* bytes = static_cast<const unsigned char*>(src.map_);

  std::uint64_t payload_offset = 0;
  if (file_bytes >= kLlmcHeaderBytes && read_le32(bytes) == static_cast<std::uint32_t>(kLlmcMagic)) {
    src.has_header_ = true;
    payload_offset = kLlmcHeaderBytes;
    const std::uint32_t version = read_le32(bytes + 4);
    if (version != 1) {
      return Status::invalid_argument(
          fmt::format("data.path: '{}' has llm.c header version {}; expected 1 (uint16 tokens)", spec.path, version));
    }
    const std::uint64_t declared = read_le32(bytes + 8);
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
  src.tokens_ = bytes == nullptr ? nullptr : bytes + payload_offset;
  src.token_count_ = (file_bytes - payload_offset) / 2;

  if (src.token_count_ < needed_tokens) {
    return Status::invalid_argument(fmt::format(
        "data.path: '{}' holds {} tokens; a batch of data.batch {} x data.seq {} needs at least {} (B*T+1); "
        "use a larger file or a smaller batch",
        spec.path, src.token_count_, spec.batch, spec.seq, needed_tokens));
  }
  for (std::uint64_t i = 0; i < src.token_count_; ++i) {
    const std::int32_t id = src.token(i);
    if (static_cast<std::uint32_t>(id) >= spec.vocab) {
      return Status::invalid_argument(
          fmt::format("data.path: '{}' token {} (byte offset {}) is {}; expected ids below data.vocab = {}", spec.path,
                      i, payload_offset + 2 * i, id, spec.vocab));
    }
  }
  return src;
}

TokenFileSource::TokenFileSource(TokenFileSource&& other) noexcept
    : spec_(std::move(other.spec_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      tokens_(std::exchange(other.tokens_, nullptr)),
      token_count_(std::exchange(other.token_count_, 0)),
      has_header_(other.has_header_),
      next_index_(other.next_index_) {}

TokenFileSource& TokenFileSource::operator=(TokenFileSource&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
    spec_ = std::move(other.spec_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    token_count_ = std::exchange(other.token_count_, 0);
    has_header_ = other.has_header_;
    next_index_ = other.next_index_;
  }
  return *this;
}

TokenFileSource::~TokenFileSource() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

std::int32_t TokenFileSource::token(std::uint64_t i) const {
  const unsigned char* p = tokens_ + 2 * i;  // little-endian on every host
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8));
}

std::uint64_t TokenFileSource::batches_per_epoch() const { return (token_count_ - 1) / (spec_.batch * spec_.seq); }

void TokenFileSource::batch_at(std::uint64_t index, std::uint64_t batch, std::uint64_t seq_plus_one,
                               std::int32_t* out) const {
  ZINF_CHECK(batch >= 1 && seq_plus_one >= 2 && out != nullptr, "next_batch needs B >= 1, T+1 >= 2 and a buffer");
  const std::uint64_t seq = seq_plus_one - 1;
  ZINF_CHECK(batch <= (token_count_ - 1) / seq, "next_batch: B*T+1 exceeds the tokens in the file");
  const std::uint64_t window = batch * seq;
  const std::uint64_t windows = (token_count_ - 1) / window;
  const std::uint64_t start = (index % windows) * window;
  for (std::uint64_t r = 0; r < batch; ++r) {
    std::int32_t* row = out + r * seq_plus_one;
    const std::uint64_t row_start = start + r * seq;
    for (std::uint64_t t = 0; t < seq_plus_one; ++t) row[t] = token(row_start + t);
  }
}

void TokenFileSource::next_batch(std::uint64_t batch, std::uint64_t seq_plus_one, std::int32_t* out) {
  batch_at(next_index_, batch, seq_plus_one, out);
  ++next_index_;
}

}  // namespace zinf::train
