#include "libengine/zero/state_store.h"

#include <array>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/memory/aligned_buffer.h"

namespace zinf::zero {
namespace {

// A flat array in device or host memory: the device and cpu tiers.
class MemoryStore final : public StateStore {
 public:
  MemoryStore(spec::Tier tier, DType dtype, const Partition& partition, device::Device& device,
              device::DeviceBuffer buffer)
      : StateStore(tier, dtype, partition, device), buffer_(std::move(buffer)) {}

  bool on_device() const override { return tier_ == spec::Tier::kDevice; }
  bool in_host_memory() const override { return tier_ != spec::Tier::kDevice; }
  Tensor slice(model::ParamId id) const override { return view(buffer_.data(), id, on_device()); }
  std::span<std::byte> host_region() const override {
    if (on_device()) return {};
    return {static_cast<std::byte*>(buffer_.data()), buffer_.bytes()};
  }

  Status put(model::ParamId id, const void* host_values, device::Stream& stream) override {
    device_.copy(at(id), host_values, slice_bytes(id),
                 on_device() ? device::CopyKind::kHostToDevice : device::CopyKind::kHostToHost, stream);
    return Status::ok();
  }
  Result<std::size_t> publish(model::ParamId id, const void* host_values, device::Stream& h2d) override {
    const std::size_t bytes = slice_bytes(id);
    if (on_device()) {
      device_.copy(at(id), host_values, bytes, device::CopyKind::kHostToDevice, h2d);
      return bytes;
    }
    // The optimizer may have written the new values in place (the home is its output).
    if (at(id) != host_values) std::memcpy(at(id), host_values, bytes);
    return std::size_t{0};
  }
  void copy_from_device(model::ParamId id, const void* source, device::Stream& stream) override {
    device_.copy(at(id), source, slice_bytes(id),
                 on_device() ? device::CopyKind::kDeviceToDevice : device::CopyKind::kDeviceToHost, stream);
  }
  void zero(device::Stream& stream) override {
    if (buffer_.empty()) return;
    if (on_device()) {
      device_.zero(buffer_.data(), buffer_.bytes(), stream);
    } else {
      std::memset(buffer_.data(), 0, buffer_.bytes());
    }
  }
  Result<Tensor> open_host_window(model::ParamId id, std::span<std::byte> staging, bool fill,
                                  device::Stream& stream) override {
    if (!on_device()) return slice(id);
    ZINF_CHECK(staging.size() == slice_bytes(id), "state store: a staging buffer of another size");
    if (fill) {
      device_.copy(staging.data(), at(id), slice_bytes(id), device::CopyKind::kDeviceToHost, stream);
      ZINF_RETURN_IF_ERROR(stream.synchronize());
    }
    return Tensor(staging.data(), dtype_, Shape{partition_[id].owned});
  }
  Status close_host_window(model::ParamId id, const Tensor& window, device::Stream& stream) override {
    if (!on_device()) return Status::ok();
    device_.copy(at(id), window.data(), slice_bytes(id), device::CopyKind::kHostToDevice, stream);
    return stream.synchronize();
  }
  double sum_squares(device::CpuOps& host_ops) const override {
    std::vector<Tensor> slices;
    slices.reserve(static_cast<std::size_t>(partition_.size()));
    for (model::ParamId id = 0; id < partition_.size(); ++id) slices.push_back(slice(id));
    return on_device() ? device_.ops().sum_squares(slices) : host_ops.sum_squares(slices);
  }
  ParamHome home(model::ParamId id) const override {
    ParamHome home;
    home.tier = tier_;
    home.bytes = slice_bytes(id);
    home.slice_numel = partition_[id].slice_numel;
    home.data = at(id);
    return home;
  }
  std::uint64_t bytes() const override { return buffer_.bytes(); }

 private:
  void* at(model::ParamId id) const { return view(buffer_.data(), id, false).data(); }

  device::DeviceBuffer buffer_;
};

// One NVMe extent per parameter slice.
class NvmeStore final : public StateStore {
 public:
  NvmeStore(DType dtype, std::string what, const model::ParamTable& table, const Partition& partition,
            device::Device& device)
      : StateStore(spec::Tier::kNvme, dtype, partition, device),
        what_(std::move(what)),
        table_(table),
        extents_(static_cast<std::size_t>(partition.size()), 0) {}

