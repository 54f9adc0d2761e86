#include "libengine/train/eval_tokens.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "libengine/core/errno_text.h"

namespace zinf::train {
namespace {

constexpr std::uint64_t kHeaderBytes = 256 * 4;
constexpr std::int32_t kGpt2Magic = 20240520;    // version 1, uint16 tokens
constexpr std::int32_t kLlama3Magic = 20240801;  // version 7, uint32 tokens

std::int32_t le32(const unsigned char* p) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
                                   (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24));
}

}  // namespace

EvalTokens::~EvalTokens() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<EvalTokens>> EvalTokens::open(const std::filesystem::path& path, int flat_token_bytes) {
  std::unique_ptr<EvalTokens> tokens(new EvalTokens());
  tokens->path_ = path;
  const std::string file = path.string();
  tokens->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (tokens->fd_ < 0) {
    const int error = errno;
    if (error == ENOENT) return Status::not_found(fmt::format("--tokens: {}: no such file", file));
    return Status::io_error(fmt::format("--tokens: cannot open {}: {}", file, errno_text(error)));
  }
  struct stat info {};
  if (::fstat(tokens->fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    return Status::invalid_argument(fmt::format("--tokens: {} is not a regular file", file));
  }
  const auto size = static_cast<std::uint64_t>(info.st_size);
  unsigned char header[kHeaderBytes];
  std::int32_t magic = 0;
  if (size >= kHeaderBytes && ::pread(tokens->fd_, header, kHeaderBytes, 0) == static_cast<ssize_t>(kHeaderBytes)) {
    magic = le32(header);
  }
  if (magic == kGpt2Magic || magic == kLlama3Magic) {
    const std::int32_t version = le32(header + 4);
    const std::int32_t want = magic == kGpt2Magic ? 1 : 7;
    if (version != want) {
      return Status::invalid_argument(
          fmt::format("--tokens: {}: llm.c header magic {} needs version {}, found {}", file, magic, want, version));
    }
    tokens->width_ = magic == kGpt2Magic ? 2 : 4;
    tokens->data_start_ = kHeaderBytes;
    const std::int32_t count = le32(header + 8);
    const std::uint64_t payload = size - kHeaderBytes;
    if (count < 0 || static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(tokens->width_) != payload) {
      return Status::invalid_argument(
          fmt::format("--tokens: {}: its llm.c header says {} tokens of {} bytes, but {} "
                      "bytes follow it",
                      file, count, tokens->width_, payload));
    }
    tokens->count_ = static_cast<std::uint64_t>(count);
    tokens->format_ = fmt::format("llm.c v{} (uint{})", version, 8 * tokens->width_);
  } else {
    if (flat_token_bytes != 2 && flat_token_bytes != 4) {
      return Status::invalid_argument(fmt::format("--token-bytes: {} is not 2 or 4", flat_token_bytes));
    }
    tokens->width_ = flat_token_bytes;
    if (size % static_cast<std::uint64_t>(tokens->width_) != 0) {
      return Status::invalid_argument(
          fmt::format("--tokens: {}: {} bytes is not a whole number of {}-byte tokens", file, size, tokens->width_));
    }
    tokens->count_ = size / static_cast<std::uint64_t>(tokens->width_);
    tokens->format_ = fmt::format("flat uint{}", 8 * tokens->width_);
  }
  return tokens;
}

std::uint64_t EvalTokens::batches(std::uint64_t batch, std::uint64_t seq) const {
  return count_ == 0 ? 0 : (count_ - 1) / (batch * seq);
}

Status EvalTokens::read_batch(std::uint64_t k, std::uint64_t batch, std::uint64_t seq, std::uint32_t vocab,
                              std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) {
  if (k >= batches(batch, seq)) {
    return Status::invalid_argument(fmt::format("--tokens: {}: batch {} needs tokens up to {}, the file has {}",
                                                path_.string(), k, (k + 1) * batch * seq + 1, count_));
  }
  const std::uint64_t first = k * batch * seq;
  const std::uint64_t n = batch * seq + 1;
  buffer_.resize(n * static_cast<std::uint64_t>(width_));
  std::uint64_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t got = ::pread(fd_, buffer_.data() + done, buffer_.size() - done,
                                static_cast<off_t>(data_start_ + first * static_cast<std::uint64_t>(width_) + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return Status::io_error(fmt::format("--tokens: cannot read {}: {}", path_.string(),
                                          got < 0 ? errno_text(errno) : std::string("the file ends early")));
    }
    done += static_cast<std::uint64_t>(got);
  }
  std::vector<std::uint32_t> window(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const unsigned char* p = buffer_.data() + i * static_cast<std::uint64_t>(width_);
    window[i] = width_ == 2 ? static_cast<std::uint32_t>(p[0] | (p[1] << 8)) : static_cast<std::uint32_t>(le32(p));
    if (window[i] >= vocab) {
      return Status::invalid_argument(fmt::format("--tokens: {}: token {} is {}, not below the model's vocab {}",
                                                  path_.string(), first + i, window[i], vocab));
    }
  }
  inputs.resize(batch * seq);
  targets.resize(batch * seq);
  for (std::uint64_t r = 0; r < batch; ++r) {
    for (std::uint64_t t = 0; t < seq; ++t) {
      inputs[r * seq + t] = static_cast<std::int32_t>(window[r * seq + t]);
      targets[r * seq + t] = static_cast<std::int32_t>(window[r * seq + t + 1]);
    }
  }
  return Status::ok();
}

}  // namespace zinf::train
