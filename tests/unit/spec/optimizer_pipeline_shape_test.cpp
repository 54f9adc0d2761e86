// shape_optimizer_pipeline: the sub-groups, split pieces and host buffers the engine and the planner
// share, against layouts worked out by hand from the rules in the header.
#include "libengine/spec/optimizer_pipeline_shape.h"

#include <vector>

#include "tests/catch.h"

namespace zinf::spec {
namespace {

bool same(const SubGroupRange& a, const SubGroupRange& b) {
  return a.first == b.first && a.last == b.last && a.flat_begin == b.flat_begin && a.flat_end == b.flat_end;
}

TEST_CASE("optimizer pipeline shape: a parameter larger than a sub-group is split into aligned pieces") {
  const std::vector<std::int64_t> slices = {96, 5024, 64};
  OptimizerPipelineInput input{slices, Tier::kNvme, 0};
  input.sub_group_size = 1024;
  const OptimizerPipelineShape shape = shape_optimizer_pipeline(input);
  REQUIRE(shape.fits());
  // 5024 elements in ceil(5024 / 1024) = 5 pieces of round_up(ceil(5024 / 5) = 1005, 32) = 1024.
  const std::vector<SubGroupRange> expected = {{0, 0, 0, 96},      {1, 1, 96, 1120},   {1, 1, 1120, 2144},
                                               {1, 1, 2144, 3168}, {1, 1, 3168, 4192}, {1, 1, 4192, 5120},
                                               {2, 2, 5120, 5184}};
  REQUIRE(shape.groups.size() == expected.size());
  for (std::size_t g = 0; g < expected.size(); ++g) {
    INFO("sub-group " << g);
    CHECK(same(shape.groups[g], expected[g]));
  }
  CHECK(shape.widest == 1024);
  CHECK(shape.buffers == 3);  // no budget: three
  CHECK(shape.split_out_elements == 5024);
  CHECK(shape.split_out_bytes == 5024 * 4);
  CHECK(shape.host_bytes == 3 * 1024 * 12 + 5024 * 4);  // fp32: the split parameter's new master values
}

TEST_CASE("optimizer pipeline shape: whole parameters pack up to the target, the budget adds buffers") {
  // 8 parameters of 2 Mi elements: an eighth of them is 2 Mi, so every parameter is one sub-group.
  const std::vector<std::int64_t> slices(8, std::int64_t{2} << 20);
  OptimizerPipelineInput input{slices, Tier::kNvme, 2};  // bf16: 14 bytes per element in a buffer
  input.budgeted = true;
  const std::uint64_t buffer = 14ull * (2 << 20);
  // Three buffers, then as many more as the rest of the budget holds: 5.5 buffers' worth gives 3 + 2.
  input.host_left_bytes = 5 * buffer + buffer / 2;
  OptimizerPipelineShape shape = shape_optimizer_pipeline(input);
  REQUIRE(shape.fits());
  CHECK(shape.groups.size() == 8);
  CHECK(shape.widest == (2 << 20));
  CHECK(shape.split_out_elements == 0);
  CHECK(shape.buffers == 5);
  CHECK(shape.host_bytes == 5 * buffer);
  // Plenty: one buffer per sub-group, never more.
  input.host_left_bytes = 100 * buffer;
  CHECK(shape_optimizer_pipeline(input).buffers == 8);
  // A budget below three buffers halves the sub-groups: pieces of 1 Mi, plus a whole parameter's new values.
  input.host_left_bytes = 2 * buffer;
  shape = shape_optimizer_pipeline(input);
  REQUIRE(shape.fits());
  CHECK(shape.widest == (1 << 20));
  CHECK(shape.groups.size() == 16);
  CHECK(shape.split_out_elements == (2 << 20));
  // Below three of the smallest pieces (1 Mi elements) and the split buffer: refused, with the need.
  input.host_left_bytes = 1000;
  shape = shape_optimizer_pipeline(input);
  CHECK_FALSE(shape.fits());
  CHECK(shape.smallest == (1 << 20));
  CHECK(shape.needed_bytes == 3ull * 14 * (1 << 20) + 2ull * (2 << 20));
}

TEST_CASE("optimizer pipeline shape: on the CPU tier the sub-groups only pace the step, no buffers") {
  const std::vector<std::int64_t> slices = {64, 64, 64, 64, 64, 64, 64, 64, 64, 64};
  const OptimizerPipelineShape shape = shape_optimizer_pipeline({slices, Tier::kCpu, 2});
  // An eighth of 640 is 80 (the smallest sub-group, the largest parameter, is 64): one per parameter.
  CHECK(shape.groups.size() == 10);
  CHECK(shape.buffers == 0);
  CHECK(shape.host_bytes == 0);
}

}  // namespace
}  // namespace zinf::spec
