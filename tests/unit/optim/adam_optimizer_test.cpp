// AdamOptimizer over ReplicatedStates, held to an fp64 AdamW/Adam reference written here (PyTorch's
// update rule, torch clip_grad_norm_'s coefficient) over several steps with changing rates: with
// and without clipping, weight decay only where ParamInfo::weight_decay says, in fp32 and mixed
// precision (the half working copy must be the rounded master). fp16 with dynamic loss scaling:
// the gradients are unscaled, an overflow skips the step without touching any state and halves the
// scale, clean steps grow it again. Without a dynamic scaler non-finite gradients are an error.
#include "libengine/optim/adam_optimizer.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/convert.h"
#include "libengine/device/cpu_device.h"
#include "libengine/zero/replicated_states.h"
#include "tests/catch.h"

namespace zinf::optim {
namespace {

using model::ParamId;
using model::ParamInfo;
using model::ParamInit;
using model::ParamTable;
using zero::ReplicatedStates;

kernels::HalfFormat half_format_of(const Tensor& t) {
  return t.dtype() == DType::kF16 ? kernels::HalfFormat::kF16 : kernels::HalfFormat::kBF16;
}

ParamTable make_table() {
  ParamTable table;
  table.add(ParamInfo{.name = "w1", .shape = Shape({9, 13}), .init = ParamInit::kNormal, .init_std = 0.5f});
  table.add(ParamInfo{.name = "norm.weight", .shape = Shape({13}), .init = ParamInit::kOnes, .weight_decay = false});
  table.add(ParamInfo{.name = "b1", .shape = Shape({13}), .init = ParamInit::kZeros, .weight_decay = false});
  table.add(ParamInfo{.name = "w2", .shape = Shape({70}), .init = ParamInit::kNormal, .init_std = 0.1f});
  return table;
}

// The gradient of element i of parameter id at step t: smooth, sign-changing, of order 1.
float gradient_value(int step, ParamId id, std::size_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * step + 0.5 * id) * (1.0 + 0.25 * id));
}

// zero_grads, then one backward that adds scale * gradient_value into every parameter's buffer.
void write_gradients(ReplicatedStates& states, int step, float scale) {
  REQUIRE(states.zero_grads().is_ok());
  for (ParamId id = 0; id < states.table().size(); ++id) {
    Tensor grad = states.grad_buffer(id).value();
    for (std::int64_t i = 0; i < grad.numel(); ++i) {
      grad.f32()[i] += scale * gradient_value(step, id, static_cast<std::size_t>(i));
    }
    REQUIRE(states.commit(id).is_ok());
  }
}

// The gradients as the optimizer will see them (after rounding to the storage format), in fp64.
std::vector<std::vector<double>> stored_gradients(ReplicatedStates& states) {
  std::vector<std::vector<double>> grads;
  for (ParamId id = 0; id < states.table().size(); ++id) {
    const zero::ParamStates p = states.param_states(id);
    std::vector<float> values(static_cast<std::size_t>(p.grad.numel()));
    if (p.grad.dtype() == DType::kF32) {
      std::memcpy(values.data(), p.grad.f32(), values.size() * 4);
    } else {
      kernels::cpu::half_to_f32(half_format_of(p.grad), p.grad.half(), values.data(), values.size());
    }
    grads.emplace_back(values.begin(), values.end());
  }
  return grads;
}

// fp64 AdamW / Adam with global-norm clipping, one vector per parameter.
struct ReferenceAdam {
  AdamConfig config;
  std::vector<std::vector<double>> params, m, v;
  std::int64_t step = 0;

  ReferenceAdam(const AdamConfig& c, ReplicatedStates& states) : config(c) {
    for (ParamId id = 0; id < states.table().size(); ++id) {
      const zero::ParamStates p = states.param_states(id);
      params.emplace_back(p.master.f32(), p.master.f32() + p.master.numel());
      m.emplace_back(static_cast<std::size_t>(p.master.numel()), 0.0);
      v.emplace_back(static_cast<std::size_t>(p.master.numel()), 0.0);
    }
  }

