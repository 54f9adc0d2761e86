// ParamPublisher: the publish/loan protocol between the optimizer (OptimizerPipeline, checkpoint
// loads, the initial values) and the parameter coordinator (param_coordinator.h). The optimizer
// owns the new values of the parameters; the coordinator owns every device copy of them and what
// the next forward pass finds ready. After the parameter store has the new values:
//   - publish(): the new values of one parameter (this rank's slice, storage precision, host
//     memory). Persistent device copies are updated (and gathered over the ranks, unless the
//     caller defers that to gather()); an NVMe-resident parameter that the next forward pass needs
//     early is kept in host memory so that pass neither waits for the NVMe write nor reads it back
//     — copied, or on loan (lend: the caller's buffer itself, no copy);
//   - end_loan(): the caller is about to change the buffer it lent: the loan ends (waiting for a
//     copy still reading it); a parameter not yet copied is read back from NVMe when needed;
//   - invalidate(): the parameters are changing: every gathered copy is dropped, except the
//     values published since the last step boundary;
//   - wait_published(): the copies and gathers publish() started are done (their sources may
//     change after it).
// Ownership: published host values stay the caller's; they must stay unchanged until
// wait_published() (a copy) or end_loan() (a loan). Thread: the training loop's thread makes every
// call. State on failure: only wait_published() fails (a stream's error); the copies are then in
// an unknown state and the step fails.
#pragma once

#include <cstddef>

#include "libengine/core/status.h"
#include "libengine/model/param_table.h"

namespace zinf::zero {

class ParamPublisher {
 public:
  struct Publish {
    // The persistent copy's gather over the ranks waits for gather(id): the caller issues the
    // gathers itself, in an order every rank shares (collective_order.h).
    bool defer_gather = false;
    // The values may be kept on loan (no copy) until end_loan(id).
    bool lend = false;
  };

  virtual ~ParamPublisher() = default;

  // Returns the bytes copied to the device (a persistent copy's slice; 0 for none).
  virtual std::size_t publish(model::ParamId id, const void* host_values, Publish how) = 0;
  // The same from this rank's slice in device memory, written on the compute stream (a
  // device-tier parameter stepped on the device): the copy follows the compute stream.
  virtual void publish_from_device(model::ParamId id, const void* device_slice) = 0;
  // Issues the gather publish(id, ..., {.defer_gather = true}) left out. Nothing at one rank or
  // for a parameter without a persistent copy.
  virtual void gather(model::ParamId id) = 0;
  virtual void end_loan(model::ParamId id) = 0;
  // Precondition: nothing acquired.
  virtual void invalidate() = 0;
  virtual Status wait_published() = 0;
};

}  // namespace zinf::zero
