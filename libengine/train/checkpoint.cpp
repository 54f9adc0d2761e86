#include "libengine/train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
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

// Writes exactly `bytes` at `offset`.
Status pwrite_all(int fd, const void* data, std::size_t bytes, std::uint64_t offset, const fs::path& path) {
  const auto* at = static_cast<const std::byte*>(data);
  while (bytes > 0) {
    const ssize_t written = ::pwrite(fd, at, std::min(bytes, kMaxIoBytes), static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      return os_error("write", path, errno);
    }
    at += written;
    offset += static_cast<std::uint64_t>(written);
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
      return Status::io_error(
          fmt::format("checkpoint {}: truncated while reading {} at byte {}", path.string(), what, offset));
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

void put_u32(char* out, std::uint32_t value) { std::memcpy(out, &value, 4); }
void put_u64(char* out, std::uint64_t value) { std::memcpy(out, &value, 8); }

Status validate_layout(std::span<const zero::CheckpointArrayInfo> arrays, std::string_view where) {
  std::set<std::string_view> seen;
  for (const zero::CheckpointArrayInfo& array : arrays) {
    if (array.name.empty()) {
      return Status::invalid_argument(fmt::format("{}: an array has an empty name", where));
    }
    if (!seen.insert(array.name).second) {
      return Status::invalid_argument(fmt::format("{}: array name '{}' appears twice", where, array.name));
    }
  }
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

Status write_file_durably(const fs::path& path, std::string_view text) {
  fs::path tmp = path;
  tmp += ".tmp";
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return os_error("create", tmp, errno);
  Status status = pwrite_all(fd.get(), text.data(), text.size(), 0, tmp);
  if (status.is_ok() && ::fsync(fd.get()) != 0) status = os_error("fsync", tmp, errno);
  if (status.is_ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = os_error(fmt::format("rename {} to", tmp.string()), path, errno);
  }
  if (!status.is_ok()) {
    (void)::unlink(tmp.c_str());
    return status;
  }
  return fsync_directory(path.has_parent_path() ? path.parent_path() : fs::path("."));
}

fs::path checkpoint_path(const fs::path& dir, std::int64_t step) {
  return dir / fmt::format("step-{:08d}{}", step, kFileSuffix);
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

Result<std::unique_ptr<CheckpointWriter>> CheckpointWriter::create(const fs::path& dir, const CheckpointMeta& meta,
                                                                   std::vector<zero::CheckpointArrayInfo> layout,
                                                                   const std::string& file_name) {
  if (meta.step < 0) {
    return Status::invalid_argument(fmt::format("checkpoint: step {} is negative", meta.step));
  }
  ZINF_RETURN_IF_ERROR(validate_layout(layout, "checkpoint"));
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return os_error("create directory", dir, ec.value());
    // Make the new directory entry itself durable.
    if (dir.has_parent_path()) ZINF_RETURN_IF_ERROR(fsync_directory(fs::absolute(dir).parent_path()));
  }
  std::unique_ptr<CheckpointWriter> writer(new CheckpointWriter());
  writer->dir_ = dir;
  writer->meta_ = meta;
  writer->layout_ = std::move(layout);
  writer->final_path_ = file_name.empty() ? checkpoint_path(dir, meta.step) : dir / file_name;
  writer->tmp_path_ = writer->final_path_;
  writer->tmp_path_ += ".tmp";
  writer->crcs_.assign(writer->layout_.size(), 0);
  writer->written_.assign(writer->layout_.size(), 0);
  // The header records every array's CRC, known only once the array is written: reserve room for
  // the widest CRC now and pad the real header to that length with spaces (JSON whitespace) at
  // commit, so the data offsets fixed here hold.
  std::uint64_t data_bytes = 0;
  for (const zero::CheckpointArrayInfo& array : writer->layout_) {
    writer->offsets_.push_back(data_bytes);
    data_bytes = align_up(data_bytes + array.numel * sizeof(float));
  }
  std::vector<std::uint32_t> widest(writer->layout_.size(), std::numeric_limits<std::uint32_t>::max());
  std::uint64_t file_bytes = 0;
  for (;;) {
    writer->header_bytes_ = writer->header_text(widest, file_bytes).size();
    const std::uint64_t needed = align_up(kPrefixBytes + writer->header_bytes_) + data_bytes;
    if (needed == file_bytes) break;
    file_bytes = needed;
  }
  writer->file_bytes_ = file_bytes;
  writer->data_start_ = align_up(kPrefixBytes + writer->header_bytes_);
  writer->fd_ = ::open(writer->tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (writer->fd_ < 0) return os_error("create", writer->tmp_path_, errno);
  return writer;
}

CheckpointWriter::~CheckpointWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

std::string CheckpointWriter::header_text(std::span<const std::uint32_t> crcs, std::uint64_t file_bytes) const {
  nlohmann::json table = nlohmann::json::array();
  for (std::size_t i = 0; i < layout_.size(); ++i) {
    table.push_back(
        {{"name", layout_[i].name}, {"numel", layout_[i].numel}, {"offset", offsets_[i]}, {"crc32c", crcs[i]}});
  }
  nlohmann::json header = {{"step", meta_.step},
                           {"fingerprint", meta_.fingerprint},
                           {"extra", meta_.extra},
                           {"arrays", std::move(table)},
                           {"file_bytes", file_bytes}};
  if (meta_.shard) {
    header["set"] = {{"id", meta_.shard->set_id}, {"rank", meta_.shard->rank}, {"world_size", meta_.shard->world_size}};
  }
  return header.dump();
}

Status CheckpointWriter::write(std::size_t index, std::size_t offset, std::span<const float> values) {
  ZINF_CHECK(index < layout_.size(), "checkpoint write: array index out of range");
  ZINF_CHECK(!committed_ && fd_ >= 0, "checkpoint write after commit");
  const zero::CheckpointArrayInfo& array = layout_[index];
  if (offset != written_[index] || (written_[index] == array.numel && array.numel > 0)) {
    return Status::invalid_argument(
        written_[index] == array.numel
            ? fmt::format("checkpoint: array '{}' written twice", array.name)
            : fmt::format("checkpoint: array '{}' written at element {} after {} of its {} elements; ranges go back "
                          "to back from element 0",
                          array.name, offset, written_[index], array.numel));
  }
  if (offset + values.size() > array.numel) {
    return Status::invalid_argument(fmt::format("checkpoint: array '{}' has {} elements, {} written at element {}",
                                                array.name, array.numel, values.size(), offset));
  }
  ZINF_RETURN_IF_ERROR(pwrite_all(fd_, values.data(), values.size_bytes(),
                                  data_start_ + offsets_[index] + offset * sizeof(float), tmp_path_));
  crcs_[index] = io::crc32c(std::as_bytes(values), crcs_[index]);
  written_[index] += values.size();
  return Status::ok();
}

Result<fs::path> CheckpointWriter::commit(int keep_last) {
  if (keep_last < 0) {
    return Status::invalid_argument(
        fmt::format("checkpoint.keep_last: {} is negative; expected 0 (keep all) or a count", keep_last));
  }
  for (std::size_t i = 0; i < layout_.size(); ++i) {
    if (written_[i] != layout_[i].numel) {
      return Status::invalid_argument(fmt::format("checkpoint: array '{}' was never written whole ({} of {} elements)",
                                                  layout_[i].name, written_[i], layout_[i].numel));
    }
  }
  std::string text = header_text(crcs_, file_bytes_);
  ZINF_CHECK(text.size() <= header_bytes_, "checkpoint header grew beyond its reserved length");
  text.resize(header_bytes_, ' ');
  std::string head(data_start_, '\0');
  std::memcpy(head.data(), kMagic, sizeof(kMagic));
  put_u32(head.data() + 8, kCheckpointFormatVersion);
  header_crc_ = io::crc32c(std::as_bytes(std::span<const char>(text.data(), text.size())));
  put_u32(head.data() + 12, header_crc_);
  put_u64(head.data() + 16, text.size());
  std::memcpy(head.data() + kPrefixBytes, text.data(), text.size());
  ZINF_RETURN_IF_ERROR(pwrite_all(fd_, head.data(), head.size(), 0, tmp_path_));
  // The padding after the last array: the file has exactly file_bytes.
  if (::ftruncate(fd_, static_cast<off_t>(file_bytes_)) != 0) return os_error("extend", tmp_path_, errno);
  if (::fsync(fd_) != 0) return os_error("fsync", tmp_path_, errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) return os_error("close", tmp_path_, errno);
  if (::rename(tmp_path_.c_str(), final_path_.c_str()) != 0) {
    return os_error(fmt::format("rename {} to", tmp_path_.string()), final_path_, errno);
  }
  committed_ = true;
  ZINF_RETURN_IF_ERROR(fsync_directory(dir_));
  ZINF_RETURN_IF_ERROR(prune(dir_, keep_last, meta_.step));
  return final_path_;
}

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::open(const fs::path& path,
                                                                 std::vector<zero::CheckpointArrayInfo> layout) {
  ZINF_RETURN_IF_ERROR(validate_layout(layout, "checkpoint load"));
  return open_impl(path, std::move(layout), false);
}

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::open_as_written(const fs::path& path) {
  return open_impl(path, {}, true);
}

Status CheckpointReader::verify_data() {
  constexpr std::size_t kPiece = std::size_t{1} << 20;  // elements per read: 4 MiB of host memory
  // The bytes no CRC covers — the alignment padding after the header and after each array — are
  // zeros as written: any other value is damage too.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> arrays;  // [begin, end) in the file
  for (const Entry& entry : entries_) arrays.emplace_back(entry.offset, entry.offset + entry.numel * sizeof(float));
  std::sort(arrays.begin(), arrays.end());
  arrays.emplace_back(file_bytes_, file_bytes_);
  std::vector<char> gap;
  std::uint64_t at = header_end_;
  for (const auto& [begin, end] : arrays) {
    if (begin > at) {
      gap.resize(begin - at);
      ZINF_RETURN_IF_ERROR(read_all(fd_, gap.data(), gap.size(), at, path_, "the padding"));
      const auto nonzero = std::find_if(gap.begin(), gap.end(), [](char c) { return c != 0; });
      if (nonzero != gap.end()) {
        return Status::io_error(
            fmt::format("checkpoint {}: byte {} (alignment padding) is not zero; the file is corrupt", path_.string(),
                        at + static_cast<std::uint64_t>(nonzero - gap.begin())));
      }
    }
    at = std::max(at, end);
  }
  std::vector<float> buffer;
  for (std::size_t index = 0; index < layout_.size(); ++index) {
    const auto numel = static_cast<std::size_t>(layout_[index].numel);
    std::size_t offset = 0;
    do {
      buffer.resize(std::min(kPiece, numel - offset));
      ZINF_RETURN_IF_ERROR(read(index, offset, buffer));
      offset += buffer.size();
    } while (offset < numel);
  }
  return Status::ok();
}

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::open_impl(const fs::path& path,
                                                                      std::vector<zero::CheckpointArrayInfo> layout,
                                                                      bool as_written) {
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  reader->path_ = path;
  reader->layout_ = std::move(layout);
  const std::string file = path.string();
  reader->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader->fd_ < 0) {
    const int error = errno;
    if (error == ENOENT) return Status::not_found(fmt::format("checkpoint {} does not exist", file));
    return os_error("open", path, error);
  }
  const int fd = reader->fd_;
  struct stat info {};
  if (::fstat(fd, &info) != 0) return os_error("stat", path, errno);
  const auto size_bytes = static_cast<std::uint64_t>(info.st_size);

  char prefix[kPrefixBytes];
  if (size_bytes < kPrefixBytes) {
    return Status::io_error(fmt::format("checkpoint {}: truncated: {} bytes is shorter than the {}-byte file prefix",
                                        file, size_bytes, kPrefixBytes));
  }
  ZINF_RETURN_IF_ERROR(read_all(fd, prefix, kPrefixBytes, 0, path, "the file prefix"));
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
    return Status::invalid_argument(
        fmt::format("checkpoint {}: format version {} is not supported; this build reads "
                    "version {}",
                    file, version, kCheckpointFormatVersion));
  }
  if (header_bytes > size_bytes - kPrefixBytes) {
    return Status::io_error(fmt::format("checkpoint {}: truncated: the header needs {} bytes but the file has {}", file,
                                        header_bytes, size_bytes - kPrefixBytes));
  }
  std::string text(header_bytes, '\0');
  ZINF_RETURN_IF_ERROR(read_all(fd, text.data(), text.size(), kPrefixBytes, path, "the header"));
  const std::uint32_t computed_header_crc = io::crc32c(std::as_bytes(std::span<const char>(text.data(), text.size())));
  if (computed_header_crc != header_crc) {
    return Status::io_error(
        fmt::format("checkpoint {}: the header failed its CRC-32C check (stored {}, computed {}); "
                    "the file is corrupt",
                    file, hex32(header_crc), hex32(computed_header_crc)));
  }

  std::map<std::string, Entry, std::less<>> entries;
  std::uint64_t file_bytes = 0;
  // The header passed its CRC, but a file can be crafted: parse it with the same bounds as any
  // user JSON (depth, duplicate keys, numbers a double cannot hold), then read it field by field.
  Result<nlohmann::json> parsed = spec::parse_json_text(text, "the header");
  if (!parsed.is_ok()) {
    return Status::invalid_argument(
        fmt::format("checkpoint {}: the header is malformed: {}", file, parsed.status().message()));
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
    reader->meta_.step = *step;
    reader->meta_.fingerprint = header.at("fingerprint").get<std::string>();
    reader->meta_.extra = header.at("extra");
    file_bytes = unsigned_field(header, "file_bytes");
    if (const auto set = header.find("set"); set != header.end()) {
      ShardIdentity identity;
      identity.set_id = set->at("id").get<std::string>();
      const std::uint64_t rank = unsigned_field(*set, "rank");
      const std::uint64_t world = unsigned_field(*set, "world_size");
      if (world < 1 || world > (1u << 20) || rank >= world) {
        throw std::invalid_argument(fmt::format("'set' names rank {} of {}", rank, world));
      }
      identity.rank = static_cast<int>(rank);
      identity.world_size = static_cast<int>(world);
      reader->meta_.shard = std::move(identity);
    }
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
  if (reader->meta_.step < 0) {
    return Status::invalid_argument(
        fmt::format("checkpoint {}: the header records step {}; the file is corrupt", file, reader->meta_.step));
  }
  if (size_bytes < file_bytes) {
    return Status::io_error(
        fmt::format("checkpoint {}: truncated: {} bytes of the {} the header records", file, size_bytes, file_bytes));
  }
  if (size_bytes > file_bytes) {
    return Status::io_error(fmt::format("checkpoint {}: {} bytes, but the header records {}; the file is corrupt", file,
                                        size_bytes, file_bytes));
  }
  reader->file_bytes_ = file_bytes;
  reader->header_crc_ = header_crc;
  reader->header_end_ = kPrefixBytes + header_bytes;
  const std::uint64_t data_start = align_up(kPrefixBytes + header_bytes);
  if (as_written) {
    // The layout is the header's own: every array, in name order.
    for (const auto& [name, entry] : entries) reader->layout_.push_back({name, entry.numel});
  }
  for (const zero::CheckpointArrayInfo& array : reader->layout_) {
    const auto it = entries.find(array.name);
    if (it == entries.end()) {
      return Status::invalid_argument(fmt::format(
          "checkpoint {}: has no array '{}'; it was saved from a different model or configuration", file, array.name));
    }
    if (it->second.numel != array.numel) {
      return Status::invalid_argument(fmt::format(
          "checkpoint {}: array '{}' holds {} elements, but this run's has {}; it was saved from a different model",
          file, array.name, it->second.numel, array.numel));
    }
    const std::uint64_t begin = data_start + it->second.offset;
    if (it->second.offset > file_bytes || begin + array.numel * sizeof(float) > file_bytes) {
      return Status::io_error(
          fmt::format("checkpoint {}: array '{}' lies beyond the end of the file; the file is "
                      "corrupt",
                      file, array.name));
    }
    reader->entries_.push_back(Entry{it->second.numel, begin, it->second.crc});
  }
  reader->progress_.assign(reader->entries_.size(), Progress{});
  if (entries.size() != reader->layout_.size()) {
    for (const auto& named_entry : entries) {
      const std::string& name = named_entry.first;  // not a structured binding: Clang 14 cannot capture one
      const bool wanted = std::any_of(reader->layout_.begin(), reader->layout_.end(),
                                      [&](const zero::CheckpointArrayInfo& a) { return a.name == name; });
      if (!wanted) {
        return Status::invalid_argument(fmt::format(
            "checkpoint {}: holds array {} that this run does not have; it was saved from a different model", file,
            zinf::quoted(name)));
      }
    }
  }
  return reader;
}

CheckpointReader::~CheckpointReader() {
  if (fd_ >= 0) ::close(fd_);
}

Status CheckpointReader::read(std::size_t index, std::size_t offset, std::span<float> into) {
  ZINF_CHECK(index < layout_.size(), "checkpoint read: array index out of range");
  const zero::CheckpointArrayInfo& array = layout_[index];
  const Entry& entry = entries_[index];
  Progress& progress = progress_[index];
  if (offset == 0) progress = Progress{};  // (re)starts the array
  if (offset != progress.next || offset + into.size() > entry.numel) {
    return Status::invalid_argument(
        fmt::format("checkpoint {}: array '{}' of {} elements read at elements [{}, {}) after {}; ranges go back to "
                    "back from element 0",
                    path_.string(), array.name, entry.numel, offset, offset + into.size(), progress.next));
  }
  ZINF_RETURN_IF_ERROR(read_all(fd_, into.data(), into.size_bytes(), entry.offset + offset * sizeof(float), path_,
                                fmt::format("array '{}'", array.name)));
  progress.crc = io::crc32c(std::as_bytes(into), progress.crc);
  progress.next += into.size();
  if (progress.next == entry.numel && progress.crc != entry.crc) {
    return Status::io_error(
        fmt::format("checkpoint {}: array '{}' failed its CRC-32C check (stored {}, computed {}); "
                    "the file is corrupt",
                    path_.string(), array.name, hex32(entry.crc), hex32(progress.crc)));
  }
  return Status::ok();
}

namespace {

std::vector<zero::CheckpointArrayInfo> layout_of(std::span<const NamedArray> arrays) {
  std::vector<zero::CheckpointArrayInfo> layout;
  layout.reserve(arrays.size());
  for (const NamedArray& array : arrays) layout.push_back({array.name, array.values.size()});
  return layout;
}

}  // namespace

Status save_checkpoint(const fs::path& dir, const CheckpointMeta& meta, std::span<const NamedArray> arrays,
                       int keep_last) {
  if (keep_last < 0) {
    return Status::invalid_argument(
        fmt::format("checkpoint.keep_last: {} is negative; expected 0 (keep all) or a count", keep_last));
  }
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointWriter> writer,
                        CheckpointWriter::create(dir, meta, layout_of(arrays)));
  for (std::size_t i = 0; i < arrays.size(); ++i) ZINF_RETURN_IF_ERROR(writer->write(i, arrays[i].values));
  return writer->commit(keep_last).status();
}

Result<CheckpointMeta> load_checkpoint(const fs::path& path, std::span<const NamedArray> into) {
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::open(path, layout_of(into)));
  for (std::size_t i = 0; i < into.size(); ++i) ZINF_RETURN_IF_ERROR(reader->read(i, into[i].values));
  return reader->meta();
}

}  // namespace zinf::train
