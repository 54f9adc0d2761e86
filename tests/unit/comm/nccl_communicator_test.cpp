// NcclCommunicator under mpirun with 2 ranks, one GPU each: all_gather, reduce_scatter, all_reduce
// and broadcast of device buffers against the closed forms (rank r contributes r + 1), for fp32 and
// bf16. Its own main: where this node has fewer GPUs than ranks, every rank prints why and exits
// 77, which CTest reports as skipped (SKIP_RETURN_CODE), as the CUDA tests do.
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/convert.h"
#include "libengine/comm/launch_info.h"
#include "libengine/comm/nccl_communicator.h"
#include "libengine/device/device_factory.h"
#include "tests/catch.h"

namespace zinf::comm {
namespace {

TEST_CASE("nccl communicator: every collective on device buffers against closed forms") {
  Result<LaunchInfo> launch = launch_info_from_environment();
  REQUIRE(launch.is_ok());
  device::DeviceOptions options;
  options.kind = device::DeviceKind::kCuda;
  options.cuda_device_index = launch->local_rank;
  options.memory_budget_bytes = 256ull << 20;
  Result<std::unique_ptr<device::Device>> device = device::make_device(options);
  REQUIRE(device.is_ok());
  Result<std::unique_ptr<Communicator>> made = make_nccl_communicator(**device, CommOptions{std::chrono::seconds(60)});
  REQUIRE(made.is_ok());
  Communicator& comm = **made;
  CHECK(comm.backend() == "nccl");
  const int n = comm.world_size();
  const int me = comm.rank();
  device::Stream& stream = (*device)->stream(device::StreamRole::kCollective);
  const std::size_t count = 4096;
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const std::size_t elem = dtype_size_bytes(dtype);
    auto to_bytes = [&](const std::vector<float>& values) {
      std::vector<std::uint8_t> bytes(values.size() * elem);
      if (dtype == DType::kF32) {
        std::memcpy(bytes.data(), values.data(), bytes.size());
      } else {
        kernels::cpu::f32_to_bf16(values.data(), reinterpret_cast<std::uint16_t*>(bytes.data()), values.size());
      }
      return bytes;
    };
    auto to_floats = [&](const std::vector<std::uint8_t>& bytes) {
      std::vector<float> values(bytes.size() / elem);
      if (dtype == DType::kF32) {
        std::memcpy(values.data(), bytes.data(), bytes.size());
      } else {
        kernels::cpu::bf16_to_f32(reinterpret_cast<const std::uint16_t*>(bytes.data()), values.data(), values.size());
      }
      return values;
    };
    const std::size_t total = count * static_cast<std::size_t>(n);
    Result<device::DeviceBuffer> send = (*device)->allocate(total * elem, "send");
    Result<device::DeviceBuffer> recv = (*device)->allocate(total * elem, "recv");
    REQUIRE(send.is_ok());
    REQUIRE(recv.is_ok());
    const std::vector<std::uint8_t> mine = to_bytes(std::vector<float>(total, static_cast<float>(me + 1)));
    REQUIRE(cudaMemcpy(send->data(), mine.data(), mine.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    auto fetch = [&](std::size_t elements) {
      std::vector<std::uint8_t> bytes(elements * elem);
      REQUIRE(cudaMemcpy(bytes.data(), recv->data(), bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
      return to_floats(bytes);
    };
    const float rank_sum = static_cast<float>(n * (n + 1) / 2);

    comm.all_gather(send->data(), recv->data(), count, dtype, stream);
    REQUIRE(stream.synchronize().is_ok());
    const std::vector<float> gathered = fetch(total);
    for (std::size_t i = 0; i < total; ++i) REQUIRE(gathered[i] == static_cast<float>(i / count + 1));

    comm.reduce_scatter(send->data(), recv->data(), count, dtype, stream);
    REQUIRE(stream.synchronize().is_ok());
    for (const float v : fetch(count)) REQUIRE(v == rank_sum);

    comm.all_reduce(send->data(), recv->data(), count, dtype, stream);
    REQUIRE(stream.synchronize().is_ok());
    for (const float v : fetch(count)) REQUIRE(v == rank_sum);

    REQUIRE(cudaMemcpy(recv->data(), send->data(), count * elem, cudaMemcpyDeviceToDevice) == cudaSuccess);
    comm.broadcast(recv->data(), count, dtype, n - 1, stream);
    REQUIRE(stream.synchronize().is_ok());
    for (const float v : fetch(count)) REQUIRE(v == static_cast<float>(n));
  }
  std::vector<double> values = {static_cast<double>(me + 1)};
  REQUIRE(comm.all_reduce_host(values).is_ok());
  CHECK(values[0] == static_cast<double>(n * (n + 1) / 2));
  CHECK(comm.barrier().is_ok());
}

}  // namespace
}  // namespace zinf::comm

int main(int argc, char** argv) {
  const zinf::Result<zinf::comm::LaunchInfo> launch = zinf::comm::launch_info_from_environment();
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  const int needed = launch.is_ok() ? launch->local_size : 1;
  if (gpus < needed) {
    std::printf("skipped: %d GPU(s) for %d rank(s) on this node\n", gpus, needed);
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
