// ReplicatedStates (ZeRO-0) on a budgeted CPU device: acquire hands out the ParamTable's initial
// values (exactly under fp32, rounded to the half format in mixed precision, checked against a
// rounding reference written here in fp64), gradients accumulate and round correctly, the device
// tier holds exactly the bytes state_bytes() reports, the workspace pool stops growing once warm,
// and a budget too small names the state that did not fit.
#include "libengine/zero/replicated_states.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/convert.h"
#include "libengine/device/cpu_device.h"
#include "tests/catch.h"

namespace zinf::zero {
namespace {

using model::ParamId;
using model::ParamInfo;
using model::ParamInit;
using model::ParamTable;

ParamTable make_table() {
  ParamTable table;
  table.add(
      ParamInfo{.name = "wte", .shape = Shape({37, 5}), .group = 0, .init = ParamInit::kNormal, .init_std = 0.02f});
  table.add(
      ParamInfo{.name = "ln.weight", .shape = Shape({5}), .group = 1, .init = ParamInit::kOnes, .weight_decay = false});
  table.add(
      ParamInfo{.name = "ln.bias", .shape = Shape({5}), .group = 1, .init = ParamInit::kZeros, .weight_decay = false});
  table.add(ParamInfo{
      .name = "fc.weight", .shape = Shape({3, 17}), .group = 1, .init = ParamInit::kNormal, .init_std = 1.5f});
  return table;
}

// Round-to-nearest-even of x to a binary format with `precision` significant bits, smallest normal
// exponent `min_exponent` and largest finite value `max_finite`, computed in fp64 (independent of
// the bit-twiddling kernels under test). Values whose rounded magnitude exceeds max_finite become inf.
double round_reference(double x, int precision, int min_exponent, double max_finite) {
  if (x == 0 || !std::isfinite(x)) return x;
  int exponent = 0;
  std::frexp(x, &exponent);  // x = f * 2^exponent, f in [0.5, 1)
  const int lead = std::max(exponent - 1, min_exponent);
  const double quantum = std::ldexp(1.0, lead - (precision - 1));
  const double rounded = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(rounded) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return rounded;
}

float half_reference(DType precision, float x) {
  if (precision == DType::kBF16) {
    return static_cast<float>(round_reference(x, 8, -126, std::ldexp(255.0, 120)));  // (2 - 2^-7) * 2^127
  }
  return static_cast<float>(round_reference(x, 11, -14, 65504.0));
}

std::vector<float> init_values(const ParamTable& table, std::uint64_t seed, ParamId id) {
  std::vector<float> values(static_cast<std::size_t>(table[id].numel));
  table.init_values(seed, id, 0, values);
  return values;
}

std::uint64_t sum_state_bytes(const ReplicatedStates& states) {
  std::uint64_t total = 0;
  for (const auto& state : states.state_bytes()) total += state.bytes;
  return total;
}

TEST_CASE("fp32 states: acquire returns the master copy itself, holding the table's initial values") {
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = DType::kF32, .seed = 7});
  REQUIRE(states.is_ok());
  std::vector<NamedArray> arrays = (*states)->checkpoint_arrays().value();
  for (ParamId id = 0; id < table.size(); ++id) {
    auto view = (*states)->acquire(id);
    REQUIRE(view.is_ok());
    CHECK(view->dtype() == DType::kF32);
    CHECK(view->shape() == table[id].shape);
    CHECK(reinterpret_cast<std::uintptr_t>(view->data()) % 64 == 0);
    // Zero-copy: the view is the checkpoint's master array.
    CHECK(view->f32() == arrays[static_cast<std::size_t>(id)].values.data());
    const std::vector<float> expected = init_values(table, 7, id);
    CHECK(std::memcmp(view->f32(), expected.data(), expected.size() * 4) == 0);
    (*states)->release(id);
  }
  // Spot-check the kinds of init: ones and zeros are exact, the normal has roughly its std.
  CHECK(arrays[1].values[3] == 1.0f);
  CHECK(arrays[2].values[4] == 0.0f);
  double sum_sq = 0;
  for (float x : arrays[3].values) sum_sq += double(x) * x;
  CHECK(std::sqrt(sum_sq / 51) == Approx(1.5).epsilon(0.4));
}

