#include "libengine/spec/training_spec.h"

#include "tests/catch.h"

namespace zinf::spec {
namespace {

TEST_CASE("state accounting: the paper's 20 bytes, ZeRO's 16, fp32's 16") {
  const StateBytesPerParam paper = state_bytes_per_param(StateAccounting::kPaper);
  CHECK(paper.total() == 20.0);
  CHECK(paper.params + paper.grads == 4.0);
  CHECK(paper.optimizer() == 16.0);
  const StateBytesPerParam zero = state_bytes_per_param(StateAccounting::kZero);
  CHECK(zero.total() == 16.0);
  CHECK(zero.optimizer() == 12.0);
  const StateBytesPerParam fp32 = state_bytes_per_param(StateAccounting::kFp32);
  CHECK(fp32.total() == 16.0);
  CHECK(fp32.params == 4.0);
  CHECK(fp32.optimizer() == 8.0);
}

TEST_CASE("training validation") {
  TrainingSpec training;
  CHECK(validate(training).is_ok());
  training.micro_batch = 0;
  CHECK(validate(training).message() == "training.micro_batch: 0 is not a positive integer");
  training = {};
  training.precision = DType::kF32;
  CHECK(validate(training).message().find("training.accounting: 'paper' does not match precision fp32") == 0);
  training.accounting = StateAccounting::kFp32;
  CHECK(validate(training).is_ok());
  CHECK(accounting_from_name("zero") == StateAccounting::kZero);
  CHECK_FALSE(accounting_from_name("twenty").has_value());
}

}  // namespace
}  // namespace zinf::spec
