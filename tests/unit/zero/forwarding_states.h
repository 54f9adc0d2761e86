// ForwardingStates: a zero::ModelStates that passes every call to another one, for test decorators
// that change one or two calls (as leveldb's EnvWrapper does for Env) instead of each repeating all
// of ModelStates' forwarders. `inner` must outlive it; thread-safety and failures are inner's.
#pragma once

#include <string>
#include <vector>

#include "libengine/zero/model_states.h"

namespace zinf::testing {

class ForwardingStates : public zero::ModelStates {
 public:
  explicit ForwardingStates(zero::ModelStates& inner) : inner_(inner) {}

  void begin_phase(model::Phase phase) override { inner_.begin_phase(phase); }
  Result<Tensor> acquire(model::ParamId id) override { return inner_.acquire(id); }
  void release(model::ParamId id) override { inner_.release(id); }
  Result<Tensor> grad_buffer(model::ParamId id) override { return inner_.grad_buffer(id); }
  Status commit(model::ParamId id) override { return inner_.commit(id); }
  device::Device& device() const override { return inner_.device(); }
  const model::ParamTable& table() const override { return inner_.table(); }
  const zero::Partition* partition() const override { return inner_.partition(); }
  Status zero_grads() override { return inner_.zero_grads(); }
  Status prepare_step(const optim::Optimizer& optimizer, double lr, const optim::LossScaler& scaler) override {
    return inner_.prepare_step(optimizer, lr, scaler);
  }
  Result<optim::StepReport> optimizer_step(optim::Optimizer& optimizer, double lr, optim::LossScaler& scaler) override {
    return inner_.optimizer_step(optimizer, lr, scaler);
  }
  std::vector<zero::CheckpointArrayInfo> checkpoint_layout() const override { return inner_.checkpoint_layout(); }
  Status save_checkpoint(zero::CheckpointSink& sink) override { return inner_.save_checkpoint(sink); }
  Status load_checkpoint(zero::CheckpointSource& source) override { return inner_.load_checkpoint(source); }
  std::vector<zero::StateBytes> state_bytes() const override { return inner_.state_bytes(); }
  spec::StatePlacement placement() const override { return inner_.placement(); }
  zero::EngineStats stats() const override { return inner_.stats(); }
  std::vector<model::ParamId> acquire_order(model::Phase phase) const override { return inner_.acquire_order(phase); }
  zero::CollectiveOrder* collective_order() override { return inner_.collective_order(); }
  std::string describe() const override { return inner_.describe(); }

 protected:
  zero::ModelStates& inner() const { return inner_; }

 private:
  zero::ModelStates& inner_;
};

}  // namespace zinf::testing
