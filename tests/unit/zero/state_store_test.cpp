// StateStore's host windows (state_store.h), the checkpoint's way into a store on any tier: in host
// memory the window is the slice itself; on the device and on NVMe it is the caller's staging,
// filled from the tier when asked and written back on close. And stream_by_parameter, the
// checkpoint's stream over three such stores: one piece per parameter in table order, the values
// read on a save and written back on a load. Values are checked against the ones put in, element
// by element; the device tier is the budgeted CPU device's device memory.
#include "libengine/zero/state_store.h"

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "libengine/device/cpu_device.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::zero {
namespace {

model::ParamTable table_of_two() {
  model::ParamTable table;
  table.add(model::ParamInfo{.name = "w", .shape = Shape({7, 5})});
  table.add(model::ParamInfo{.name = "b", .shape = Shape({5})});
  return table;
}

std::vector<float> values_of(model::ParamId id, std::int64_t n, float base) {
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = base + static_cast<float>(id) * 100.0f + static_cast<float>(i);
  return out;
}

std::vector<float> copy_of(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  if (!out.empty()) std::memcpy(out.data(), t.data(), out.size() * sizeof(float));
  return out;
}

std::unique_ptr<NvmeStateStore> open_nvme(const std::string& path) {
  NvmeStateStoreOptions options;
  options.paths = {path};
  options.planned_bytes = 1 << 20;
  options.largest_transfer_bytes = 1 << 16;
  options.on_warning = [](const std::string&) {};
  Result<std::unique_ptr<NvmeStateStore>> store = NvmeStateStore::open(std::move(options));
  REQUIRE(store.is_ok());
  return std::move(store).value();
}

TEST_CASE("state store: host windows read and write back every tier's values") {
  const model::ParamTable table = table_of_two();
  const Partition partition(table, 1, 0);
  auto device = device::make_cpu_device({});
  device::Stream& stream = device->stream(device::StreamRole::kCompute);
  const testing::TempDir dir;
  const std::unique_ptr<NvmeStateStore> nvme = open_nvme(dir.path());

  for (const spec::Tier tier : {spec::Tier::kCpu, spec::Tier::kDevice, spec::Tier::kNvme}) {
    INFO("tier " << tier_word(tier));
    Result<std::unique_ptr<StateStore>> made = make_state_store(tier, DType::kF32, "test", table, partition, *device);
    REQUIRE(made.is_ok());
    StateStore& store = *made.value();
    store.attach(nvme.get());
    CHECK(store.uses_staging() == (tier != spec::Tier::kCpu));
    for (model::ParamId id = 0; id < table.size(); ++id) {
      const std::vector<float> initial = values_of(id, partition[id].owned, 0.5f);
      REQUIRE(store.put(id, initial.data(), stream).is_ok());
    }
    REQUIRE(stream.synchronize().is_ok());

    for (model::ParamId id = 0; id < table.size(); ++id) {
      const std::int64_t n = partition[id].owned;
      REQUIRE(store.slice_bytes(id) == static_cast<std::size_t>(n) * sizeof(float));
      std::vector<std::byte> staging(store.uses_staging() ? store.slice_bytes(id) : 0);
      // Filled: the values put in.
      Result<Tensor> window = store.open_host_window(id, staging, true, stream);
      REQUIRE(window.is_ok());
      REQUIRE(window.value().numel() == n);
      CHECK(copy_of(window.value()) == values_of(id, n, 0.5f));
      if (store.uses_staging()) {
        CHECK(window.value().data() == static_cast<void*>(staging.data()));
      } else {
        CHECK(window.value().data() == store.slice(id).data());  // the slice itself, no copy
      }
      // Written by the caller, closed: the new values are where the store keeps them.
      const std::vector<float> updated = values_of(id, n, -7.25f);
      std::memcpy(window.value().data(), updated.data(), updated.size() * sizeof(float));
      REQUIRE(store.close_host_window(id, window.value(), stream).is_ok());
      std::vector<std::byte> again(staging.size());
      Result<Tensor> reread = store.open_host_window(id, again, true, stream);
      REQUIRE(reread.is_ok());
      CHECK(copy_of(reread.value()) == updated);
    }
  }
}

TEST_CASE("state store: stream_by_parameter visits every parameter once, reads on a save, writes back on a load") {
  const model::ParamTable table = table_of_two();
  const Partition partition(table, 1, 0);
  auto device = device::make_cpu_device({});
  device::Stream& stream = device->stream(device::StreamRole::kCompute);
  for (const spec::Tier tier : {spec::Tier::kCpu, spec::Tier::kDevice}) {
    INFO("tier " << tier_word(tier));
    std::vector<std::unique_ptr<StateStore>> stores;
    for (const char* what : {"master", "m", "v"}) {
      Result<std::unique_ptr<StateStore>> made = make_state_store(tier, DType::kF32, what, table, partition, *device);
      REQUIRE(made.is_ok());
      stores.push_back(std::move(made).value());
    }
    for (std::size_t kind = 0; kind < stores.size(); ++kind) {
      for (model::ParamId id = 0; id < table.size(); ++id) {
        const std::vector<float> initial = values_of(id, partition[id].owned, static_cast<float>(kind) * 1000.0f);
        REQUIRE(stores[kind]->put(id, initial.data(), stream).is_ok());
        REQUIRE(stream.synchronize().is_ok());
      }
    }
    const std::unique_ptr<OptimizerStatesStream> states =
        stream_by_parameter(*stores[0], *stores[1], *stores[2], *device);

    std::vector<model::ParamId> visited;
    REQUIRE(states
                ->stream(false,
                         [&](const OptimizerStatesPiece& piece) -> Status {
                           visited.push_back(piece.id);
                           const std::int64_t n = partition[piece.id].owned;
                           CHECK(piece.offset == 0);
                           CHECK(copy_of(piece.master) == values_of(piece.id, n, 0.0f));
                           CHECK(copy_of(piece.exp_avg) == values_of(piece.id, n, 1000.0f));
                           CHECK(copy_of(piece.exp_avg_sq) == values_of(piece.id, n, 2000.0f));
                           return Status::ok();
                         })
                .is_ok());
    CHECK(visited == std::vector<model::ParamId>{0, 1});

    // A load: every element written by the visitor goes back to the stores.
    REQUIRE(states
                ->stream(true,
                         [&](const OptimizerStatesPiece& piece) -> Status {
                           const std::int64_t n = partition[piece.id].owned;
                           int kind = 0;
                           for (const Tensor* t : {&piece.master, &piece.exp_avg, &piece.exp_avg_sq}) {
                             const std::vector<float> loaded =
                                 values_of(piece.id, n, -1.0f - static_cast<float>(kind++));
                             std::memcpy(t->data(), loaded.data(), loaded.size() * sizeof(float));
                           }
                           return Status::ok();
                         })
                .is_ok());
    for (std::size_t kind = 0; kind < stores.size(); ++kind) {
      for (model::ParamId id = 0; id < table.size(); ++id) {
        const std::int64_t n = partition[id].owned;
        std::vector<std::byte> staging(stores[kind]->uses_staging() ? stores[kind]->slice_bytes(id) : 0);
        Result<Tensor> window = stores[kind]->open_host_window(id, staging, true, stream);
        REQUIRE(window.is_ok());
        CHECK(copy_of(window.value()) == values_of(id, n, -1.0f - static_cast<float>(kind)));
      }
    }
    // An error from the visitor stops the stream with that error.
    int calls = 0;
    const Status stopped = states->stream(false, [&](const OptimizerStatesPiece&) -> Status {
      ++calls;
      return Status::internal("sink full");
    });
    CHECK(stopped.message() == "sink full");
    CHECK(calls == 1);
  }
}

}  // namespace
}  // namespace zinf::zero