TEST_CASE("fp32 gradients: the model adds into the storage, a second use accumulates, zero_grads clears") {
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = DType::kF32}).value();
  REQUIRE(states->zero_grads().is_ok());
  auto grad = states->grad_buffer(3);
  REQUIRE(grad.is_ok());
  CHECK(reinterpret_cast<std::uintptr_t>(grad->data()) % 64 == 0);
  for (std::int64_t i = 0; i < grad->numel(); ++i) {
    CHECK(grad->f32()[i] == 0.0f);
    grad->f32()[i] += 0.25f * static_cast<float>(i);
  }
  REQUIRE(states->commit(3).is_ok());
  auto again = states->grad_buffer(3).value();
  for (std::int64_t i = 0; i < again.numel(); ++i) again.f32()[i] += 1.0f;
  REQUIRE(states->commit(3).is_ok());
  const ParamStates p = states->param_states(3);
  REQUIRE(p.grad.dtype() == DType::kF32);
  CHECK(p.param_half.data() == nullptr);
  for (std::int64_t i = 0; i < p.grad.numel(); ++i) CHECK(p.grad.f32()[i] == 0.25f * static_cast<float>(i) + 1.0f);
  REQUIRE(states->zero_grads().is_ok());
  for (std::int64_t i = 0; i < p.grad.numel(); ++i) CHECK(p.grad.f32()[i] == 0.0f);
}

TEST_CASE("mixed precision: acquire returns the initial values rounded to the half format") {
  const DType precision = GENERATE(DType::kBF16, DType::kF16);
  INFO(dtype_name(precision));
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = precision, .seed = 3}).value();
  CHECK(states->precision() == precision);
  std::vector<NamedArray> arrays = states->checkpoint_arrays().value();
  for (ParamId id = 0; id < table.size(); ++id) {
    const std::vector<float> expected = init_values(table, 3, id);
    // The fp32 master holds the values exactly.
    CHECK(std::memcmp(arrays[static_cast<std::size_t>(id)].values.data(), expected.data(), expected.size() * 4) == 0);
    auto view = states->acquire(id);
    REQUIRE(view.is_ok());
    CHECK(view->dtype() == DType::kF32);
    CHECK(view->shape() == table[id].shape);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      INFO(table[id].name << "[" << i << "] = " << expected[i]);
      CHECK(view->f32()[i] == half_reference(precision, expected[i]));
    }
    states->release(id);
  }
}

TEST_CASE("mixed precision: commit rounds the gradient into half storage and a second use accumulates") {
  const DType precision = GENERATE(DType::kBF16, DType::kF16);
  INFO(dtype_name(precision));
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = precision}).value();
  REQUIRE(states->zero_grads().is_ok());
  // Ties, values just off ties, a subnormal of each format, and values around the fp16 maximum.
  const std::vector<float> first = {
      1.0f + 0x1p-8f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -2.7182818f, 0x1p-20f, 65519.0f, 65520.0f, 70000.0f, 1e-3f,
      -0.1f};
  std::vector<float> values(51);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = first[i % first.size()] * (i < first.size() ? 1.0f : 0.5f);

  auto grad = states->grad_buffer(3).value();
  REQUIRE(grad.numel() == 51);
  for (std::int64_t i = 0; i < grad.numel(); ++i) {
    CHECK(grad.f32()[i] == 0.0f);
    grad.f32()[i] += values[static_cast<std::size_t>(i)];
  }
  REQUIRE(states->commit(3).is_ok());
  const ParamStates p = states->param_states(3);
  REQUIRE(p.grad.dtype() == precision);
  std::vector<float> stored(51);
  kernels::cpu::half_to_f32(precision == DType::kF16 ? kernels::HalfFormat::kF16 : kernels::HalfFormat::kBF16,
                            p.grad.half(), stored.data(), stored.size());
  for (std::size_t i = 0; i < stored.size(); ++i) {
    INFO("element " << i << " = " << values[i]);
    CHECK(stored[i] == half_reference(precision, values[i]));
  }
  if (precision == DType::kF16) CHECK(std::isinf(stored[7]));  // 70000 overflows fp16

  // The second buffer starts from the rounded gradient so far.
  auto again = states->grad_buffer(3).value();
  for (std::int64_t i = 0; i < again.numel(); ++i) {
    const auto index = static_cast<std::size_t>(i);
    if (std::isfinite(stored[index])) CHECK(again.f32()[i] == stored[index]);
    again.f32()[i] += 1.0f;
  }
  REQUIRE(states->commit(3).is_ok());
  kernels::cpu::half_to_f32(precision == DType::kF16 ? kernels::HalfFormat::kF16 : kernels::HalfFormat::kBF16,
                            p.grad.half(), stored.data(), stored.size());
  CHECK(stored[3] == half_reference(precision, half_reference(precision, values[3]) + 1.0f));
  REQUIRE(states->zero_grads().is_ok());
  kernels::cpu::half_to_f32(precision == DType::kF16 ? kernels::HalfFormat::kF16 : kernels::HalfFormat::kBF16,
                            p.grad.half(), stored.data(), stored.size());
  for (float x : stored) CHECK(x == 0.0f);
}

