// Linear and TiledLinear: a layer split into tiles along the output features gives the untiled
// layer's results (up to fp32 rounding), acquires one tile at a time, and names its tiles.
#include "libengine/model/tiled_linear.h"

#include <cmath>
#include <random>

#include "libengine/device/cpu_ops.h"
#include "tests/catch.h"
#include "tests/unit/model/model_test_support.h"

namespace zinf::model {
namespace {

using testing::RecordingGrads;
using testing::RecordingParams;

std::vector<float> random_vector(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

TEST_CASE("TiledLinear equals Linear, forward and backward, for even and uneven tile splits") {
  const std::int64_t rows = 6, in = 5, out = 11;  // 11 features: uneven over 3 and 4 tiles
  std::mt19937 rng(7);
  const std::vector<float> weight = random_vector(out * in, rng), bias = random_vector(out, rng);
  std::vector<float> inp = random_vector(rows * in, rng), dout = random_vector(rows * out, rng);
  device::CpuOps ops;
  const Tensor inp_t(inp.data(), DType::kF32, Shape{rows, in});
  const Tensor dout_t(dout.data(), DType::kF32, Shape{rows, out});

  // Reference computed in fp64 here, independent of the kernels.
  std::vector<double> ref_out(rows * out), ref_dinp(rows * in, 0.0), ref_dw(out * in, 0.0), ref_db(out, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < out; ++o) {
      double acc = bias[o];
      for (std::int64_t c = 0; c < in; ++c) acc += static_cast<double>(inp[r * in + c]) * weight[o * in + c];
      ref_out[r * out + o] = acc;
      ref_db[o] += dout[r * out + o];
      for (std::int64_t c = 0; c < in; ++c) {
        ref_dinp[r * in + c] += static_cast<double>(dout[r * out + o]) * weight[o * in + c];
        ref_dw[o * in + c] += static_cast<double>(dout[r * out + o]) * inp[r * in + c];
      }
    }
  }

  for (std::int64_t tiling : {1, 3, 4, 11}) {
    INFO("tiling " << tiling);
    ParamTable table;
    TiledLinear layer(table, "mlp.fc", in, out, /*bias=*/true, 1, 0.02f, tiling);
    REQUIRE(layer.tiling() == tiling);
    REQUIRE(table.size() == 2 * tiling);
    REQUIRE(table.total_numel() == out * in + out);
    if (tiling == 1) {
      CHECK(table[0].name == "mlp.fc.weight");
      CHECK(table[1].name == "mlp.fc.bias");
    } else {
      CHECK(table[2].name == "mlp.fc.weight.tile1");
      CHECK(table[3].name == "mlp.fc.bias.tile1");
    }
    RecordingParams params(table);
    RecordingGrads grads(table);
    std::map<std::string, std::vector<double>> whole;
    whole["mlp.fc.weight"].assign(weight.begin(), weight.end());
    whole["mlp.fc.bias"].assign(bias.begin(), bias.end());
    testing::set_params_by_name(table, params, whole);

    std::vector<float> result(rows * out, -1.0f), dinp(rows * in, 123.0f);
    REQUIRE(layer.forward(ops, params, Tensor(result.data(), DType::kF32, Shape{rows, out}), inp_t).is_ok());
    REQUIRE(layer
                .backward(ops, params, grads, Tensor(dinp.data(), DType::kF32, Shape{rows, in}),
                          device::GradMode::kOverwrite, dout_t, inp_t)
                .is_ok());
    CHECK(params.max_held <= 2);  // one tile's weight and bias at a time
    CHECK(params.still_held() == 0);
    CHECK(params.double_acquires == 0);
    for (ParamId id = 0; id < table.size(); ++id) CHECK(grads.commits(id) == 1);
    const auto g = testing::grads_by_name(table, grads);
    std::vector<float> dw(g.at("mlp.fc.weight").begin(), g.at("mlp.fc.weight").end());
    std::vector<float> db(g.at("mlp.fc.bias").begin(), g.at("mlp.fc.bias").end());
    CHECK(max_abs_diff(result, std::vector<float>(ref_out.begin(), ref_out.end())) < 1e-5);
    CHECK(max_abs_diff(dinp, std::vector<float>(ref_dinp.begin(), ref_dinp.end())) < 1e-5);  // 123 overwritten
    CHECK(max_abs_diff(dw, std::vector<float>(ref_dw.begin(), ref_dw.end())) < 1e-5);
    CHECK(max_abs_diff(db, std::vector<float>(ref_db.begin(), ref_db.end())) < 1e-5);

    // kAccumulate adds to what dinp held.
    std::vector<float> dinp_acc(rows * in, 1.0f);
    grads.reset();
    REQUIRE(layer
                .backward(ops, params, grads, Tensor(dinp_acc.data(), DType::kF32, Shape{rows, in}),
                          device::GradMode::kAccumulate, dout_t, inp_t)
                .is_ok());
    for (std::size_t i = 0; i < dinp_acc.size(); ++i) CHECK(dinp_acc[i] == Approx(1.0 + ref_dinp[i]).margin(1e-5));
  }
}

TEST_CASE("A shared Linear adds to the owner's gradient without committing it") {
  ParamTable table;
  const ParamId owned = table.add({.name = "wte", .shape = Shape{4, 3}, .group = 0});
  const Linear head = Linear::shared(owned, 3, 4);
  RecordingParams params(table);
  RecordingGrads grads(table);
  std::fill(params.values(owned).begin(), params.values(owned).end(), 0.5f);
  std::vector<float> inp(2 * 3, 1.0f), out(2 * 4), dout(2 * 4, 1.0f), dinp(2 * 3);
  device::CpuOps ops;
  const Tensor inp_t(inp.data(), DType::kF32, Shape{2, 3});
  REQUIRE(head.forward(ops, params, Tensor(out.data(), DType::kF32, Shape{2, 4}), 0, inp_t).is_ok());
  CHECK(out[0] == Approx(1.5));
  REQUIRE(head.backward(ops, params, grads, Tensor(dinp.data(), DType::kF32, Shape{2, 3}), device::GradMode::kOverwrite,
                        Tensor(dout.data(), DType::kF32, Shape{2, 4}), 0, inp_t)
              .is_ok());
  CHECK(grads.commits(owned) == 0);
  CHECK(grads.grad(owned)[0] == Approx(2.0));  // two rows of dout·inp = 1
  CHECK(dinp[0] == Approx(2.0));               // four outputs × 0.5
}

}  // namespace
}  // namespace zinf::model
