// SafetensorsReader: reads the safetensors format (Hugging Face's weight files) — an 8-byte
// little-endian header length N, N bytes of JSON {"<tensor>": {"dtype", "shape", "data_offsets":
// [begin, end]}, "__metadata__": {"<key>": "<text>"}}, then the data section, which the tensors'
// offsets (relative to its start) cover exactly, without gaps or overlaps.
//
// open() validates the whole header before anything is read: the header length against the file
// and a 100 MB bound (the reference implementation's), the JSON syntax, duplicate names, each
// entry's keys, a dtype of F32, BF16 or F16 (the element types zinf stores), non-negative dims,
// shape × itemsize == end - begin, offsets inside the data section, and that the tensors tile the
// data section from byte 0 to its end. Every error is one line naming the file (and the tensor).
//
// Reads go straight from the file with pread() into the caller's buffer (16-bit values through a
// bounded staging buffer and converted to fp32 exactly): the file is never mapped or copied whole.
//
// Not thread-safe (one staging buffer); open one reader per thread. The file must not change
// while it is open (a file shortened under it gives an IoError naming it, never a crash).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"

namespace zinf::train {

// "F32", "BF16", "F16": the safetensors spelling of the element types.
std::string_view safetensors_dtype_name(DType dtype);
// The element type a safetensors dtype names, or nullopt for any other (F64, I64, F8_E4M3 ...).
std::optional<DType> safetensors_dtype_from_name(std::string_view name);

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;  // row-major; [] is a scalar of one element
  std::uint64_t begin = 0;          // byte offsets in the data section: [begin, end)
  std::uint64_t end = 0;

  std::uint64_t numel() const { return (end - begin) / dtype_size_bytes(dtype); }
  // Elements per index of the first dimension (the product of the others; 1 for a scalar or 1-D).
  std::uint64_t row_numel() const;
};

class SafetensorsReader {
 public:
  // Opens and validates `path` (see above). NotFound when it does not exist; InvalidArgument
  // naming the file (and the tensor) for a malformed header; IoError naming the file otherwise.
  static Result<std::unique_ptr<SafetensorsReader>> open(const std::filesystem::path& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Every tensor, in data order (ascending offsets).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // The tensor named `name`, or null.
  const SafetensorsTensor* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Elements [first, first + into.size()) of `tensor` (flat, row-major) converted to fp32 into
  // `into`. `tensor` must be one of tensors(). InvalidArgument for a range past its end; IoError
  // naming the file and tensor when the read fails or comes up short.
  Status read(const SafetensorsTensor& tensor, std::uint64_t first, std::span<float> into);
  // Rows [row_begin, row_begin + rows) of the first dimension: into.size() == rows * row_numel().
  Status read_rows(const SafetensorsTensor& tensor, std::int64_t row_begin, std::int64_t rows, std::span<float> into);

 private:
  SafetensorsReader() = default;
  Status pread_exact(void* into, std::size_t bytes, std::uint64_t offset, const SafetensorsTensor& tensor);

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t data_start_ = 0;  // 8 + header length
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
  std::vector<std::uint16_t> staging_;  // 16-bit values on their way to fp32
};

}  // namespace zinf::train