  bool on_device() const override { return false; }
  bool in_host_memory() const override { return false; }
  Tensor slice(model::ParamId /*id*/) const override {
    ZINF_CHECK(false, "state store: NVMe-resident values have no address");
    return {};
  }
  Status put(model::ParamId id, const void* host_values, device::Stream& /*stream*/) override {
    ZINF_CHECK(nvme_ != nullptr, "state store: no NVMe store attached");
    ZINF_ASSIGN_OR_RETURN(
        extents_[static_cast<std::size_t>(id)],
        nvme_->create(fmt::format("{} of {}", what_, table_[id].name),
                      std::span<const std::byte>(static_cast<const std::byte*>(host_values), slice_bytes(id))));
    return Status::ok();
  }
  Result<std::size_t> publish(model::ParamId id, const void* host_values, device::Stream& /*h2d*/) override {
    ZINF_RETURN_IF_ERROR(nvme_->start_write(
        extent(id), std::span<const std::byte>(static_cast<const std::byte*>(host_values), slice_bytes(id))));
    return std::size_t{0};
  }
  void copy_from_device(model::ParamId /*id*/, const void* /*source*/, device::Stream& /*stream*/) override {
    ZINF_CHECK(false, "state store: no device copies into NVMe-resident values");
  }
  void zero(device::Stream& /*stream*/) override {
    ZINF_CHECK(false, "state store: NVMe-resident values are not zeroed");
  }
  double sum_squares(device::CpuOps& /*host_ops*/) const override {
    ZINF_CHECK(false, "state store: NVMe-resident values are not summed in place");
    return 0;
  }
  Result<Tensor> open_host_window(model::ParamId id, std::span<std::byte> staging, bool fill,
                                  device::Stream& /*stream*/) override {
    ZINF_CHECK(staging.size() == slice_bytes(id), "state store: a staging buffer of another size");
    if (fill) {
      ZINF_RETURN_IF_ERROR(nvme_->start_read(extent(id), staging));
      ZINF_RETURN_IF_ERROR(nvme_->wait(extent(id)));
    }
    return Tensor(staging.data(), dtype_, Shape{partition_[id].owned});
  }
  Status close_host_window(model::ParamId id, const Tensor& window, device::Stream& /*stream*/) override {
    ZINF_RETURN_IF_ERROR(nvme_->start_write(
        extent(id), std::span<const std::byte>(static_cast<const std::byte*>(window.data()), slice_bytes(id))));
    return nvme_->wait(extent(id));
  }
  Status wait(model::ParamId id) override { return nvme_->wait(extent(id)); }
  bool done(model::ParamId id) override { return nvme_->done(extent(id)); }
  Status wait_writes(model::ParamId id) override { return nvme_->wait_writes(extent(id)); }
  ParamHome home(model::ParamId id) const override {
    ParamHome home;
    home.tier = tier_;
    home.bytes = slice_bytes(id);
    home.slice_numel = partition_[id].slice_numel;
    home.extent = extent(id);
    return home;
  }
  std::uint64_t bytes() const override {
    std::uint64_t sum = 0;
    for (model::ParamId id = 0; id < partition_.size(); ++id) sum += slice_bytes(id);
    return sum;
  }
  std::uint64_t planned_nvme_bytes() const override { return bytes(); }
  void attach(NvmeStateStore* nvme) override { nvme_ = nvme; }

 private:
  NvmeStateStore::ExtentId extent(model::ParamId id) const { return extents_[static_cast<std::size_t>(id)]; }

