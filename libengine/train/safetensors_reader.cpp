#include "libengine/train/safetensors_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/convert.h"
#include "libengine/core/errno_text.h"
#include "libengine/core/quote.h"
#include "libengine/spec/json_input.h"

namespace zinf::train {
namespace {

namespace fs = std::filesystem;

// The reference implementation's bound on the JSON header: a larger one is refused before it is
// allocated, so a damaged length field cannot ask for gigabytes.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
// 16-bit values are converted through a staging buffer of at most this many elements (2 MiB).
constexpr std::size_t kStagingElements = std::size_t{1} << 20;
constexpr std::size_t kMaxIoBytes = std::size_t{1} << 30;

// Parses the header, refusing a name given twice in any object (nlohmann keeps the last silently,
// and a file whose meaning depends on which duplicate wins is damaged or hostile).
nlohmann::json parse_header(const std::string& text, const std::string& file) {
  std::vector<std::set<std::string>> keys;  // the names seen in each open object
  const nlohmann::json::parser_callback_t check = [&](int, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second) {
      throw std::invalid_argument(
          fmt::format("safetensors {}: the header names {} twice", file, zinf::quoted(parsed.get<std::string>())));
    }
    return true;
  };
  return nlohmann::json::parse(text, check);
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
  }
  return "?";
}

std::optional<DType> safetensors_dtype_from_name(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  return std::nullopt;
}

std::uint64_t SafetensorsTensor::row_numel() const {
  std::uint64_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= static_cast<std::uint64_t>(shape[i]);
  return n;
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<SafetensorsReader>> SafetensorsReader::open(const fs::path& path) {
  std::unique_ptr<SafetensorsReader> reader(new SafetensorsReader());
  reader->path_ = path;
  const std::string file = path.string();
  const auto bad = [&](std::string why) {
    return Status::invalid_argument(fmt::format("safetensors {}: {}", file, why));
  };
  reader->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader->fd_ < 0) {
    const int error = errno;
    if (error == ENOENT) return Status::not_found(fmt::format("safetensors {}: no such file", file));
    return Status::io_error(fmt::format("safetensors {}: cannot open: {}", file, errno_text(error)));
  }
  struct stat info {};
  if (::fstat(reader->fd_, &info) != 0) {
    return Status::io_error(fmt::format("safetensors {}: cannot stat: {}", file, errno_text(errno)));
  }
  if (!S_ISREG(info.st_mode)) return bad("not a regular file");
  const auto file_bytes = static_cast<std::uint64_t>(info.st_size);
  if (file_bytes < 8) return bad(fmt::format("{} bytes is shorter than the 8-byte header length", file_bytes));
  unsigned char prefix[8];
  SafetensorsTensor none;
  none.name = "(header)";
  ZINF_RETURN_IF_ERROR(reader->pread_exact(prefix, 8, 0, none));
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | prefix[i];
  if (header_bytes > kMaxHeaderBytes) {
    return bad(fmt::format("header length {} exceeds the format's limit of {} bytes", header_bytes, kMaxHeaderBytes));
  }
  if (header_bytes > file_bytes - 8) {
    return bad(
        fmt::format("header length {} runs past the end of the file ({} bytes; truncated?)", header_bytes, file_bytes));
  }
  std::string text(header_bytes, '\0');
  ZINF_RETURN_IF_ERROR(reader->pread_exact(text.data(), text.size(), 8, none));
  if (text.empty() || text.front() != '{') return bad("the header is not a JSON object (it must start with '{')");
  nlohmann::json header;
  try {
    header = parse_header(text, file);
  } catch (const nlohmann::json::parse_error& e) {
    return bad(fmt::format("the header is not valid JSON: {}", e.what()));
  } catch (const std::invalid_argument& e) {
    return Status::invalid_argument(e.what());
  }
  if (!header.is_object()) return bad("the header is not a JSON object");
  reader->data_start_ = 8 + header_bytes;
  const std::uint64_t data_bytes = file_bytes - reader->data_start_;

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return bad("__metadata__ is not an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return bad(fmt::format("__metadata__.{} is not a string", key));
        reader->metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const auto bad_tensor = [&](std::string why) { return bad(fmt::format("tensor {}: {}", zinf::quoted(name), why)); };
    if (!entry.is_object()) return bad_tensor("is not an object {\"dtype\", \"shape\", \"data_offsets\"}");
    for (const auto& [key, value] : entry.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        return bad_tensor(fmt::format("unknown field {} (allowed: dtype, shape, data_offsets)", zinf::quoted(key)));
      }
    }
    SafetensorsTensor tensor;
    tensor.name = name;
    const auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string()) return bad_tensor("dtype is missing or not a string");
    const std::optional<DType> type = safetensors_dtype_from_name(dtype->get<std::string>());
    if (!type) {
      return bad_tensor(
          fmt::format("dtype {} is not supported (allowed: F32, BF16, F16)", zinf::quoted(dtype->get<std::string>())));
    }
    tensor.dtype = *type;
    const auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) return bad_tensor("shape is missing or not an array");
    std::uint64_t bytes = dtype_size_bytes(tensor.dtype);
    for (const nlohmann::json& dim : *shape) {
      const std::optional<std::uint64_t> d = spec::exact_uint64(dim);
      if (!d || *d > static_cast<std::uint64_t>(INT64_MAX)) {
        return bad_tensor(fmt::format("shape {} has a dimension that is not a non-negative integer", shape->dump()));
      }
      if (*d != 0 && bytes > UINT64_MAX / *d) {
        return bad_tensor(fmt::format("shape {} has more bytes than 64 bits count", shape->dump()));
      }
      bytes *= *d;
      tensor.shape.push_back(static_cast<std::int64_t>(*d));
    }
    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
      return bad_tensor("data_offsets is missing or not [begin, end]");
    }
    const std::optional<std::uint64_t> begin = spec::exact_uint64((*offsets)[0]);
    const std::optional<std::uint64_t> end = spec::exact_uint64((*offsets)[1]);
    if (!begin || !end || *begin > *end) {
      return bad_tensor(fmt::format("data_offsets {} is not [begin, end] with 0 <= begin <= end", offsets->dump()));
    }
    tensor.begin = *begin;
    tensor.end = *end;
    if (tensor.end > data_bytes) {
      return bad_tensor(
          fmt::format("data_offsets {} run past the data section ({} bytes; truncated?)", offsets->dump(), data_bytes));
    }
    if (tensor.end - tensor.begin != bytes) {
      return bad_tensor(fmt::format("shape {} of {} needs {} bytes, but data_offsets {} span {}", shape->dump(),
                                    dtype->get<std::string>(), bytes, offsets->dump(), tensor.end - tensor.begin));
    }
    reader->tensors_.push_back(std::move(tensor));
  }
  // The tensors must tile the data section: no overlap (two names for one byte) and no gap (bytes
  // no tensor accounts for), as the format requires.
  std::vector<SafetensorsTensor>& tensors = reader->tensors_;
  std::stable_sort(tensors.begin(), tensors.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsTensor& t = tensors[i];
    if (t.begin < covered) {
      return bad(fmt::format("tensor {} (bytes {}..{}) overlaps tensor {} (which ends at {})", zinf::quoted(t.name),
                             t.begin, t.end, zinf::quoted(tensors[i - 1].name), covered));
    }
    if (t.begin > covered) {
      return bad(fmt::format("bytes {}..{} of the data section belong to no tensor (before tensor {})", covered,
                             t.begin, zinf::quoted(t.name)));
    }
    covered = t.end;
    reader->index_.emplace(t.name, i);
  }
  if (covered != data_bytes) {
    return bad(fmt::format("the data section has {} bytes but its tensors end at byte {}", data_bytes, covered));
  }
  return reader;
}

