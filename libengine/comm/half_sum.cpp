// half_sum_in_place (half_sum.h): blocks of 512 so the conversions run vectorised.
#include "libengine/comm/half_sum.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "kernels/convert.h"
#include "libengine/core/check.h"

namespace zinf::comm {

void half_sum_in_place(DType dtype, const void* in, void* inout, std::size_t n) {
  ZINF_CHECK(dtype != DType::kF32, "half_sum_in_place: fp32 sums natively");
  const kernels::HalfFormat format = dtype == DType::kBF16 ? kernels::HalfFormat::kBF16 : kernels::HalfFormat::kF16;
  constexpr std::size_t kBlock = 512;
  std::array<float, kBlock> a{};
  std::array<float, kBlock> b{};
  const auto* src = static_cast<const std::uint16_t*>(in);
  auto* dst = static_cast<std::uint16_t*>(inout);
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t count = std::min(kBlock, n - begin);
    kernels::cpu::half_to_f32(format, src + begin, a.data(), count);
    kernels::cpu::half_to_f32(format, dst + begin, b.data(), count);
    for (std::size_t i = 0; i < count; ++i) b[i] += a[i];
    kernels::cpu::f32_to_half(format, b.data(), dst + begin, count);
  }
}

}  // namespace zinf::comm
