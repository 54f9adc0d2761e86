// comm_fault_runner: one rank of a faulty job, started by comm_fault_test under mpirun. Every rank
// all-reduces an fp32 buffer of --count elements (default 2^18: 1 MiB, enqueued on the collective
// stream; 1024: 4 KiB, small enough to run on the calling thread, the stream being idle) 20 times
// through the MPI communicator; rank --rank wraps it in a FaultInjectingCommunicator with the fault
// --mode at call --call:
//   hang   the rank disappears (its calls are swallowed) and then sleeps: its peers must time out
//          and name it;
//   kill   the rank sends itself SIGKILL before the call (kill -9 mid-collective);
//   delay  the call starts 300 ms late: the job must still succeed with correct sums;
//   error  the call fails on that rank.
// A failure prints "error: <status>" and exits 1, as the CLI does. Not a Catch2 test: a rank that
// ends a job early must be a process of its own.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "libengine/comm/communicator_factory.h"
#include "libengine/comm/fault_injecting_communicator.h"
#include "libengine/comm/mpi_communicator.h"
#include "libengine/device/cpu_device.h"

namespace {

int fail(const zinf::Status& status) {
  zinf::comm::end_job_with_failure(1);  // as the CLI does on any failure
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zinf;
  std::string mode = "none";
  int fault_rank = 0;
  std::uint64_t fault_call = 1;
  long timeout_ms = 2000;
  std::size_t count = std::size_t{1} << 18;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mode") mode = argv[i + 1];
    if (flag == "--rank") fault_rank = std::atoi(argv[i + 1]);
    if (flag == "--call") fault_call = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--timeout-ms") timeout_ms = std::atol(argv[i + 1]);
    if (flag == "--count") count = std::strtoull(argv[i + 1], nullptr, 10);
  }
  auto device = device::make_cpu_device({});
  comm::CommOptions options;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  Result<std::unique_ptr<comm::Communicator>> made = comm::make_mpi_communicator(*device, options);
  if (!made.is_ok()) return fail(made.status());
  std::unique_ptr<comm::Communicator> comm = std::move(made).value();
  const int me = comm->rank();
  if (me == fault_rank && mode != "none" && mode != "kill") {
    comm::Fault fault;
    fault.at_call = fault_call;
    fault.delay = std::chrono::milliseconds(300);
    fault.kind = mode == "hang"    ? comm::Fault::Kind::kDisappear
                 : mode == "delay" ? comm::Fault::Kind::kDelay
                                   : comm::Fault::Kind::kError;
    comm = std::make_unique<comm::FaultInjectingCommunicator>(std::move(comm), fault);
  }
  device::Stream& stream = device->stream(device::StreamRole::kCollective);
  std::vector<float> buffer(count);
  const int world = comm->world_size();
  for (std::uint64_t call = 1; call <= 20; ++call) {
    if (mode == "kill" && me == fault_rank && call == fault_call) ::kill(::getpid(), SIGKILL);
    for (std::size_t i = 0; i < count; ++i) buffer[i] = static_cast<float>(me + 1);
    comm->all_reduce(buffer.data(), buffer.data(), count, DType::kF32, stream);
    const Status status = stream.synchronize();
    if (!status.is_ok()) return fail(status);
    if (mode == "hang" && me == fault_rank && call >= fault_call) {
      // Gone from the job's point of view, but alive: the peers' timeout and the launcher end it.
      std::this_thread::sleep_for(std::chrono::minutes(10));
    }
    const float expected = static_cast<float>(world * (world + 1) / 2);
    if (buffer[0] != expected || buffer[count - 1] != expected) {
      std::fprintf(stderr, "error: rank %d: all_reduce #%llu gave %g, expected %g\n", me,
                   static_cast<unsigned long long>(call), static_cast<double>(buffer[0]),
                   static_cast<double>(expected));
      return 1;
    }
  }
  std::printf("rank %d: 20 all_reduces ok\n", me);
  return 0;
}
