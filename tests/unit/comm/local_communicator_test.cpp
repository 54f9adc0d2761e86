// LocalCommunicator: every collective of a world of one is the identity on this rank's data, in
// place or into a separate buffer, in stream order.
#include "libengine/comm/local_communicator.h"

#include <array>
#include <vector>

#include "libengine/device/cpu_device.h"
#include "tests/catch.h"

namespace zinf::comm {
namespace {

TEST_CASE("local communicator: a world of one, every collective the identity") {
  auto device = device::make_cpu_device({});
  LocalCommunicator comm(*device);
  CHECK(comm.backend() == "local");
  CHECK(comm.rank() == 0);
  CHECK(comm.world_size() == 1);
  CHECK(comm.local_rank() == 0);
  CHECK(comm.local_size() == 1);
  device::Stream& stream = device->stream(device::StreamRole::kCollective);

  const std::vector<float> send = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  std::vector<float> gathered(send.size(), 0.0f);
  std::vector<float> scattered(send.size(), 0.0f);
  std::vector<float> reduced(send.size(), 0.0f);
  comm.all_gather(send.data(), gathered.data(), send.size(), DType::kF32, stream);
  comm.reduce_scatter(send.data(), scattered.data(), send.size(), DType::kF32, stream);
  comm.all_reduce(send.data(), reduced.data(), send.size(), DType::kF32, stream);
  REQUIRE(stream.synchronize().is_ok());
  CHECK(gathered == send);
  CHECK(scattered == send);
  CHECK(reduced == send);

  // In place: nothing moves.
  std::vector<float> in_place = send;
  comm.all_reduce(in_place.data(), in_place.data(), in_place.size(), DType::kF32, stream);
  comm.broadcast(in_place.data(), in_place.size(), DType::kF32, 0, stream);
  REQUIRE(stream.synchronize().is_ok());
  CHECK(in_place == send);

  // Half types move as bytes.
  const std::array<std::uint16_t, 3> half = {0x3f80, 0xc000, 0x0001};
  std::array<std::uint16_t, 3> half_out{};
  comm.all_gather(half.data(), half_out.data(), half.size(), DType::kBF16, stream);
  REQUIRE(stream.synchronize().is_ok());
  CHECK(half_out == half);

  std::array<double, 2> host = {0.1, -3.0};
  REQUIRE(comm.all_reduce_host(host).is_ok());
  CHECK(host[0] == 0.1);
  CHECK(host[1] == -3.0);
  CHECK(comm.barrier().is_ok());
}

}  // namespace
}  // namespace zinf::comm
