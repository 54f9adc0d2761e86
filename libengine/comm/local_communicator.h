// LocalCommunicator: the Communicator of a single process (world size 1). Every collective is the
// identity on this rank's data: a device-to-device copy on the stream when send and recv differ,
// nothing otherwise. It lets the partitioned engine run the multi-rank code path unchanged at one
// rank, with the same bits as no communicator at all.
#pragma once

#include "libengine/comm/communicator.h"

namespace zinf::comm {

class LocalCommunicator final : public Communicator {
 public:
  // `device` copies the buffers (they may be in its memory); it must outlive the communicator.
  explicit LocalCommunicator(device::Device& device) : device_(device) {}

  std::string_view backend() const override { return "local"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }

  void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) override;
  Status barrier() override { return Status::ok(); }
  Status all_reduce_host(std::span<double> values) override {
    (void)values;
    return Status::ok();
  }

 private:
  void copy(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream);
  device::Device& device_;
};

}  // namespace zinf::comm