TEST_CASE("the device tier holds exactly state_bytes(), and the workspace pool stops growing once warm") {
  const DType precision = GENERATE(DType::kF32, DType::kBF16, DType::kF16);
  INFO(dtype_name(precision));
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = precision}).value();

  // Padded element count: each parameter rounded up to 32 elements.
  std::uint64_t padded = 0;
  for (const ParamInfo& info : table.params()) padded += static_cast<std::uint64_t>((info.numel + 31) / 32 * 32);
  const std::uint64_t storage = padded * dtype_size_bytes(precision);
  const auto bytes = states->state_bytes();
  REQUIRE(bytes.size() == 6);
  CHECK((bytes[0].state == "params" && bytes[0].bytes == storage));
  CHECK((bytes[1].state == "grads" && bytes[1].bytes == storage));
  CHECK((bytes[2].state == "master_params" && bytes[2].bytes == (precision == DType::kF32 ? 0 : padded * 4)));
  CHECK((bytes[3].state == "adam_m" && bytes[3].bytes == padded * 4));
  CHECK((bytes[4].state == "adam_v" && bytes[4].bytes == padded * 4));
  CHECK((bytes[5].state == "workspace" && bytes[5].bytes == 0));
  CHECK(device->memory().usage().current_bytes == sum_state_bytes(*states));

  // One "step": forward acquires every parameter (two at a time), backward hands out gradients.
  auto run_step = [&] {
    REQUIRE(states->zero_grads().is_ok());
    for (ParamId id = 0; id + 1 < table.size(); id += 2) {
      auto a = states->acquire(id);
      auto b = states->acquire(id + 1);
      REQUIRE((a.is_ok() && b.is_ok()));
      states->release(id);
      states->release(id + 1);
    }
    for (ParamId id = table.size() - 1; id >= 0; --id) {
      auto grad = states->grad_buffer(id);
      REQUIRE(grad.is_ok());
      REQUIRE(states->commit(id).is_ok());
    }
  };
  run_step();
  const std::uint64_t warm_bytes = device->memory().usage().current_bytes;
  CHECK(warm_bytes == sum_state_bytes(*states));
  if (precision != DType::kF32) {
    // At most two parameters were ever widened at once: the pool is bounded by them.
    CHECK(states->state_bytes()[5].bytes > 0);
  } else {
    CHECK(states->state_bytes()[5].bytes == 0);
  }
  run_step();
  run_step();
  CHECK(device->memory().usage().current_bytes == warm_bytes);
  CHECK(sum_state_bytes(*states) == warm_bytes);
  states.reset();
  CHECK(device->memory().usage().current_bytes == 0);
}

