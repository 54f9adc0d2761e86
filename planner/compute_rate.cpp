#include "planner/compute_rate.h"

#include <fmt/format.h>

namespace zinf::planner {

std::string_view math_mode_name(MathMode mode) {
  switch (mode) {
    case MathMode::kFp32:
      return "fp32";
    case MathMode::kTf32:
      return "tf32";
    case MathMode::kBf16:
      return "bf16";
    case MathMode::kFp16:
      return "fp16";
    case MathMode::kFp8:
      return "fp8";
  }
  return "?";
}

std::optional<MathMode> math_mode_from_name(std::string_view name) {
  for (MathMode mode : kAllMathModes) {
    if (math_mode_name(mode) == name) return mode;
  }
  return std::nullopt;
}

MathMode math_mode_for(DType precision, bool fp32_matmul_tf32) {
  switch (precision) {
    case DType::kBF16:
      return MathMode::kBf16;
    case DType::kF16:
      return MathMode::kFp16;
    case DType::kF32:
      return fp32_matmul_tf32 ? MathMode::kTf32 : MathMode::kFp32;
  }
  return MathMode::kFp32;
}

Result<ComputeRate> compute_rate(const FlopsTable& peak, const FlopsTable& achievable, bool single_rate, MathMode mode,
                                 std::string_view field_prefix) {
  const std::string_view name = math_mode_name(mode);
  if (mode == MathMode::kBf16 && !peak.has(mode) && peak.has(MathMode::kFp16)) {
    // A GPU without bf16 tensor cores (V100) trains half precision in fp16: plan that, and say so.
    ZINF_ASSIGN_OR_RETURN(ComputeRate rate, compute_rate(peak, achievable, single_rate, MathMode::kFp16, field_prefix));
    rate.peak_basis += "; the GPU has no bf16 rate, so half precision is planned at its fp16 rate";
    return rate;
  }
  if (!peak.has(mode)) {
    std::string given;
    for (MathMode m : kAllMathModes) {
      if (peak.has(m)) given += fmt::format("{}{}", given.empty() ? "" : ", ", math_mode_name(m));
    }
    if (single_rate) {
      return Status::invalid_argument(fmt::format(
          "{}.peak_flops: the profile gives one number, read as the bf16/fp16 tensor-core rate, so it has no {} "
          "rate; give peak_flops as a table per math mode, e.g. {{\"{}\": \"67TFLOPS\", \"bf16\": \"989TFLOPS\"}}",
          field_prefix, name, name));
    }
    return Status::invalid_argument(
        fmt::format("{}.peak_flops.{}: missing; a {} plan needs the GPU's {} rate (the "
                    "profile gives {})",
                    field_prefix, name, name, name, given.empty() ? "none" : given));
  }
  ComputeRate rate;
  rate.mode = mode;
  rate.peak_flops = peak[mode];
  const std::string origin = single_rate ? fmt::format("the profile's single {{}} (read as the {} rate)", name)
                                         : fmt::format("the profile's {{}}.{}", name);
  rate.peak_basis = fmt::format(fmt::runtime(origin), "peak_flops");
  if (achievable.has(mode)) {
    rate.achievable_flops = achievable[mode];
    rate.achievable_basis = fmt::format(fmt::runtime(origin), "achievable_flops");
    return rate;
  }
  for (MathMode reference : {MathMode::kBf16, MathMode::kFp16, MathMode::kTf32, MathMode::kFp32, MathMode::kFp8}) {
    if (!peak.has(reference) || !achievable.has(reference)) continue;
    const double fraction = achievable[reference] / peak[reference];
    rate.achievable_flops = rate.peak_flops * fraction;
    rate.achievable_basis =
        fmt::format("estimated: {:.0f}% of the {} peak, the achievable/peak fraction of the profile's {} figures",
                    100.0 * fraction, name, math_mode_name(reference));
    return rate;
  }
  return Status::invalid_argument(
      fmt::format("{}.achievable_flops: no math mode has both a peak and an achievable rate, so the {} rate "
                  "cannot be estimated; give achievable_flops.{}",
                  field_prefix, name, name));
}

}  // namespace zinf::planner
