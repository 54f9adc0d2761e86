// Partition: every parameter cut into world_size equal, 32-element-aligned slices; the ranks'
// owned ranges tile the parameter exactly, and each rank's flat array packs its slices back to back.
#include "libengine/zero/partition.h"

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "tests/catch.h"

namespace zinf::zero {
namespace {

model::ParamTable make_table() {
  model::ParamTable table;
  for (const std::int64_t n :
       {std::int64_t{1}, std::int64_t{31}, std::int64_t{32}, std::int64_t{1000}, std::int64_t{4097}}) {
    table.add(model::ParamInfo{.name = fmt::format("p{}", n), .shape = Shape({n})});
  }
  return table;
}

TEST_CASE("partition: one rank owns every parameter whole, padded to 32 elements") {
  const model::ParamTable table = make_table();
  const Partition partition(table, 1, 0);
  std::int64_t offset = 0;
  for (model::ParamId id = 0; id < table.size(); ++id) {
    const ParamSlice& slice = partition[id];
    CHECK(slice.begin == 0);
    CHECK(slice.owned == table[id].numel);
    CHECK(slice.slice_numel % kSliceAlignElements == 0);
    CHECK(slice.slice_numel >= slice.owned);
    CHECK(slice.slice_numel - slice.owned < kSliceAlignElements);
    CHECK(slice.flat_offset == offset);
    offset += slice.slice_numel;
  }
  CHECK(partition.flat_numel() == offset);
}

TEST_CASE("partition: N ranks own equal aligned slices that tile each parameter exactly") {
  const model::ParamTable table = make_table();
  for (const int world : {2, 3, 8}) {
    std::vector<std::int64_t> covered(static_cast<std::size_t>(table.size()), 0);
    std::int64_t flat = -1;
    for (int rank = 0; rank < world; ++rank) {
      const Partition partition(table, world, rank);
      if (flat < 0) flat = partition.flat_numel();
      CHECK(partition.flat_numel() == flat);  // every rank's flat arrays have the same size
      for (model::ParamId id = 0; id < table.size(); ++id) {
        const ParamSlice& slice = partition[id];
        INFO("world " << world << " rank " << rank << " param " << table[id].numel);
        CHECK(slice.slice_numel * world >= table[id].numel);
        CHECK(slice.slice_numel % kSliceAlignElements == 0);
        CHECK(slice.begin == std::min<std::int64_t>(table[id].numel, rank * slice.slice_numel));  // in rank order
        CHECK(slice.owned >= 0);
        CHECK(slice.owned <= slice.slice_numel);
        CHECK(slice.begin == covered[static_cast<std::size_t>(id)]);  // no gap, no overlap
        covered[static_cast<std::size_t>(id)] += slice.owned;
      }
    }
    for (model::ParamId id = 0; id < table.size(); ++id)
      CHECK(covered[static_cast<std::size_t>(id)] == table[id].numel);
  }
}

}  // namespace
}  // namespace zinf::zero