  // Returns {global norm of the unscaled gradients, clip coefficient}.
  std::pair<double, double> update(const ParamTable& table, const std::vector<std::vector<double>>& scaled_grads,
                                   double loss_scale, double lr) {
    double sum = 0;
    for (const auto& g : scaled_grads) {
      for (double x : g) sum += (x / loss_scale) * (x / loss_scale);
    }
    const double norm = std::sqrt(sum);
    const double clip = config.grad_clip > 0 ? std::min(1.0, config.grad_clip / (norm + 1e-6)) : 1.0;
    ++step;
    const double bias1 = 1 - std::pow(config.beta1, static_cast<double>(step));
    const double bias2 = 1 - std::pow(config.beta2, static_cast<double>(step));
    for (std::size_t k = 0; k < params.size(); ++k) {
      const double wd = table[static_cast<ParamId>(k)].weight_decay ? config.weight_decay : 0.0;
      for (std::size_t i = 0; i < params[k].size(); ++i) {
        double g = scaled_grads[k][i] / loss_scale * clip;
        double& p = params[k][i];
        if (config.decoupled) {
          p *= 1 - lr * wd;
        } else {
          g += wd * p;
        }
        m[k][i] = config.beta1 * m[k][i] + (1 - config.beta1) * g;
        v[k][i] = config.beta2 * v[k][i] + (1 - config.beta2) * g * g;
        p -= lr / bias1 * m[k][i] / (std::sqrt(v[k][i]) / std::sqrt(bias2) + config.eps);
      }
    }
    return {norm, clip};
  }
};

void check_against_reference(ReplicatedStates& states, const ReferenceAdam& ref, double tolerance) {
  for (ParamId id = 0; id < states.table().size(); ++id) {
    const zero::ParamStates p = states.param_states(id);
    const auto k = static_cast<std::size_t>(id);
    for (std::size_t i = 0; i < static_cast<std::size_t>(p.master.numel()); ++i) {
      INFO(states.table()[id].name << "[" << i << "]");
      CHECK(p.master.f32()[i] == Approx(ref.params[k][i]).epsilon(tolerance).margin(tolerance * 1e-2));
      CHECK(p.exp_avg.f32()[i] == Approx(ref.m[k][i]).epsilon(tolerance).margin(tolerance * 1e-2));
      CHECK(p.exp_avg_sq.f32()[i] == Approx(ref.v[k][i]).epsilon(tolerance).margin(tolerance * 1e-4));
    }
  }
}

// Round-to-nearest-even to bf16 computed in fp64: 8 significant bits (values here are normal).
float bf16_reference(float x) {
  if (x == 0) return x;
  int exponent = 0;
  std::frexp(static_cast<double>(x), &exponent);
  const double quantum = std::ldexp(1.0, exponent - 8);
  return static_cast<float>(std::nearbyint(x / quantum) * quantum);
}

struct Snapshot {
  std::vector<std::vector<float>> params, m, v;
  std::vector<std::vector<std::uint16_t>> half;
  explicit Snapshot(ReplicatedStates& states) {
    for (ParamId id = 0; id < states.table().size(); ++id) {
      const zero::ParamStates p = states.param_states(id);
      params.emplace_back(p.master.f32(), p.master.f32() + p.master.numel());
      m.emplace_back(p.exp_avg.f32(), p.exp_avg.f32() + p.master.numel());
      v.emplace_back(p.exp_avg_sq.f32(), p.exp_avg_sq.f32() + p.master.numel());
      if (p.param_half.data() != nullptr)
        half.emplace_back(p.param_half.half(), p.param_half.half() + p.master.numel());
    }
  }
  bool operator==(const Snapshot& other) const {
    return params == other.params && m == other.m && v == other.v && half == other.half;
  }
};

