// Shape rule: the GPT-like shape chosen for a bare parameter count (--params 1T) has 128-wide heads,
// a width-to-depth ratio near GPT-3's, and an exact count close to the request.
#include "planner/shape_rule.h"

#include <cmath>

#include "libengine/spec/model_shape.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

TEST_CASE("shape_for_params gives 128-wide heads and a count within 2% of the request") {
  for (const double target : {1e9, 175e9, 1e12, 100e12}) {
    INFO("target " << target);
    const Result<spec::ModelShape> shape = shape_for_params(static_cast<std::uint64_t>(target), 50257, 1024);
    REQUIRE(shape.is_ok());
    REQUIRE(spec::validate(*shape).is_ok());
    CHECK(shape->hidden % 128 == 0);
    CHECK(shape->heads == shape->hidden / 128);
    CHECK(shape->kv_heads == shape->heads);
    CHECK(shape->head_dim == 128);
    CHECK(shape->ffn_hidden == 4 * shape->hidden);
    CHECK(shape->vocab == 50257);
    CHECK(shape->max_positions == 1024);
    const double count = static_cast<double>(spec::count_parameters(*shape).total);
    CHECK(std::fabs(count - target) / target <= 0.02);
    const double aspect = static_cast<double>(shape->hidden) / static_cast<double>(shape->layers);
    CHECK(aspect >= 64.0);
    CHECK(aspect <= 256.0);
    CHECK(shape->name.find("gpt-like") == 0);
  }
}

TEST_CASE("shape_for_params tracks the paper's 12*nl*hd^2 for large models") {
  // 1T: layers ~ (1e12 / (12 * 128^2))^(1/3) = 172; 12*nl*hd^2 should be within ~1% of the exact count
  // since embeddings are (50257 + 1024) * hd ~ 1.1B of 1T.
  const spec::ModelShape shape = shape_for_params(1'000'000'000'000ULL, 50257, 1024).value();
  CHECK(shape.layers > 86);  // within the searched +-50% of 172
  CHECK(shape.layers < 258);
  const double estimate =
      12.0 * static_cast<double>(shape.layers) * static_cast<double>(shape.hidden) * static_cast<double>(shape.hidden);
  const double exact = static_cast<double>(spec::count_parameters(shape).total);
  CHECK(estimate / exact == Approx(1.0).epsilon(0.01));
}

TEST_CASE("shape_for_params below the smallest shape is an InvalidArgument naming the params field") {
  // The smallest shape: 1 layer, hidden 128, vocab 50257, seq 1024:
  //   embeddings (50257 + 1024) * 128 = 6,563,968; one block 12 * 128^2 + 13 * 128 = 198,272;
  //   final norm 256 -> 6,762,496.
  const Result<spec::ModelShape> too_small = shape_for_params(1'000'000, 50257, 1024);
  REQUIRE_FALSE(too_small.is_ok());
  CHECK(too_small.status().code() == ErrorCode::kInvalidArgument);
  CHECK(too_small.status().message().find("params: ") == 0);
  CHECK(too_small.status().message().find("give the shape with layers/hidden/heads instead") != std::string::npos);
  CHECK(too_small.status().message().find("6762496") != std::string::npos);

  CHECK(shape_for_params(6'762'495, 50257, 1024).status().code() == ErrorCode::kInvalidArgument);
  const Result<spec::ModelShape> smallest = shape_for_params(6'762'496, 50257, 1024);
  REQUIRE(smallest.is_ok());
  CHECK(smallest->layers == 1);
  CHECK(smallest->hidden == 128);
}

TEST_CASE("shape_for_params with a bad vocabulary fails instead of crashing") {
  const Result<spec::ModelShape> shape = shape_for_params(1'000'000'000, 0, 1024);
  REQUIRE_FALSE(shape.is_ok());
  CHECK(shape.status().code() == ErrorCode::kInvalidArgument);
  CHECK(shape.status().message().find("model.vocab") == 0);
}

}  // namespace
}  // namespace zinf::planner
