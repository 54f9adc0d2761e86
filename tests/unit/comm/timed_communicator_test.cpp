// TimedCommunicator and the device's collective-wait counter, in one process: a collective delayed
// by the fault-injecting communicator keeps the collective stream busy for at least the delay, and
// a compute thread that waits for it (an event the collective stream recorded, or the stream's
// synchronize()) is counted as waiting for at least the delay less the time it took to start
// waiting — lower bounds from the injected delay, never from the machine's speed. Host calls count
// as busy and waited; calls and bytes are counted per call.
#include "libengine/comm/timed_communicator.h"

#include <array>
#include <chrono>
#include <thread>
#include <vector>

#include "libengine/comm/fault_injecting_communicator.h"
#include "libengine/comm/local_communicator.h"
#include "libengine/device/cpu_device.h"
#include "tests/catch.h"

namespace zinf::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDelay = std::chrono::milliseconds(150);

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Setup {
  std::unique_ptr<device::Device> device = device::make_cpu_device({});
  device::Stream& collective() { return device->stream(device::StreamRole::kCollective); }
  device::Stream& compute() { return device->stream(device::StreamRole::kCompute); }
  TimedCommunicator timed(Fault fault) {
    return TimedCommunicator(
        std::make_unique<FaultInjectingCommunicator>(std::make_unique<LocalCommunicator>(*device), fault));
  }
};

TEST_CASE("timed communicator: nothing issued, nothing measured") {
  Setup s;
  TimedCommunicator comm = s.timed({});
  CHECK(comm.world_size() == 1);
  const CommTimes times = comm.times();
  CHECK(times.busy_seconds == 0);
  CHECK(times.host_seconds == 0);
  CHECK(times.calls == 0);
  CHECK(times.send_bytes == 0);
  CHECK(s.device->collective_wait_seconds() == 0);
}

TEST_CASE("timed communicator: counts calls and the bytes each takes from this rank") {
  Setup s;
  TimedCommunicator comm = s.timed({});
  std::vector<float> send(8, 1.0f), recv(8, 0.0f);
  comm.all_gather(send.data(), recv.data(), 8, DType::kF32, s.collective());      // 32 B
  comm.reduce_scatter(send.data(), recv.data(), 8, DType::kF32, s.collective());  // 8 x 1 rank x 4 B
  comm.all_reduce(send.data(), recv.data(), 4, DType::kF32, s.collective());      // 16 B
  comm.broadcast(recv.data(), 2, DType::kF32, 0, s.collective());                 // root: 8 B
  REQUIRE(s.collective().synchronize().is_ok());
  std::array<double, 3> values = {1, 2, 3};
  REQUIRE(comm.all_reduce_host(values).is_ok());  // 24 B
  REQUIRE(comm.barrier().is_ok());
  const CommTimes times = comm.times();
  CHECK(times.calls == 6);
  CHECK(times.send_bytes == 32 + 32 + 16 + 8 + 24);
  CHECK(times.busy_seconds >= times.host_seconds);
  CHECK(recv[0] == 1.0f);  // forwarded: the local collectives copied
}

TEST_CASE("timed communicator: a delayed collective is busy and waited for at least the delay") {
  Setup s;
  TimedCommunicator comm = s.timed({Fault::Kind::kDelay, 1, kDelay});
  std::vector<float> send(64, 2.0f), recv(64, 0.0f);
  std::unique_ptr<device::Event> done = s.device->create_event();

  const Clock::time_point issued = Clock::now();
  comm.all_reduce(send.data(), recv.data(), 64, DType::kF32, s.collective());
  s.collective().record(*done);
  const Clock::time_point waiting = Clock::now();
  s.compute().wait(*done);  // the compute stream runs on this thread: it blocks here

  // The stream cannot finish the call before issued + delay; this thread waited from `waiting`.
  const double delay = seconds(kDelay);
  CHECK(recv[0] == 2.0f);
  CHECK(s.device->collective_wait_seconds() >= delay - seconds(waiting - issued));
  REQUIRE(s.collective().synchronize().is_ok());
  CHECK(comm.times().busy_seconds >= delay);
  CHECK(comm.times().host_seconds == 0);
}

TEST_CASE("timed communicator: waiting in the collective stream's synchronize() counts too") {
  Setup s;
  TimedCommunicator comm = s.timed({Fault::Kind::kDelay, 2, kDelay});
  std::vector<float> buffer(16, 1.0f);
  comm.all_gather(buffer.data(), buffer.data(), 16, DType::kF32, s.collective());
  REQUIRE(s.collective().synchronize().is_ok());
  const double before = s.device->collective_wait_seconds();
  const Clock::time_point issued = Clock::now();
  comm.all_gather(buffer.data(), buffer.data(), 16, DType::kF32, s.collective());  // call 2: delayed
  const Clock::time_point waiting = Clock::now();
  REQUIRE(s.device->synchronize().is_ok());
  CHECK(s.device->collective_wait_seconds() - before >= seconds(kDelay) - seconds(waiting - issued));
  CHECK(comm.times().busy_seconds >= seconds(kDelay));
}

TEST_CASE("timed communicator: a delayed host call is busy and waited (host seconds)") {
  Setup s;
  TimedCommunicator comm = s.timed({Fault::Kind::kDelay, 1, kDelay});
  std::array<double, 1> value = {4.0};
  REQUIRE(comm.all_reduce_host(value).is_ok());
  CHECK(value[0] == 4.0);
  CHECK(comm.times().host_seconds >= seconds(kDelay));
  CHECK(comm.times().busy_seconds == comm.times().host_seconds);
  CHECK(s.device->collective_wait_seconds() == 0);  // not on the stream: the trainer adds host_seconds
}

TEST_CASE("device: waits for the transfer streams are not collective waits") {
  Setup s;
  device::Stream& h2d = s.device->stream(device::StreamRole::kHostToDevice);
  h2d.enqueue([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return Status::ok();
  });
  std::unique_ptr<device::Event> done = s.device->create_event();
  h2d.record(*done);
  s.compute().wait(*done);
  REQUIRE(s.device->synchronize().is_ok());
  CHECK(s.device->collective_wait_seconds() == 0);
}

}  // namespace
}  // namespace zinf::comm
