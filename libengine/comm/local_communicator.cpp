#include "libengine/comm/local_communicator.h"

#include "libengine/core/check.h"

namespace zinf::comm {

void LocalCommunicator::copy(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) {
  if (send == recv || count == 0) return;
  device_.copy(recv, send, count * dtype_size_bytes(dtype), device::CopyKind::kDeviceToDevice, stream);
}

void LocalCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype,
                                   device::Stream& stream) {
  copy(send, recv, count, dtype, stream);
}

void LocalCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                       device::Stream& stream) {
  copy(send, recv, count, dtype, stream);
}

void LocalCommunicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                   device::Stream& stream) {
  copy(send, recv, count, dtype, stream);
}

void LocalCommunicator::broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) {
  ZINF_CHECK(root == 0, "LocalCommunicator::broadcast: the root of a world of 1 is rank 0");
  (void)buffer;
  (void)count;
  (void)dtype;
  (void)stream;
}

}  // namespace zinf::comm
