// DType: the element types zinf stores (fp32, bf16, fp16) and their sizes. Arithmetic always
// accumulates in fp32; bf16/fp16 are storage formats.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace zinf {

enum class DType { kF32, kBF16, kF16 };

constexpr std::size_t dtype_size_bytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "fp32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
  }
  return "?";
}

// "fp32"/"float32", "bf16"/"bfloat16", "fp16"/"float16"/"half"; nullopt for anything else.
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace zinf