TEST_CASE("AdamW in fp32 matches the fp64 reference over several steps, with clipping and decay flags") {
  const bool clip_on = GENERATE(false, true);
  INFO("clipping " << clip_on);
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = DType::kF32, .seed = 11}).value();
  const AdamConfig config{.beta1 = 0.9,
                          .beta2 = 0.95,
                          .eps = 1e-8,
                          .weight_decay = 0.1,
                          .decoupled = true,
                          .grad_clip = clip_on ? 0.5 : 0.0};
  AdamOptimizer optimizer = AdamOptimizer::create(config).value();
  LossScaler scaler;
  ReferenceAdam ref(config, *states);
  const double rates[] = {1e-2, 5e-3, 2e-2, 1e-3};
  for (int step = 0; step < 4; ++step) {
    write_gradients(*states, step, 1.0f);
    const auto [norm, clip] = ref.update(table, stored_gradients(*states), 1.0, rates[step]);
    auto report = states->optimizer_step(optimizer, rates[step], scaler);
    REQUIRE(report.is_ok());
    CHECK_FALSE(report->skipped);
    CHECK(report->loss_scale_used == 1.0);
    CHECK(report->grad_norm == Approx(norm).epsilon(1e-12));
    CHECK(report->clip_coef == Approx(clip).epsilon(1e-12));
    if (clip_on) CHECK(clip < 0.2);  // the gradients' norm is several times the limit: clipping is active
    CHECK(optimizer.step_count() == step + 1);
  }
  check_against_reference(*states, ref, 2e-5);
  // The decay flags mattered: norm.weight started at 1 and has no decay; with decay it would differ
  // from the reference by ~lr*wd per step, far above the tolerance (checked through the reference).
  const zero::ParamStates norm_weight = states->param_states(1);
  CHECK(std::fabs(norm_weight.master.f32()[0] - 1.0f) > 1e-4f);
}

TEST_CASE("classic Adam (L2 in the gradient) in fp32 matches the fp64 reference") {
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = DType::kF32, .seed = 5}).value();
  const AdamConfig config{.weight_decay = 0.05, .decoupled = false};
  AdamOptimizer optimizer = AdamOptimizer::create(config).value();
  LossScaler scaler;
  ReferenceAdam ref(config, *states);
  for (int step = 0; step < 3; ++step) {
    write_gradients(*states, step, 1.0f);
    ref.update(table, stored_gradients(*states), 1.0, 3e-3);
    REQUIRE(states->optimizer_step(optimizer, 3e-3, scaler).is_ok());
  }
  check_against_reference(*states, ref, 2e-5);
}

TEST_CASE("bf16 mixed precision: fp32 master follows the reference, the working copy is the rounded master") {
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = DType::kBF16, .seed = 2}).value();
  const AdamConfig config{.weight_decay = 0.1, .grad_clip = 1.0};
  AdamOptimizer optimizer = AdamOptimizer::create(config).value();
  LossScaler scaler;
  ReferenceAdam ref(config, *states);
  for (int step = 0; step < 3; ++step) {
    write_gradients(*states, step, 1.0f);
    const auto [norm, clip] = ref.update(table, stored_gradients(*states), 1.0, 1e-2);
    auto report = states->optimizer_step(optimizer, 1e-2, scaler);
    REQUIRE(report.is_ok());
    CHECK(report->grad_norm == Approx(norm).epsilon(1e-12));
  }
  check_against_reference(*states, ref, 2e-5);
  for (ParamId id = 0; id < table.size(); ++id) {
    const float* master = states->param_states(id).master.f32();
    Tensor view = states->acquire(id).value();
    for (std::int64_t i = 0; i < view.numel(); ++i) CHECK(view.f32()[i] == bf16_reference(master[i]));
    states->release(id);
  }
}