const SafetensorsTensor* SafetensorsReader::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsReader::pread_exact(void* into, std::size_t bytes, std::uint64_t offset,
                                      const SafetensorsTensor& tensor) {
  auto* at = static_cast<std::byte*>(into);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, at, std::min(bytes, kMaxIoBytes), static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(fmt::format("safetensors {}: cannot read tensor {}: {}", path_.string(),
                                          zinf::quoted(tensor.name), errno_text(errno)));
    }
    if (got == 0) {
      return Status::io_error(fmt::format("safetensors {}: tensor {}: the file ends at byte {} (truncated while open?)",
                                          path_.string(), zinf::quoted(tensor.name), offset));
    }
    at += got;
    offset += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
  return Status::ok();
}

Status SafetensorsReader::read(const SafetensorsTensor& tensor, std::uint64_t first, std::span<float> into) {
  const std::uint64_t numel = tensor.numel();
  if (first > numel || into.size() > numel - first) {
    return Status::invalid_argument(fmt::format("safetensors {}: tensor {}: elements {}..{} asked for, it has {}",
                                                path_.string(), zinf::quoted(tensor.name), first, first + into.size(),
                                                numel));
  }
  const std::size_t item = dtype_size_bytes(tensor.dtype);
  const std::uint64_t at = data_start_ + tensor.begin + first * item;
  // The format is little-endian, as is every machine zinf builds for (x86-64; CUDA hosts).
  if (tensor.dtype == DType::kF32) return pread_exact(into.data(), into.size_bytes(), at, tensor);
  const kernels::HalfFormat format =
      tensor.dtype == DType::kBF16 ? kernels::HalfFormat::kBF16 : kernels::HalfFormat::kF16;
  staging_.resize(std::min(into.size(), kStagingElements));
  for (std::size_t done = 0; done < into.size();) {
    const std::size_t n = std::min(into.size() - done, kStagingElements);
    ZINF_RETURN_IF_ERROR(pread_exact(staging_.data(), n * item, at + done * item, tensor));
    kernels::cpu::half_to_f32(format, staging_.data(), into.data() + done, n);
    done += n;
  }
  return Status::ok();
}

Status SafetensorsReader::read_rows(const SafetensorsTensor& tensor, std::int64_t row_begin, std::int64_t rows,
                                    std::span<float> into) {
  const std::uint64_t row = tensor.row_numel();
  const std::int64_t total = tensor.shape.empty() ? 1 : tensor.shape.front();
  if (row_begin < 0 || rows < 0 || row_begin > total || rows > total - row_begin ||
      into.size() != static_cast<std::uint64_t>(rows) * row) {
    return Status::invalid_argument(
        fmt::format("safetensors {}: tensor {}: rows {}..{} into {} elements asked for, it has {} rows of {}",
                    path_.string(), zinf::quoted(tensor.name), row_begin, row_begin + rows, into.size(), total, row));
  }
  return read(tensor, static_cast<std::uint64_t>(row_begin) * row, into);
}

}  // namespace zinf::train