TEST_CASE("a budget too small for the states fails naming the state, a full tier fails acquire naming the workspace") {
  const ParamTable table = make_table();
  {
    auto device = device::make_cpu_device({.memory_budget_bytes = 1024});
    auto states = ReplicatedStates::create(table, *device, {.precision = DType::kBF16});
    REQUIRE_FALSE(states.is_ok());
    CHECK(states.status().code() == ErrorCode::kOutOfMemory);
    INFO(states.status().message());
    // params (bf16) fit in 1 KiB (320 elements * 2 bytes = 640), the grads do not.
    CHECK(states.status().message().find("bf16 grads") != std::string::npos);
    CHECK(device->memory().usage().current_bytes == 0);  // nothing left allocated
  }
  // Exactly the states' size: creation fits, the first workspace does not.
  std::uint64_t states_bytes = 0;
  {
    auto unbounded = device::make_cpu_device({});
    states_bytes = sum_state_bytes(*ReplicatedStates::create(table, *unbounded, {.precision = DType::kF16}).value());
  }
  auto device = device::make_cpu_device({.memory_budget_bytes = states_bytes});
  auto states = ReplicatedStates::create(table, *device, {.precision = DType::kF16});
  REQUIRE(states.is_ok());
  auto view = (*states)->acquire(3);
  REQUIRE_FALSE(view.is_ok());
  CHECK(view.status().code() == ErrorCode::kOutOfMemory);
  INFO(view.status().message());
  CHECK(view.status().message().find("fp32 workspace for fc.weight") != std::string::npos);
  // Nothing was acquired: a retry fails the same way instead of tripping the already-acquired check.
  CHECK_FALSE((*states)->acquire(3).is_ok());
}

TEST_CASE("checkpoint arrays: master, then m, then v per parameter, push_checkpoint_arrays re-rounds the master") {
  const ParamTable table = make_table();
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {.precision = DType::kBF16}).value();
  std::vector<NamedArray> arrays = states->checkpoint_arrays().value();
  REQUIRE(arrays.size() == 12);
  CHECK(arrays[0].name == "master/wte");
  CHECK(arrays[3].name == "master/fc.weight");
  CHECK(arrays[4].name == "adam_m/wte");
  CHECK(arrays[11].name == "adam_v/fc.weight");
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    CHECK(arrays[i].values.size() == static_cast<std::size_t>(table[static_cast<ParamId>(i % 4)].numel));
  }
  const ParamStates p = states->param_states(1);
  CHECK(arrays[5].values.data() == p.exp_avg.f32());
  CHECK(arrays[9].values.data() == p.exp_avg_sq.f32());
  CHECK(arrays[1].values.data() == p.master.f32());

  // A load writes the master; the working copy follows only after push_checkpoint_arrays().
  for (std::size_t i = 0; i < arrays[3].values.size(); ++i)
    arrays[3].values[i] = 1.0f + static_cast<float>(i) * 0x1p-9f;
  {
    auto stale = states->acquire(3).value();
    CHECK(stale.f32()[0] != 1.0f);  // still the initial normal values
    states->release(3);
  }
  REQUIRE(states->push_checkpoint_arrays().is_ok());
  auto view = states->acquire(3).value();
  for (std::size_t i = 0; i < arrays[3].values.size(); ++i) {
    CHECK(view.f32()[i] == half_reference(DType::kBF16, arrays[3].values[i]));
  }
  CHECK(view.f32()[1] == 1.0f);            // 1 + 2^-9 is a tie: rounds to even
  CHECK(view.f32()[3] == 1.0f + 0x1p-7f);  // 1 + 3 * 2^-9 is a tie: rounds up to even
  states->release(3);
}

TEST_CASE("an empty parameter table is refused") {
  const ParamTable table;
  auto device = device::make_cpu_device({});
  auto states = ReplicatedStates::create(table, *device, {});
  REQUIRE_FALSE(states.is_ok());
  CHECK(states.status().code() == ErrorCode::kInvalidArgument);
  CHECK(states.status().message().find("empty") != std::string::npos);
}

}  // namespace
}  // namespace zinf::zero