TEST_CASE("fp16 with dynamic loss scaling: unscaled updates, overflow skips without touching state, scale adapts") {
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = DType::kF16, .seed = 9}).value();
  const AdamConfig config{.weight_decay = 0.01};
  AdamOptimizer optimizer = AdamOptimizer::create(config).value();
  LossScaler scaler =
      LossScaler::create({.kind = LossScaling::kDynamic, .initial_scale = 1024, .growth_interval = 2}).value();
  ReferenceAdam ref(config, *states);

  // A clean step under scale 1024: the update is that of the unscaled gradients.
  write_gradients(*states, 0, scaler.scale());
  ref.update(table, stored_gradients(*states), 1024.0, 1e-2);
  auto first = states->optimizer_step(optimizer, 1e-2, scaler);
  REQUIRE(first.is_ok());
  CHECK_FALSE(first->skipped);
  CHECK(first->loss_scale_used == 1024.0);
  check_against_reference(*states, ref, 2e-5);

  // An overflow: one gradient element beyond fp16's range becomes inf on commit.
  const Snapshot before(*states);
  REQUIRE(states->zero_grads().is_ok());
  for (ParamId id = 0; id < table.size(); ++id) {
    Tensor grad = states->grad_buffer(id).value();
    for (std::int64_t i = 0; i < grad.numel(); ++i) grad.f32()[i] += 1024.0f * gradient_value(1, id, i);
    if (id == 3) grad.f32()[17] = 1e6f;
    REQUIRE(states->commit(id).is_ok());
  }
  CHECK(scaler.state().clean_steps == 1);
  auto skipped = states->optimizer_step(optimizer, 1e-2, scaler);
  REQUIRE(skipped.is_ok());
  CHECK(skipped->skipped);
  CHECK_FALSE(std::isfinite(skipped->grad_norm));
  CHECK(skipped->loss_scale_used == 1024.0);
  CHECK(Snapshot(*states) == before);  // master, m, v and the half copy untouched
  CHECK(optimizer.step_count() == 1);  // a skipped step does not count for bias correction
  CHECK(scaler.scale() == 512.0f);
  CHECK(scaler.state().clean_steps == 0);

  // Two clean steps at 512 reach the growth interval: the scale doubles back to 1024.
  for (int step = 2; step < 4; ++step) {
    write_gradients(*states, step, scaler.scale());
    ref.update(table, stored_gradients(*states), 512.0, 1e-2);
    auto report = states->optimizer_step(optimizer, 1e-2, scaler);
    REQUIRE(report.is_ok());
    CHECK_FALSE(report->skipped);
    CHECK(report->loss_scale_used == 512.0);
  }
  CHECK(optimizer.step_count() == 3);
  CHECK(scaler.scale() == 1024.0f);
  check_against_reference(*states, ref, 2e-5);
}

TEST_CASE("non-finite gradients without dynamic scaling, or at the minimum scale, are an error and change nothing") {
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  SECTION("bf16 without loss scaling") {
    auto states = ReplicatedStates::create(table, *device, {.precision = DType::kBF16}).value();
    AdamOptimizer optimizer = AdamOptimizer::create({}).value();
    LossScaler scaler;
    write_gradients(*states, 0, 1.0f);
    REQUIRE(states->optimizer_step(optimizer, 1e-3, scaler).is_ok());
    REQUIRE(states->zero_grads().is_ok());
    Tensor grad = states->grad_buffer(0).value();
    grad.f32()[4] = std::numeric_limits<float>::quiet_NaN();
    REQUIRE(states->commit(0).is_ok());
    const Snapshot before(*states);
    auto report = states->optimizer_step(optimizer, 1e-3, scaler);
    REQUIRE_FALSE(report.is_ok());
    CHECK(report.status().message().starts_with("gradients became non-finite (NaN/inf) at step 2"));
    CHECK(Snapshot(*states) == before);
    CHECK(optimizer.step_count() == 1);
  }
  SECTION("fp16 with the dynamic scale already at its minimum") {
    auto states = ReplicatedStates::create(table, *device, {.precision = DType::kF16}).value();
    AdamOptimizer optimizer = AdamOptimizer::create({}).value();
    LossScaler scaler = LossScaler::create({.kind = LossScaling::kDynamic, .initial_scale = 1}).value();
    write_gradients(*states, 0, 1.0f);
    REQUIRE(states->zero_grads().is_ok());
    Tensor grad = states->grad_buffer(2).value();
    grad.f32()[0] = 1e9f;
    REQUIRE(states->commit(2).is_ok());
    auto report = states->optimizer_step(optimizer, 1e-3, scaler);
    REQUIRE_FALSE(report.is_ok());
    CHECK(report.status().message().find("at step 1 even at the minimum loss scale 1") != std::string::npos);
  }
}