  std::string what_;
  const model::ParamTable& table_;
  NvmeStateStore* nvme_ = nullptr;
  std::vector<NvmeStateStore::ExtentId> extents_;  // by parameter, once put()
};

}  // namespace

Result<device::DeviceBuffer> allocate_on_tier(device::Device& device, spec::Tier tier, std::size_t bytes,
                                              std::string what) {
  const bool on_device = tier == spec::Tier::kDevice;
  Result<device::DeviceBuffer> buffer = on_device ? device.allocate(bytes, what) : device.allocate_host(bytes, what);
  if (buffer.is_ok()) return buffer;
  return on_device
             ? as_field_error(buffer.status(), "scenario.device_memory", "raise it or move states off the device")
             : as_field_error(buffer.status(), "scenario.zero.host_memory", "raise it or move states to \"nvme\"");
}

Status as_field_error(const Status& status, std::string_view field, std::string_view hint) {
  // The system refusing memory is no budget's fault: its message names the machine's limit.
  if (status.code() != ErrorCode::kOutOfMemory || memory::refused_by_system(status)) return status;
  return Status::invalid_argument(fmt::format("{}: {}; {}", field, status.message(), hint));
}

Result<device::DeviceBuffer> allocate_host_buffer(device::Device& device, std::size_t bytes, std::string what) {
  return allocate_on_tier(device, spec::Tier::kCpu, bytes, std::move(what));
}

std::string_view tier_word(spec::Tier tier) { return tier == spec::Tier::kDevice ? "device" : spec::tier_name(tier); }

Tensor StateStore::view(void* base, model::ParamId id, bool device_memory) const {
  auto* at =
      static_cast<std::byte*>(base) + static_cast<std::size_t>(partition_[id].flat_offset) * dtype_size_bytes(dtype_);
  return Tensor(at, dtype_, Shape{partition_[id].owned}, device_memory ? &device_ : nullptr);
}

namespace {

class ByParameterStream final : public OptimizerStatesStream {
 public:
  ByParameterStream(std::array<StateStore*, 3> stores, device::Device& device) : stores_(stores), device_(device) {}

  Status stream(bool write_back, const Visit& visit) override {
    device::Stream& stream = device_.stream(device::StreamRole::kCompute);
    const StateStore& first = *stores_[0];
    const model::ParamId count = first.parameter_count();
    std::vector<std::byte> staging;
    for (model::ParamId id = 0; id < count; ++id) {
      const std::size_t bytes = first.slice_bytes(id);
      // Only stores outside host memory need it: in host memory the windows are the slices.
      if (first.uses_staging()) staging.resize(3 * bytes);
      std::array<Tensor, 3> windows;
      for (std::size_t kind = 0; kind < stores_.size(); ++kind) {
        const std::span<std::byte> mine =
            staging.empty() ? std::span<std::byte>() : std::span<std::byte>(staging).subspan(kind * bytes, bytes);
        ZINF_ASSIGN_OR_RETURN(windows[kind], stores_[kind]->open_host_window(id, mine, !write_back, stream));
      }
      ZINF_RETURN_IF_ERROR(visit({id, 0, windows[0], windows[1], windows[2]}));
      if (!write_back) continue;
      for (std::size_t kind = 0; kind < stores_.size(); ++kind) {
        ZINF_RETURN_IF_ERROR(stores_[kind]->close_host_window(id, windows[kind], stream));
      }
    }
    return Status::ok();
  }

 private:
  std::array<StateStore*, 3> stores_;
  device::Device& device_;
};

}  // namespace

std::unique_ptr<OptimizerStatesStream> stream_by_parameter(StateStore& master, StateStore& exp_avg,
                                                           StateStore& exp_avg_sq, device::Device& device) {
  ZINF_CHECK(master.dtype() == DType::kF32 && exp_avg.dtype() == DType::kF32 && exp_avg_sq.dtype() == DType::kF32,
             "stream_by_parameter: the optimizer states are fp32");
  ZINF_CHECK(master.uses_staging() == exp_avg.uses_staging() && master.uses_staging() == exp_avg_sq.uses_staging(),
             "stream_by_parameter: the three stores live on one tier");
  return std::make_unique<ByParameterStream>(std::array<StateStore*, 3>{&master, &exp_avg, &exp_avg_sq}, device);
}

Result<std::unique_ptr<StateStore>> make_state_store(spec::Tier tier, DType dtype, std::string what,
                                                     const model::ParamTable& table, const Partition& partition,
                                                     device::Device& device) {
  if (tier == spec::Tier::kNvme)
    return std::unique_ptr<StateStore>(new NvmeStore(dtype, std::move(what), table, partition, device));
  const std::size_t bytes = static_cast<std::size_t>(partition.flat_numel()) * dtype_size_bytes(dtype);
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer buffer, allocate_on_tier(device, tier, bytes, std::move(what)));
  return std::unique_ptr<StateStore>(new MemoryStore(tier, dtype, partition, device, std::move(buffer)));
}

}  // namespace zinf::zero
