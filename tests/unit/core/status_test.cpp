#include "libengine/core/status.h"

#include "tests/catch.h"

namespace zinf {
namespace {

Result<int> half_of_even(int value) {
  if (value % 2 != 0) return Status::invalid_argument("odd");
  return value / 2;
}

Result<int> quarter_of(int value) {
  ZINF_ASSIGN_OR_RETURN(const int half, half_of_even(value));
  ZINF_ASSIGN_OR_RETURN(const int quarter, half_of_even(half));
  return quarter;
}

TEST_CASE("Status carries code and message, with_context prepends") {
  const Status status = Status::not_found("dgx-9000: no such profile").with_context("--hw");
  CHECK_FALSE(status.is_ok());
  CHECK(status.code() == ErrorCode::kNotFound);
  CHECK(status.message() == "--hw: dgx-9000: no such profile");
  CHECK(Status::ok().with_context("ignored").is_ok());
  CHECK(error_code_name(ErrorCode::kInfeasible) == "infeasible");
}

TEST_CASE("Result propagates through ZINF_ASSIGN_OR_RETURN") {
  const Result<int> ok = quarter_of(12);
  REQUIRE(ok.is_ok());
  CHECK(*ok == 3);
  const Result<int> failed = quarter_of(6);  // 6/2 = 3 is odd
  REQUIRE_FALSE(failed.is_ok());
  CHECK(failed.status().message() == "odd");
}

}  // namespace
}  // namespace zinf
