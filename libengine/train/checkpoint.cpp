#include "libengine/train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "libengine/core/errno_text.h"
#include "libengine/core/quote.h"
#include "libengine/io/checksum.h"
#include "libengine/spec/json_input.h"

namespace zinf::train {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'Z', 'I', 'N', 'F', 'C', 'K', 'P', 'T'};
constexpr std::size_t kPrefixBytes = 24;  // magic, version, header CRC, header length
constexpr std::uint64_t kAlignBytes = 64;
constexpr std::string_view kFileSuffix = ".zckpt";
constexpr std::string_view kTmpSuffix = ".zckpt.tmp";
// Reads and writes go in pieces of at most 1 GiB: Linux transfers at most ~2 GiB per call anyway,
// and the loop below has to handle short transfers regardless.
constexpr std::size_t kMaxIoBytes = std::size_t{1} << 30;

std::uint64_t align_up(std::uint64_t value) { return (value + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

Status os_error(std::string_view action, const fs::path& path, int error_number) {
  return Status::io_error(fmt::format("checkpoint: cannot {} {}: {}", action, path.string(), errno_text(error_number)));
}

// Closes the descriptor on every path out of a function.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports the error close() gives (a deferred write error on some file systems).
  int close_now() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

Status write_all(int fd, const void* data, std::size_t bytes, const fs::path& path) {
  const auto* at = static_cast<const std::byte*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(fd, at, std::min(bytes, kMaxIoBytes));
    if (written < 0) {
      if (errno == EINTR) continue;
      return os_error("write", path, errno);
    }
    at += written;
    bytes -= static_cast<std::size_t>(written);
  }
  return Status::ok();
}

// Reads exactly `bytes` at `offset`; a short file is reported as truncated.
Status read_all(int fd, void* data, std::size_t bytes, std::uint64_t offset, const fs::path& path,
                std::string_view what) {
  auto* at = static_cast<std::byte*>(data);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, at, std::min(bytes, kMaxIoBytes), static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return os_error(fmt::format("read {} of", what), path, errno);
    }
    if (got == 0) {
      return Status::io_error(fmt::format("checkpoint {}: truncated while reading {} at byte {}", path.string(),
                                          what, offset));
    }
    at += got;
    offset += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
  return Status::ok();
}

Status fsync_directory(const fs::path& dir) {
  FileDescriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return os_error("open directory", dir, errno);
  if (::fsync(fd.get()) != 0) return os_error("fsync directory", dir, errno);
  return Status::ok();
}

