// Compute rate: which arithmetic a plan's matmuls run in and how fast a GPU does it.
//
// A GPU's FLOP/s depend on the math: an H100 SXM does 67 TFLOP/s of plain fp32, 494.7 of TF32 and
// 989.4 of bf16/fp16 on its tensor cores (dense). A hardware profile therefore carries a peak (and
// optionally an achievable rate) per math mode, and a plan uses the mode its training precision
// implies — fp32 training is planned at the fp32 rate unless the user says its matmuls run in TF32
// (PyTorch has left TF32 matmuls off by default since 1.12; `torch.backends.cuda.matmul.allow_tf32`
// or `torch.set_float32_matmul_precision("high")` turns them on, and DeepSpeed's fp32 mode follows
// PyTorch). Pure functions; no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"

namespace zinf::planner {

enum class MathMode { kFp32, kTf32, kBf16, kFp16, kFp8 };
inline constexpr std::array kAllMathModes{MathMode::kFp32, MathMode::kTf32, MathMode::kBf16, MathMode::kFp16,
                                          MathMode::kFp8};
std::string_view math_mode_name(MathMode mode);  // "fp32", "tf32", "bf16", "fp16", "fp8"
std::optional<MathMode> math_mode_from_name(std::string_view name);

// The math a training precision's matmuls run in: bf16 -> bf16, fp16 -> fp16, fp32 -> fp32, or
// tf32 when `fp32_matmul_tf32` (the user opted in, as PyTorch requires).
MathMode math_mode_for(DType precision, bool fp32_matmul_tf32);

// FLOP/s per math mode; 0 means "not given" (the part lacks the mode, or the profile does not say).
struct FlopsTable {
  std::array<double, kAllMathModes.size()> value{};
  double& operator[](MathMode mode) { return value[static_cast<std::size_t>(mode)]; }
  double operator[](MathMode mode) const { return value[static_cast<std::size_t>(mode)]; }
  bool has(MathMode mode) const { return (*this)[mode] > 0; }
  bool operator==(const FlopsTable&) const = default;
};

// The rate a plan computes at, and where each figure comes from (printed with the plan).
struct ComputeRate {
  MathMode mode = MathMode::kBf16;
  double peak_flops = 0;         // the MFU denominator
  double achievable_flops = 0;   // what compute time is charged at
  std::string peak_basis;        // "the profile's peak_flops.fp32"
  std::string achievable_basis;  // "the profile's achievable_flops.fp32" or how it was estimated
};

// The rate for `mode` from a GPU's tables. `single_rate`: the profile gave one peak_flops and one
// achievable_flops number (the format before per-mode tables), read as the bf16/fp16 tensor rate.
// An achievable figure the profile lacks is estimated as the mode's peak times the achievable/peak
// fraction of the first mode (bf16, fp16, tf32, fp32, fp8) that has both, and the basis says so.
// bf16 on a GPU with an fp16 rate but no bf16 one (V100: no bf16 tensor cores) is planned at the
// fp16 rate (mode kFp16 in the result, the basis says why): half precision runs in fp16 there.
// InvalidArgument naming `field_prefix` + ".peak_flops.<mode>" when the profile has no peak for `mode`.
Result<ComputeRate> compute_rate(const FlopsTable& peak, const FlopsTable& achievable, bool single_rate, MathMode mode,
                                 std::string_view field_prefix = "hw.node.gpu");

}  // namespace zinf::planner
