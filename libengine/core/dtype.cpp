#include "libengine/core/dtype.h"

namespace zinf {

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "fp32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "fp16" || name == "float16" || name == "half") return DType::kF16;
  return std::nullopt;
}

}  // namespace zinf