// The step of a file named "step-<digits><suffix>", or nullopt.
std::optional<std::int64_t> parse_step(const std::string& name, std::string_view suffix) {
  constexpr std::string_view kPrefix = "step-";
  if (name.size() <= kPrefix.size() + suffix.size() || !name.starts_with(kPrefix) || !name.ends_with(suffix)) {
    return std::nullopt;
  }
  const std::string_view digits(name.data() + kPrefix.size(), name.size() - kPrefix.size() - suffix.size());
  if (digits.size() > 18) return std::nullopt;  // would overflow int64
  std::int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

std::uint32_t crc_of(std::span<const float> values) { return io::crc32c(std::as_bytes(values)); }

void put_u32(char* out, std::uint32_t value) { std::memcpy(out, &value, 4); }
void put_u64(char* out, std::uint64_t value) { std::memcpy(out, &value, 8); }

Status validate_arrays(std::span<const NamedArray> arrays, std::string_view where) {
  std::set<std::string_view> seen;
  for (const NamedArray& array : arrays) {
    if (array.name.empty()) {
      return Status::invalid_argument(fmt::format("{}: an array has an empty name", where));
    }
    if (!seen.insert(array.name).second) {
      return Status::invalid_argument(fmt::format("{}: array name '{}' appears twice", where, array.name));
    }
  }
  return Status::ok();
}

// Writes the whole checkpoint to the open descriptor `fd` (the .tmp file) and syncs it.
Status write_checkpoint_file(int fd, const fs::path& tmp, const CheckpointMeta& meta,
                             std::span<const NamedArray> arrays) {
  nlohmann::json table = nlohmann::json::array();
  std::uint64_t data_bytes = 0;
  for (const NamedArray& array : arrays) {
    table.push_back({{"name", array.name},
                     {"numel", array.values.size()},
                     {"offset", data_bytes},
                     {"crc32c", crc_of(array.values)}});
    data_bytes = align_up(data_bytes + array.values.size_bytes());
  }
  nlohmann::json header = {{"step", meta.step}, {"fingerprint", meta.fingerprint}, {"extra", meta.extra},
                           {"arrays", std::move(table)}};
  // file_bytes depends on the header's own length, which depends on file_bytes' digits: fix the
  // point by recomputing until the length stops changing (twice at most in practice).
  std::string text;
  std::uint64_t file_bytes = 0;
  for (;;) {
    header["file_bytes"] = file_bytes;
    text = header.dump();
    const std::uint64_t needed = align_up(kPrefixBytes + text.size()) + data_bytes;
    if (needed == file_bytes) break;
    file_bytes = needed;
  }
  const std::uint64_t data_start = align_up(kPrefixBytes + text.size());
  std::string head(data_start, '\0');
  std::memcpy(head.data(), kMagic, sizeof(kMagic));
  put_u32(head.data() + 8, kCheckpointFormatVersion);
  put_u32(head.data() + 12, io::crc32c(std::as_bytes(std::span<const char>(text.data(), text.size()))));
  put_u64(head.data() + 16, text.size());
  std::memcpy(head.data() + kPrefixBytes, text.data(), text.size());
  ZINF_RETURN_IF_ERROR(write_all(fd, head.data(), head.size(), tmp));

  static constexpr char kZeros[kAlignBytes] = {};
  for (const NamedArray& array : arrays) {
    ZINF_RETURN_IF_ERROR(write_all(fd, array.values.data(), array.values.size_bytes(), tmp));
    const std::uint64_t pad = align_up(array.values.size_bytes()) - array.values.size_bytes();
    ZINF_RETURN_IF_ERROR(write_all(fd, kZeros, pad, tmp));
  }
  if (::fsync(fd) != 0) return os_error("fsync", tmp, errno);
  return Status::ok();
}

// Removes all but the newest `keep_last` checkpoints (0: none removed) and .tmp files of earlier
// saves that never finished.
Status prune(const fs::path& dir, int keep_last, std::int64_t saved_step) {
  std::vector<std::pair<std::int64_t, fs::path>> checkpoints;
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (auto step = parse_step(name, kFileSuffix)) {
      checkpoints.emplace_back(*step, it->path());
    } else if (auto tmp_step = parse_step(name, kTmpSuffix); tmp_step && *tmp_step <= saved_step) {
      stale.push_back(it->path());
    }
  }
  if (ec) return os_error("list", dir, ec.value());
  std::sort(checkpoints.begin(), checkpoints.end());
  if (keep_last > 0 && checkpoints.size() > static_cast<std::size_t>(keep_last)) {
    checkpoints.resize(checkpoints.size() - static_cast<std::size_t>(keep_last));
    for (const auto& [step, path] : checkpoints) stale.push_back(path);
  }
  for (const fs::path& path : stale) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return os_error("delete old checkpoint", path, errno);
  }
  return Status::ok();
}

std::string hex32(std::uint32_t value) { return fmt::format("0x{:08x}", value); }

}  // namespace

fs::path checkpoint_path(const fs::path& dir, std::int64_t step) {
  return dir / fmt::format("step-{:08d}{}", step, kFileSuffix);
}

Status save_checkpoint(const fs::path& dir, const CheckpointMeta& meta, std::span<const NamedArray> arrays,
                       int keep_last) {
  if (meta.step < 0) {
    return Status::invalid_argument(fmt::format("checkpoint: step {} is negative", meta.step));
  }
  if (keep_last < 0) {
    return Status::invalid_argument(
        fmt::format("checkpoint.keep_last: {} is negative; expected 0 (keep all) or a count", keep_last));
  }
  ZINF_RETURN_IF_ERROR(validate_arrays(arrays, "checkpoint"));

  std::error_code ec;
  const bool existed = fs::is_directory(dir, ec);
  if (!existed) {
    fs::create_directories(dir, ec);
    if (ec) return os_error("create directory", dir, ec.value());
    // Make the new directory entry itself durable.
    if (dir.has_parent_path()) ZINF_RETURN_IF_ERROR(fsync_directory(fs::absolute(dir).parent_path()));
  }

  const fs::path final_path = checkpoint_path(dir, meta.step);
  fs::path tmp = final_path;
  tmp += ".tmp";
  {
    FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return os_error("create", tmp, errno);
    Status status = write_checkpoint_file(fd.get(), tmp, meta, arrays);
    if (status.is_ok()) {
      if (const int error = fd.close_now(); error != 0) status = os_error("close", tmp, error);
    }
    if (!status.is_ok()) {
      ::unlink(tmp.c_str());
      return status;
    }
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return os_error(fmt::format("rename {} to", tmp.string()), final_path, error);
  }
  ZINF_RETURN_IF_ERROR(fsync_directory(dir));
  return prune(dir, keep_last, meta.step);
}