TEST_CASE("invalid optimizer settings and rates are refused naming the field") {
  auto message = [](AdamConfig config) {
    auto optimizer = AdamOptimizer::create(config);
    REQUIRE_FALSE(optimizer.is_ok());
    CHECK(optimizer.status().code() == ErrorCode::kInvalidArgument);
    return optimizer.status().message();
  };
  CHECK(message({.beta1 = 1.0}) == "optimizer.beta1: 1 is outside [0, 1)");
  CHECK(message({.beta2 = -0.1}) == "optimizer.beta2: -0.1 is outside [0, 1)");
  CHECK(message({.eps = 0}).starts_with("optimizer.eps: 0 "));
  CHECK(message({.weight_decay = -1}).starts_with("optimizer.weight_decay: -1 "));
  CHECK(message({.grad_clip = -1}).starts_with("optimizer.grad_clip: -1 "));

  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {}).value();
  AdamOptimizer optimizer = AdamOptimizer::create({}).value();
  LossScaler scaler;
  write_gradients(*states, 0, 1.0f);
  auto bad_lr = states->optimizer_step(optimizer, std::numeric_limits<double>::infinity(), scaler);
  REQUIRE_FALSE(bad_lr.is_ok());
  CHECK(bad_lr.status().message().starts_with("optimizer step 1: learning rate inf "));
  CHECK_FALSE(optimizer.set_step_count(-1).is_ok());
  REQUIRE(optimizer.set_step_count(41).is_ok());
  CHECK(optimizer.step_count() == 41);
}

TEST_CASE("plan_without_norm is begin_step's plan when nothing depends on the norm, and nullopt otherwise") {
  AdamOptimizer adam = AdamOptimizer::create({.weight_decay = 0.1}).value();
  LossScaler none;
  for (int step = 0; step < 3; ++step) {
    const double lr = 1e-3 * (step + 1);
    const std::optional<StepPlan> early = adam.plan_without_norm(lr, none);
    REQUIRE(early.has_value());
    CHECK(adam.step_count() == step);  // changes nothing
    const StepPlan plan = adam.begin_step(lr, 4.0 * (step + 1), none).value();
    CHECK(early->apply);
    CHECK(early->same_update(plan));
    CHECK(early->step == plan.step);
    CHECK(early->step == step + 1);
    CHECK(early->lr == plan.lr);
    CHECK(early->grad_scale == plan.grad_scale);
    CHECK(early->report.clip_coef == 1.0);
    // The kernel's hyper-parameters follow from the plan alone: the same for both.
    for (const bool decays : {false, true}) {
      const kernels::AdamHyper a = adam.hyper(*early, decays);
      const kernels::AdamHyper b = adam.hyper(plan, decays);
      CHECK((a.lr == b.lr && a.step == b.step && a.grad_scale == b.grad_scale && a.beta1 == b.beta1 &&
             a.beta2 == b.beta2 && a.eps == b.eps && a.weight_decay == b.weight_decay &&
             a.decoupled_weight_decay == b.decoupled_weight_decay));
      CHECK(a.weight_decay == (decays ? 0.1 : 0.0));
    }
  }
  // Clipping needs the norm; so does dynamic loss scaling (a step may be skipped); a bad rate is begin_step's error.
  CHECK_FALSE(AdamOptimizer::create({.grad_clip = 1.0}).value().plan_without_norm(1e-3, none).has_value());
  LossScaler dynamic = LossScaler::create({.kind = LossScaling::kDynamic, .initial_scale = 1024}).value();
  CHECK_FALSE(adam.plan_without_norm(1e-3, dynamic).has_value());
  CHECK_FALSE(adam.plan_without_norm(-1.0, none).has_value());
}

}  // namespace
}  // namespace zinf::optim
