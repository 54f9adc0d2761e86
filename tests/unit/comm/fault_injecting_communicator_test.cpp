// FaultInjectingCommunicator over the LocalCommunicator, in one process: calls are counted across
// collectives and host calls; a delay runs the call late but correctly; an error fails that call and
// every later one with the same Status; a disappeared rank's calls succeed without touching data.
// Also: LocalCommunicator's collectives for every dtype, out of place and in place.
#include "libengine/comm/fault_injecting_communicator.h"

#include <array>
#include <cstdint>
#include <vector>

#include "libengine/comm/local_communicator.h"
#include "libengine/device/cpu_device.h"
#include "tests/catch.h"

namespace zinf::comm {
namespace {

struct Setup {
  std::unique_ptr<device::Device> device = device::make_cpu_device({});
  device::Stream& stream() { return device->stream(device::StreamRole::kCollective); }
  FaultInjectingCommunicator wrap(Fault fault) {
    return FaultInjectingCommunicator(std::make_unique<LocalCommunicator>(*device), fault);
  }
};

TEST_CASE("local communicator: every collective for every dtype, out of place and in place") {
  Setup s;
  LocalCommunicator comm(*s.device);
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    CAPTURE(dtype_name(dtype));
    const std::size_t count = 37;
    std::vector<std::uint8_t> send(count * dtype_size_bytes(dtype));
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<std::uint8_t>(i * 7 + 3);
    std::vector<std::uint8_t> out(send.size(), 0);
    comm.all_gather(send.data(), out.data(), count, dtype, s.stream());
    REQUIRE(s.stream().synchronize().is_ok());
    CHECK(out == send);
    std::fill(out.begin(), out.end(), 0);
    comm.reduce_scatter(send.data(), out.data(), count, dtype, s.stream());
    REQUIRE(s.stream().synchronize().is_ok());
    CHECK(out == send);
    std::fill(out.begin(), out.end(), 0);
    comm.all_reduce(send.data(), out.data(), count, dtype, s.stream());
    REQUIRE(s.stream().synchronize().is_ok());
    CHECK(out == send);
    std::vector<std::uint8_t> in_place = send;
    comm.all_gather(in_place.data(), in_place.data(), count, dtype, s.stream());
    comm.reduce_scatter(in_place.data(), in_place.data(), count, dtype, s.stream());
    comm.all_reduce(in_place.data(), in_place.data(), count, dtype, s.stream());
    comm.broadcast(in_place.data(), count, dtype, 0, s.stream());
    REQUIRE(s.stream().synchronize().is_ok());
    CHECK(in_place == send);
  }
}

TEST_CASE("fault injection: no fault forwards every call") {
  Setup s;
  FaultInjectingCommunicator comm = s.wrap({});
  CHECK(comm.backend() == "fault");
  std::array<float, 3> send = {1, 2, 3};
  std::array<float, 3> recv{};
  comm.all_reduce(send.data(), recv.data(), 3, DType::kF32, s.stream());
  REQUIRE(s.stream().synchronize().is_ok());
  CHECK(recv == send);
  CHECK(comm.barrier().is_ok());
  CHECK(comm.calls() == 2);
}

TEST_CASE("fault injection: a delay runs the call late and correctly") {
  Setup s;
  Fault fault;
  fault.kind = Fault::Kind::kDelay;
  fault.at_call = 2;
  fault.delay = std::chrono::milliseconds(20);
  FaultInjectingCommunicator comm = s.wrap(fault);
  std::array<float, 2> send = {4, 5};
  std::array<float, 2> recv{};
  comm.all_gather(send.data(), recv.data(), 2, DType::kF32, s.stream());
  comm.all_reduce(send.data(), recv.data(), 2, DType::kF32, s.stream());
  REQUIRE(s.stream().synchronize().is_ok());
  CHECK(recv == send);
}

TEST_CASE("fault injection: an error fails that call and every later one") {
  Setup s;
  Fault fault;
  fault.kind = Fault::Kind::kError;
  fault.at_call = 2;
  FaultInjectingCommunicator comm = s.wrap(fault);
  std::array<float, 2> send = {4, 5};
  std::array<float, 2> recv{};
  CHECK(comm.barrier().is_ok());
  comm.all_reduce(send.data(), recv.data(), 2, DType::kF32, s.stream());
  const Status first = s.stream().synchronize();
  REQUIRE_FALSE(first.is_ok());
  CHECK(first.message() == "all_reduce #2 on rank 0 of 1: injected error");
  CHECK(recv == std::array<float, 2>{});  // never ran
  CHECK(comm.barrier().message() == first.message());
  std::array<double, 1> host = {1.0};
  CHECK(comm.all_reduce_host(host).message() == first.message());
  comm.broadcast(recv.data(), 2, DType::kF32, 0, s.stream());
  CHECK(s.stream().synchronize().message() == first.message());
}

TEST_CASE("fault injection: a disappeared rank stops participating") {
  Setup s;
  Fault fault;
  fault.kind = Fault::Kind::kDisappear;
  fault.at_call = 1;
  FaultInjectingCommunicator comm = s.wrap(fault);
  std::array<float, 2> send = {4, 5};
  std::array<float, 2> recv{};
  comm.all_gather(send.data(), recv.data(), 2, DType::kF32, s.stream());
  REQUIRE(s.stream().synchronize().is_ok());
  CHECK(recv == std::array<float, 2>{});  // swallowed
  CHECK(comm.barrier().is_ok());
  CHECK(comm.calls() == 2);
}

}  // namespace
}  // namespace zinf::comm
