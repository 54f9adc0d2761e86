#include "libengine/spec/training_spec.h"

#include <fmt/format.h>

namespace zinf::spec {

std::string_view accounting_name(StateAccounting accounting) {
  switch (accounting) {
    case StateAccounting::kPaper:
      return "paper";
    case StateAccounting::kZero:
      return "zero";
    case StateAccounting::kFp32:
      return "fp32";
  }
  return "?";
}

std::optional<StateAccounting> accounting_from_name(std::string_view name) {
  if (name == "paper") return StateAccounting::kPaper;
  if (name == "zero") return StateAccounting::kZero;
  if (name == "fp32") return StateAccounting::kFp32;
  return std::nullopt;
}

StateBytesPerParam state_bytes_per_param(StateAccounting accounting) {
  switch (accounting) {
    case StateAccounting::kPaper:
      return {.params = 2, .grads = 2, .master_params = 4, .fp32_grads = 4, .momentum = 4, .variance = 4};
    case StateAccounting::kZero:
      return {.params = 2, .grads = 2, .master_params = 4, .fp32_grads = 0, .momentum = 4, .variance = 4};
    case StateAccounting::kFp32:
      return {.params = 4, .grads = 4, .master_params = 0, .fp32_grads = 0, .momentum = 4, .variance = 4};
  }
  return {};
}

Status validate(const TrainingSpec& training) {
  for (auto [field, value] :
       {std::pair{"seq", training.seq}, std::pair{"micro_batch", training.micro_batch},
        std::pair{"ckpt_interval", training.ckpt_interval}, std::pair{"tiling", training.tiling}}) {
    if (value <= 0)
      return Status::invalid_argument(fmt::format("training.{}: {} is not a positive integer", field, value));
  }
  return check_accounting(training, "training.accounting", "precision");
}

Status check_accounting(const TrainingSpec& training, std::string_view accounting_field,
                        std::string_view precision_field) {
  const bool fp32 = training.precision == DType::kF32;
  const bool fp32_accounting = training.accounting == StateAccounting::kFp32;
  if (fp32 != fp32_accounting) {
    return Status::invalid_argument(fmt::format(
        "{}: '{}' does not match {} {}; use 'fp32' with fp32 and 'paper' or 'zero' with bf16/fp16", accounting_field,
        accounting_name(training.accounting), precision_field, dtype_name(training.precision)));
  }
  return Status::ok();
}

}  // namespace zinf::spec
