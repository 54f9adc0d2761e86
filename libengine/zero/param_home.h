// ParamHome and ParamHomes: where the values of a parameter live (this rank's slice, storage
// precision), as the ParamCoordinator asks for them. The parameter store (state_store.h) answers;
// the coordinator asks each time it needs the answer rather than keeping a copy, because an
// NVMe-resident parameter's extent exists only once its initial values are written — after the
// coordinator, which owns the persistent device copies those values also go to, is made.
#pragma once

#include <cstddef>
#include <cstdint>

#include "libengine/model/param_table.h"
#include "libengine/spec/state_placement.h"
#include "libengine/zero/nvme_state_store.h"

namespace zinf::zero {

// Where the values of one parameter live (this rank's slice; the whole parameter at one rank).
struct ParamHome {
  spec::Tier tier = spec::Tier::kDevice;
  void* data = nullptr;                 // device (tier device) or host (tier cpu) memory
  NvmeStateStore::ExtentId extent = 0;  // tier nvme, once the initial values are written
  std::size_t bytes = 0;                // this rank's slice (the elements it owns)
  std::int64_t slice_numel = 0;         // every rank's padded slice (partition.h); 0: bytes / element size

  bool on_device() const { return tier == spec::Tier::kDevice; }
  bool in_host_memory() const { return tier == spec::Tier::kCpu; }
  bool on_nvme() const { return tier == spec::Tier::kNvme; }
};

class ParamHomes {
 public:
  virtual ~ParamHomes() = default;
  // Parameter id's home. Its tier, bytes and slice never change; an NVMe extent is valid once the
  // parameter's initial values are written. Called on the training thread.
  virtual ParamHome home(model::ParamId id) const = 0;
};

}  // namespace zinf::zero