Result<std::optional<fs::path>> latest_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory) return os_error("inspect", dir, ec.value());
    return std::optional<fs::path>();
  }
  std::optional<std::pair<std::int64_t, fs::path>> best;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (auto step = parse_step(it->path().filename().string(), kFileSuffix); step && (!best || *step > best->first)) {
      best.emplace(*step, it->path());
    }
  }
  if (ec) return os_error("list", dir, ec.value());
  if (!best) return std::optional<fs::path>();
  return std::optional<fs::path>(best->second);
}

Result<CheckpointMeta> load_checkpoint(const fs::path& path, std::span<const NamedArray> into) {
  ZINF_RETURN_IF_ERROR(validate_arrays(into, "checkpoint load"));
  const std::string file = path.string();
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) return Status::not_found(fmt::format("checkpoint {} does not exist", file));
    return os_error("open", path, error);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return os_error("stat", path, errno);
  const auto size_bytes = static_cast<std::uint64_t>(info.st_size);

  char prefix[kPrefixBytes];
  if (size_bytes < kPrefixBytes) {
    return Status::io_error(fmt::format("checkpoint {}: truncated: {} bytes is shorter than the {}-byte file prefix",
                                        file, size_bytes, kPrefixBytes));
  }
  ZINF_RETURN_IF_ERROR(read_all(fd.get(), prefix, kPrefixBytes, 0, path, "the file prefix"));
  if (std::memcmp(prefix, kMagic, sizeof(kMagic)) != 0) {
    return Status::invalid_argument(
        fmt::format("checkpoint {}: not a zinf checkpoint (the file does not start with \"ZINFCKPT\")", file));
  }
  std::uint32_t version = 0;
  std::uint32_t header_crc = 0;
  std::uint64_t header_bytes = 0;
  std::memcpy(&version, prefix + 8, 4);
  std::memcpy(&header_crc, prefix + 12, 4);
  std::memcpy(&header_bytes, prefix + 16, 8);
  if (version != kCheckpointFormatVersion) {
    return Status::invalid_argument(fmt::format("checkpoint {}: format version {} is not supported; this build reads "
                                                "version {}", file, version, kCheckpointFormatVersion));
  }
  if (header_bytes > size_bytes - kPrefixBytes) {
    return Status::io_error(fmt::format("checkpoint {}: truncated: the header needs {} bytes but the file has {}",
                                        file, header_bytes, size_bytes - kPrefixBytes));
  }
  std::string text(header_bytes, '\0');
  ZINF_RETURN_IF_ERROR(read_all(fd.get(), text.data(), text.size(), kPrefixBytes, path, "the header"));
  const std::uint32_t computed_header_crc = io::crc32c(std::as_bytes(std::span<const char>(text.data(), text.size())));
  if (computed_header_crc != header_crc) {
    return Status::io_error(fmt::format("checkpoint {}: the header failed its CRC-32C check (stored {}, computed {}); "
                                        "the file is corrupt", file, hex32(header_crc), hex32(computed_header_crc)));
  }

  CheckpointMeta meta;
  struct Entry {
    std::uint64_t numel;
    std::uint64_t offset;
    std::uint32_t crc;
  };
  std::map<std::string, Entry, std::less<>> entries;
  std::uint64_t file_bytes = 0;
  // The header passed its CRC, but a file can be crafted: parse it with the same bounds as any
  // user JSON (depth, duplicate keys, numbers a double cannot hold), then read it field by field.
  Result<nlohmann::json> parsed = spec::parse_json_text(text, "the header");
  if (!parsed.is_ok()) {
    return Status::invalid_argument(fmt::format("checkpoint {}: the header is malformed: {}", file, parsed.status().message()));
  }
  // Integers are read exactly (a float or an out-of-range number is malformed, never converted).
  const auto unsigned_field = [&](const nlohmann::json& object, const char* key) -> std::uint64_t {
    const std::optional<std::uint64_t> value = spec::exact_uint64(object.at(key));
    if (!value) throw std::invalid_argument(fmt::format("'{}' is not a non-negative integer", key));
    return *value;
  };
  try {
    const nlohmann::json& header = *parsed;
    const std::optional<std::int64_t> step = spec::exact_int64(header.at("step"));
    if (!step) throw std::invalid_argument("'step' is not an integer");
    meta.step = *step;
    meta.fingerprint = header.at("fingerprint").get<std::string>();
    meta.extra = header.at("extra");
    file_bytes = unsigned_field(header, "file_bytes");
    if (!header.at("arrays").is_array()) throw std::invalid_argument("'arrays' is not an array");
    for (const nlohmann::json& array : header.at("arrays")) {
      const std::uint64_t crc = unsigned_field(array, "crc32c");
      if (crc > 0xffffffffu) throw std::invalid_argument("'crc32c' is larger than 32 bits");
      entries[array.at("name").get<std::string>()] =
          Entry{unsigned_field(array, "numel"), unsigned_field(array, "offset"), static_cast<std::uint32_t>(crc)};
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid_argument(fmt::format("checkpoint {}: the header is malformed: {}", file, e.what()));
  } catch (const std::invalid_argument& e) {
    return Status::invalid_argument(fmt::format("checkpoint {}: the header is malformed: {}", file, e.what()));
  }
  if (meta.step < 0) {
    return Status::invalid_argument(fmt::format("checkpoint {}: the header records step {}; the file is corrupt", file,
                                                meta.step));
  }
  if (size_bytes < file_bytes) {
    return Status::io_error(fmt::format("checkpoint {}: truncated: {} bytes of the {} the header records", file,
                                        size_bytes, file_bytes));
  }
  if (size_bytes > file_bytes) {
    return Status::io_error(fmt::format("checkpoint {}: {} bytes, but the header records {}; the file is corrupt",
                                        file, size_bytes, file_bytes));
  }

  const std::uint64_t data_start = align_up(kPrefixBytes + header_bytes);
  for (const NamedArray& array : into) {
    const auto it = entries.find(array.name);
    if (it == entries.end()) {
      return Status::invalid_argument(fmt::format(
          "checkpoint {}: has no array '{}'; it was saved from a different model or configuration", file,
          array.name));
    }
    if (it->second.numel != array.values.size()) {
      return Status::invalid_argument(fmt::format(
          "checkpoint {}: array '{}' holds {} elements, but this run's has {}; it was saved from a different model",
          file, array.name, it->second.numel, array.values.size()));
    }
  }
  if (entries.size() != into.size()) {
    for (const auto& named_entry : entries) {
      const std::string& name = named_entry.first;  // not a structured binding: Clang 14 cannot capture one
      const bool wanted = std::any_of(into.begin(), into.end(), [&](const NamedArray& a) { return a.name == name; });
      if (!wanted) {
        return Status::invalid_argument(fmt::format(
            "checkpoint {}: holds array {} that this run does not have; it was saved from a different model", file,
            zinf::quoted(name)));
      }
    }
  }
  for (const NamedArray& array : into) {
    const Entry& entry = entries.find(array.name)->second;
    const std::uint64_t begin = data_start + entry.offset;
    if (entry.offset > file_bytes || begin + array.values.size_bytes() > file_bytes) {
      return Status::io_error(fmt::format("checkpoint {}: array '{}' lies beyond the end of the file; the file is "
                                          "corrupt", file, array.name));
    }
    ZINF_RETURN_IF_ERROR(read_all(fd.get(), array.values.data(), array.values.size_bytes(), begin, path,
                                  fmt::format("array '{}'", array.name)));
    const std::uint32_t crc = crc_of(array.values);
    if (crc != entry.crc) {
      return Status::io_error(fmt::format("checkpoint {}: array '{}' failed its CRC-32C check (stored {}, computed {}); "
                                          "the file is corrupt", file, array.name, hex32(entry.crc), hex32(crc)));
    }
  }
  return meta;
}

}  // namespace zinf::train
