// ParamSource and GradSink: the only way the model reaches its parameters and hands back their
// gradients (docs/architecture.md §2). The model never knows where parameters live or in which precision they are
// stored: ZeRO-0 in one process (zero/replicated_states) hands out its resident copy; ZeRO-3 with
// offload gathers slices from CPU memory or NVMe behind the same two calls. Switching one for the
// other is a different object, not an `if` in the model.
//
// Parameters are named by ParamId, an index into the model's ParamTable (model/param_table.h).
// Every call is made by the thread running the model's forward/backward.
//
// Timing (stream order, docs/architecture.md §5): a view acquire() returns is ready for work enqueued on the
// device's compute stream after acquire() returns — the source has ordered its own transfers
// (NVMe read, host→device copy, all-gather) before that point with events, and may have blocked
// the caller until then. release(id) may come while compute-stream work that reads the view is
// still in flight (on CUDA it usually is): the source reuses or frees that memory only after the
// compute stream has passed the release point (Device::release_after), never at once. The same
// holds for a gradient buffer after commit(id): work already enqueued may still write it.
#pragma once

#include <cstdint>
#include <span>

#include "libengine/core/status.h"
#include "libengine/tensor/tensor.h"

namespace zinf::model {

using ParamId = std::int32_t;

// Where a pass over the model is; the hooks let a prefetching source learn and follow the order
// in which parameters are acquired.
enum class Phase {
  kForward,   // a forward pass starts (training or evaluation)
  kBackward,  // the backward pass of the forward just run starts
};

class ParamSource {
 public:
  virtual ~ParamSource() = default;
  // Called by the model at the start of each phase, before the phase's first acquire(). A source
  // that prefetches uses it to match acquires against the order recorded for that phase. Never
  // fails; the default does nothing.
  virtual void begin_phase(Phase phase) { (void)phase; }
  // Makes parameter `id` resident on the compute device and returns its view, shaped as the
  // ParamTable says, in the model's compute dtype (GptConfig::compute_dtype; the source is created
  // for it). The view stays valid, and its contents unchanged, until release(id).
  // Acquiring an id that is already acquired is a bug. Fails when the parameter cannot be brought
  // in (device memory exhausted, an NVMe read failed); nothing is acquired then.
  virtual Result<Tensor> acquire(ParamId id) = 0;
  // The model is done with the view until its next acquire(id). Never fails.
  virtual void release(ParamId id) = 0;
};

class GradSink {
 public:
  virtual ~GradSink() = default;
  // The fp32 device buffer the backward pass adds (+=) the gradient of `id` into during this
  // backward; zero at the first call of a step. Valid until commit(id). Asking again before the
  // commit returns the same buffer (a tied weight gets contributions from two modules).
  virtual Result<Tensor> grad_buffer(ParamId id) = 0;
  // The gradient of `id` is complete for this backward pass; the sink may reduce, convert or move
  // it down a tier. The buffer must not be touched afterwards.
  virtual Status commit(ParamId id) = 0;
};

}  // namespace zinf::model
