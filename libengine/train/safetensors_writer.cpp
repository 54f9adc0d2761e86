#include "libengine/train/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/convert.h"
#include "libengine/core/errno_text.h"
#include "libengine/core/quote.h"
#include "libengine/train/checkpoint.h"
#include "libengine/train/safetensors_reader.h"

namespace zinf::train {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kStagingElements = std::size_t{1} << 20;
constexpr std::size_t kMaxIoBytes = std::size_t{1} << 30;

Status os_error(std::string_view action, const fs::path& path, int error_number) {
  return Status::io_error(
      fmt::format("safetensors: cannot {} {}: {}", action, path.string(), errno_text(error_number)));
}

Status fsync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return os_error("open directory", dir, errno);
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  return result == 0 ? Status::ok() : os_error("fsync directory", dir, error);
}

Status make_directory(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return Status::ok();
  fs::create_directories(dir, ec);
  if (ec) return os_error("create directory", dir, ec.value());
  return Status::ok();
}

}  // namespace

std::uint64_t SafetensorsEntry::numel() const {
  std::uint64_t n = 1;
  for (const std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

std::string safetensors_shard_name(std::size_t index, std::size_t count) {
  if (count == 1) return "model.safetensors";
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_path_.empty()) (void)::unlink(tmp_path_.c_str());
}

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(
    const fs::path& path, std::vector<SafetensorsEntry> entries, const std::map<std::string, std::string>& metadata) {
  // Declaration order in the header too (nlohmann's default json would sort the names).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string_view> names;
  std::uint64_t offset = 0;
  for (const SafetensorsEntry& entry : entries) {
    const auto bad = [&](std::string why) {
      return Status::invalid_argument(
          fmt::format("safetensors {}: tensor {}: {}", path.string(), zinf::quoted(entry.name), why));
    };
    if (entry.name.empty() || entry.name == "__metadata__") return bad("is not a tensor name");
    if (!names.insert(entry.name).second) return bad("is declared twice");
    if (std::any_of(entry.shape.begin(), entry.shape.end(), [](std::int64_t d) { return d < 0; })) {
      return bad("has a negative dimension");
    }
    header[entry.name] = {{"dtype", safetensors_dtype_name(entry.dtype)},
                          {"shape", entry.shape},
                          {"data_offsets", {offset, offset + entry.bytes()}}};
    offset += entry.bytes();
  }
  std::string text = header.dump();
  // Pad with spaces (JSON whitespace) so the data starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::unique_ptr<SafetensorsWriter> writer(new SafetensorsWriter());
  writer->path_ = path;
  writer->tmp_path_ = path;
  writer->tmp_path_ += ".tmp";
  writer->entries_ = std::move(entries);
  writer->fd_ = ::open(writer->tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (writer->fd_ < 0) {
    const int error = errno;
    writer->tmp_path_.clear();  // not ours to remove
    return os_error("create", path.string() + ".tmp", error);
  }
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  ZINF_RETURN_IF_ERROR(writer->write_bytes(length, 8));
  ZINF_RETURN_IF_ERROR(writer->write_bytes(text.data(), text.size()));
  return writer;
}

Status SafetensorsWriter::write_bytes(const void* data, std::size_t bytes) {
  const auto* at = static_cast<const std::byte*>(data);
  while (bytes > 0) {
    const ssize_t written = ::pwrite(fd_, at, std::min(bytes, kMaxIoBytes), static_cast<off_t>(offset_));
    if (written < 0) {
      if (errno == EINTR) continue;
      return os_error("write", tmp_path_, errno);
    }
    at += written;
    offset_ += static_cast<std::uint64_t>(written);
    bytes -= static_cast<std::size_t>(written);
  }
  return Status::ok();
}

std::string_view SafetensorsWriter::next_tensor() const {
  std::size_t i = current_;
  std::uint64_t done = current_done_;
  while (i < entries_.size() && done == entries_[i].numel()) {
    ++i;
    done = 0;
  }
  return i < entries_.size() ? std::string_view(entries_[i].name) : std::string_view();
}

Status SafetensorsWriter::append(std::span<const float> values) {
  while (!values.empty()) {
    while (current_ < entries_.size() && current_done_ == entries_[current_].numel()) {
      ++current_;
      current_done_ = 0;
    }
    if (current_ == entries_.size()) {
      return Status::invalid_argument(
          fmt::format("safetensors {}: {} values past the last tensor's end", path_.string(), values.size()));
    }
    const SafetensorsEntry& entry = entries_[current_];
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(values.size(), entry.numel() - current_done_));
    if (entry.dtype == DType::kF32) {
      ZINF_RETURN_IF_ERROR(write_bytes(values.data(), n * sizeof(float)));
    } else {
      const kernels::HalfFormat format =
          entry.dtype == DType::kBF16 ? kernels::HalfFormat::kBF16 : kernels::HalfFormat::kF16;
      staging_.resize(std::min(n, kStagingElements));
      for (std::size_t done = 0; done < n;) {
        const std::size_t piece = std::min(n - done, kStagingElements);
        kernels::cpu::f32_to_half(format, values.data() + done, staging_.data(), piece);
        ZINF_RETURN_IF_ERROR(write_bytes(staging_.data(), piece * sizeof(std::uint16_t)));
        done += piece;
      }
    }
    current_done_ += n;
    values = values.subspan(n);
  }
  return Status::ok();
}

Status SafetensorsWriter::commit() {
  const std::string_view missing = next_tensor();
  if (!missing.empty()) {
    return Status::invalid_argument(
        fmt::format("safetensors {}: tensor {} is incomplete at commit", path_.string(), zinf::quoted(missing)));
  }
  if (::fsync(fd_) != 0) return os_error("fsync", tmp_path_, errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) return os_error("close", tmp_path_, errno);
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return os_error(fmt::format("rename {} to", tmp_path_.string()), path_, errno);
  }
  committed_ = true;
  return fsync_directory(path_.has_parent_path() ? path_.parent_path() : fs::path("."));
}

