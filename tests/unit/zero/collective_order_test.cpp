// CollectiveOrder (zero/collective_order.h): the communicator the partitioned engine's parts issue
// their collectives through forwards each one unchanged, counts it, and folds its kind, size and
// program-order position into a signature — equal for the same collectives at the same positions,
// different when one moves by a single event (what ranks that break the collective-order rule show).
#include <vector>

#include "libengine/comm/local_communicator.h"
#include "libengine/device/cpu_device.h"
#include "libengine/zero/collective_order.h"
#include "tests/catch.h"

namespace zinf::zero {
namespace {

TEST_CASE("collective order: forwards, counts and signs each collective by its program-order position") {
  auto device = device::make_cpu_device({});
  comm::LocalCommunicator local(*device);
  device::Stream& stream = device->stream(device::StreamRole::kCollective);

  // Three events, then an all-gather of 4 floats; at one rank it copies send into recv.
  const auto run = [&](int events_before_gather) {
    CollectiveOrder order(local);
    std::vector<float> send = {1, 2, 3, 4};
    std::vector<float> recv(4, 0.0f);
    for (int e = 0; e < 3; ++e) {
      if (e == events_before_gather) order.all_gather(send.data(), recv.data(), 4, DType::kF32, stream);
      order.note_event();
    }
    REQUIRE(stream.synchronize().is_ok());
    CHECK(recv == send);
    std::vector<double> host = {2.5};
    REQUIRE(order.all_reduce_host(host).is_ok());
    CHECK(host[0] == 2.5);
    CHECK(order.collectives() == 2);
    CHECK(order.events() == 3);
    CHECK(order.world_size() == 1);
    CHECK(order.rank() == 0);
    return order.signature();
  };
  const std::uint64_t at_one = run(1);
  CHECK(run(1) == at_one);  // a function of the program order only
  CHECK(run(2) != at_one);  // the same collective one event later signs differently
  CHECK(run(0) != at_one);
}

TEST_CASE("collective order: records each collective's kind, count and position until told to stop") {
  auto device = device::make_cpu_device({});
  comm::LocalCommunicator local(*device);
  device::Stream& stream = device->stream(device::StreamRole::kCollective);
  CollectiveOrder order(local);
  std::vector<float> send = {1, 2, 3, 4};
  std::vector<float> recv(4, 0.0f);
  order.note_event();
  order.all_gather(send.data(), recv.data(), 4, DType::kF32, stream);
  order.note_event();
  order.note_event();
  std::vector<double> host = {1.0, 2.0, 3.0};
  REQUIRE(order.all_reduce_host(host).is_ok());
  REQUIRE(stream.synchronize().is_ok());
  // all_gather is kind 1 and all_reduce_host kind 6 (CollectiveOrder::Kind).
  const std::vector<CollectiveOrder::Record>& records = order.records();
  REQUIRE(records.size() == 2);
  CHECK((records[0].kind == 1 && records[0].count == 4 && records[0].events == 1));
  CHECK((records[1].kind == 6 && records[1].count == 3 && records[1].events == 3));
  CHECK(CollectiveOrder::kind_name(records[0].kind) == "all_gather");
  CHECK(CollectiveOrder::kind_name(records[1].kind) == "all_reduce_host");
  CHECK(CollectiveOrder::kind_name(7) == "collective kind 7");

  // Stopped: nothing kept, the signature and the count still follow every collective.
  order.stop_recording();
  CHECK(order.records().empty());
  const std::uint64_t before = order.signature();
  REQUIRE(order.barrier().is_ok());
  CHECK(order.records().empty());
  CHECK(order.signature() != before);
  CHECK(order.collectives() == 3);
}

TEST_CASE("collective order: a LocalOnly scope nests and closes") {
  auto device = device::make_cpu_device({});
  comm::LocalCommunicator local(*device);
  CollectiveOrder order(local);
  CHECK_FALSE(order.local_only());
  {
    const CollectiveOrder::LocalOnly outer(&order);
    {
      const CollectiveOrder::LocalOnly inner(&order);
      CHECK(order.local_only());
    }
    CHECK(order.local_only());
    const CollectiveOrder::LocalOnly none(nullptr);  // one rank without a communicator: no check
  }
  CHECK_FALSE(order.local_only());
  std::vector<double> host = {1.0};
  REQUIRE(order.all_reduce_host(host).is_ok());  // allowed again outside every scope
}

}  // namespace
}  // namespace zinf::zero