Result<std::unique_ptr<ShardedSafetensorsWriter>> ShardedSafetensorsWriter::create(
    const fs::path& dir, std::vector<SafetensorsEntry> entries, std::uint64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata) {
  if (max_shard_bytes == 0) {
    return Status::invalid_argument("safetensors: the maximum shard size must be at least 1 byte");
  }
  ZINF_RETURN_IF_ERROR(make_directory(dir));
  std::unique_ptr<ShardedSafetensorsWriter> writer(new ShardedSafetensorsWriter());
  writer->dir_ = dir;
  writer->metadata_ = metadata;
  std::uint64_t bytes = 0;
  for (const SafetensorsEntry& entry : entries) {
    if (writer->shards_.empty() || (bytes > 0 && bytes + entry.bytes() > max_shard_bytes)) {
      writer->shards_.emplace_back();
      bytes = 0;
    }
    writer->shards_.back().push_back(entry);
    bytes += entry.bytes();
  }
  if (writer->shards_.empty()) writer->shards_.emplace_back();
  for (std::size_t i = 0; i < writer->shards_.size(); ++i) {
    writer->shard_names_.push_back(safetensors_shard_name(i, writer->shards_.size()));
  }
  writer->entries_ = std::move(entries);
  ZINF_RETURN_IF_ERROR(writer->open_shard(0));
  return writer;
}

Status ShardedSafetensorsWriter::open_shard(std::size_t shard) {
  current_shard_ = shard;
  current_left_ = 0;
  for (const SafetensorsEntry& entry : shards_[shard]) current_left_ += entry.numel();
  ZINF_ASSIGN_OR_RETURN(writer_, SafetensorsWriter::create(dir_ / shard_names_[shard], shards_[shard], metadata_));
  return Status::ok();
}

Status ShardedSafetensorsWriter::append(std::span<const float> values) {
  while (!values.empty()) {
    while (current_left_ == 0 && current_shard_ + 1 < shards_.size()) {
      ZINF_RETURN_IF_ERROR(writer_->commit());
      written_.push_back(dir_ / shard_names_[current_shard_]);
      ZINF_RETURN_IF_ERROR(open_shard(current_shard_ + 1));
    }
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(values.size(), current_left_));
    // n == 0 only past the last tensor: the writer refuses the values with its message.
    ZINF_RETURN_IF_ERROR(writer_->append(values.subspan(0, n == 0 ? values.size() : n)));
    current_left_ -= n;
    values = values.subspan(n);
  }
  return Status::ok();
}

Result<std::vector<fs::path>> ShardedSafetensorsWriter::commit() {
  while (current_left_ == 0 && current_shard_ + 1 < shards_.size()) {
    ZINF_RETURN_IF_ERROR(writer_->commit());
    written_.push_back(dir_ / shard_names_[current_shard_]);
    ZINF_RETURN_IF_ERROR(open_shard(current_shard_ + 1));
  }
  if (current_shard_ + 1 < shards_.size()) {
    return Status::invalid_argument(fmt::format("safetensors {}: tensor {} is incomplete at commit",
                                                (dir_ / shard_names_[current_shard_]).string(),
                                                zinf::quoted(writer_->next_tensor())));
  }
  ZINF_RETURN_IF_ERROR(writer_->commit());
  written_.push_back(dir_ / shard_names_[current_shard_]);
  if (shards_.size() > 1) {
    std::uint64_t total = 0;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      for (const SafetensorsEntry& entry : shards_[s]) {
        total += entry.bytes();
        weight_map[entry.name] = shard_names_[s];
      }
    }
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    const fs::path path = dir_ / std::string(kSafetensorsIndexName);
    ZINF_RETURN_IF_ERROR(write_file_durably(path, index.dump(2) + "\n"));
    written_.push_back(path);
  }
  return written_;
}

}  // namespace zinf::train
