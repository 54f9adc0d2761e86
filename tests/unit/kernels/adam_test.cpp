// CPU Adam/AdamW: ten steps against an fp64 reference written here, every instruction-set variant
// and thread count bit for bit, odd lengths, the bf16/fp16 parameter copy, Adam vs AdamW, the
// gradient scale, PyTorch-produced fixtures (tests/fixtures/adam, made by
// scripts/fixtures/make_adam_fixture.py), and the sum of squares for gradient clipping.
#include "kernels/adam.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using test_support::supported_isas;
using test_support::uniform_values;

using cpu::Isa;

enum class GradFormat { kF32, kBF16, kF16 };

const char* grad_format_name(GradFormat format) {
  switch (format) {
    case GradFormat::kF32:
      return "fp32";
    case GradFormat::kBF16:
      return "bf16";
    case GradFormat::kF16:
      return "fp16";
  }
  return "?";
}

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// The optimizer state of one slice, with the gradient kept in every format.
struct State {
  std::vector<float> param;
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
  std::vector<std::uint16_t> param_half;

  explicit State(std::vector<float> initial)
      : param(std::move(initial)), exp_avg(param.size(), 0.0f), exp_avg_sq(param.size(), 0.0f) {}

  AdamSlice slice(bool with_half = false, HalfFormat half_format = HalfFormat::kBF16) {
    AdamSlice s;
    s.param = param.data();
    s.exp_avg = exp_avg.data();
    s.exp_avg_sq = exp_avg_sq.data();
    s.n = param.size();
    if (with_half) {
      param_half.assign(param.size(), 0xDEADu);
      s.param_half = param_half.data();
      s.param_half_format = half_format;
    }
    return s;
  }
};

struct Gradient {
  GradFormat format = GradFormat::kF32;
  std::vector<float> f32;  // the values the step uses (widened when stored as 16 bits)
  std::vector<std::uint16_t> half;

  Gradient(GradFormat grad_format, const std::vector<float>& values) : format(grad_format) {
    if (format == GradFormat::kF32) {
      f32 = values;
      return;
    }
    const HalfFormat half_format = format == GradFormat::kBF16 ? HalfFormat::kBF16 : HalfFormat::kF16;
    half.resize(values.size());
    cpu::f32_to_half(Isa::kScalar, half_format, values.data(), half.data(), values.size());
    f32.resize(values.size());
    cpu::half_to_f32(Isa::kScalar, half_format, half.data(), f32.data(), values.size());
  }
};

void step(Isa isa, const AdamHyper& hyper, const AdamSlice& slice, const Gradient& grad, int threads) {
  switch (grad.format) {
    case GradFormat::kF32:
      cpu::adam_step(isa, hyper, slice, grad.f32.data(), threads);
      return;
    case GradFormat::kBF16:
      cpu::adam_step(isa, hyper, slice, grad.half.data(), HalfFormat::kBF16, threads);
      return;
    case GradFormat::kF16:
      cpu::adam_step(isa, hyper, slice, grad.half.data(), HalfFormat::kF16, threads);
      return;
  }
}

// ---- fp64 reference: the formulas of torch.optim.Adam / AdamW, straight ------------------------

struct Reference {
  std::vector<double> param;
  std::vector<double> exp_avg;
  std::vector<double> exp_avg_sq;

  explicit Reference(const std::vector<float>& initial)
      : param(initial.begin(), initial.end()), exp_avg(initial.size(), 0.0), exp_avg_sq(initial.size(), 0.0) {}

  void step(const AdamHyper& h, const std::vector<float>& grad) {
    const double t = static_cast<double>(h.step);
    const double bias_correction1 = 1.0 - std::pow(h.beta1, t);
    const double bias_correction2 = 1.0 - std::pow(h.beta2, t);
    for (std::size_t i = 0; i < param.size(); ++i) {
      double g = static_cast<double>(grad[i]) * h.grad_scale;
      if (h.decoupled_weight_decay) {
        param[i] *= 1.0 - h.lr * h.weight_decay;
      } else {
        g += h.weight_decay * param[i];
      }
      exp_avg[i] = h.beta1 * exp_avg[i] + (1.0 - h.beta1) * g;
      exp_avg_sq[i] = h.beta2 * exp_avg_sq[i] + (1.0 - h.beta2) * g * g;
      const double denom = std::sqrt(exp_avg_sq[i]) / std::sqrt(bias_correction2) + h.eps;
      param[i] -= h.lr / bias_correction1 * exp_avg[i] / denom;
    }
  }
};

// |got - want| <= rel * |want| + floor, element by element; reports the first few misses.
std::size_t count_misses(const char* what, const std::vector<float>& got, const std::vector<double>& want, double rel,
                         double floor) {
  std::size_t misses = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= rel * std::fabs(want[i]) + floor) && misses++ < 3) {
      UNSCOPED_INFO(what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " (error " << error << ")");
    }
  }
  return misses;
}

std::vector<float> normal_values(std::size_t n, float scale, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> values(n);
  for (auto& x : values) x = dist(rng);
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (bits_of(a[i]) != bits_of(b[i])) return false;
  }
  return true;
}

// ---- Tests ---------------------------------------------------------------------------------------

TEST_CASE("adam: ten steps match an fp64 reference", "[adam]") {
  constexpr std::size_t kN = 1031;  // odd: every variant ends in a tail
  for (bool decoupled : {true, false}) {
    for (GradFormat grad_format : {GradFormat::kF32, GradFormat::kBF16, GradFormat::kF16}) {
      for (Isa isa : supported_isas()) {
        INFO((decoupled ? "AdamW" : "Adam") << " grads " << grad_format_name(grad_format) << " " << cpu::isa_name(isa));
        std::mt19937_64 rng(17);
        const std::vector<float> initial = uniform_values(kN, -1.0f, 1.0f, rng);
        State state(initial);
        Reference reference(initial);
        AdamHyper hyper;
        hyper.lr = 1e-3;
        hyper.weight_decay = 0.01;
        hyper.decoupled_weight_decay = decoupled;
        hyper.grad_scale = 0.37;
        for (std::int64_t t = 1; t <= 10; ++t) {
          hyper.step = t;
          const Gradient grad(grad_format, normal_values(kN, 2.0f, rng));
          step(isa, hyper, state.slice(), grad, 1);
          reference.step(hyper, grad.f32);
        }
        CHECK(count_misses("param", state.param, reference.param, 1e-6, 1e-6 * hyper.lr) == 0);
        CHECK(count_misses("exp_avg", state.exp_avg, reference.exp_avg, 1e-6, 1e-7) == 0);
        CHECK(count_misses("exp_avg_sq", state.exp_avg_sq, reference.exp_avg_sq, 1e-6, 1e-12) == 0);
      }
    }
  }
}

TEST_CASE("adam: every variant and thread count gives the same bits", "[adam]") {
  const std::vector<Isa> isas = supported_isas();
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{15},
                        std::size_t{16}, std::size_t{17}, std::size_t{31}, std::size_t{33}, std::size_t{100},
                        std::size_t{1000}, std::size_t{70'001}, std::size_t{200'003}}) {
    for (GradFormat grad_format : {GradFormat::kF32, GradFormat::kBF16, GradFormat::kF16}) {
      for (int half_choice = 0; half_choice < 3; ++half_choice) {
        const bool with_half = half_choice != 0;
        const HalfFormat half_format = half_choice == 1 ? HalfFormat::kBF16 : HalfFormat::kF16;
        std::mt19937_64 rng(n + 3);
        const std::vector<float> initial = uniform_values(n, -2.0f, 2.0f, rng);
        const std::vector<float> m0 = normal_values(n, 0.1f, rng);
        const std::vector<float> v0 = uniform_values(n, 0.0f, 0.01f, rng);
        const Gradient grad(grad_format, normal_values(n, 1.0f, rng));
        // Every loop the vector variants specialise: a gradient scale of 1 or not, and AdamW's
        // decay, Adam's L2 term or no weight decay.
        for (const double grad_scale : {0.8, 1.0}) {
          for (int decay_choice = 0; decay_choice < 3; ++decay_choice) {
            AdamHyper hyper;
            hyper.lr = 1e-2;
            hyper.weight_decay = decay_choice == 2 ? 0.0 : 0.1;
            hyper.decoupled_weight_decay = decay_choice != 1;
            hyper.step = 3;
            hyper.grad_scale = grad_scale;

            State expected(initial);
            expected.exp_avg = m0;
            expected.exp_avg_sq = v0;
            step(Isa::kScalar, hyper, expected.slice(with_half, half_format), grad, 1);
            for (Isa isa : isas) {
              for (int threads : {1, 2, 3}) {
                INFO("n=" << n << " grads " << grad_format_name(grad_format) << " half " << half_choice << " "
                          << cpu::isa_name(isa) << " threads " << threads << " grad_scale " << grad_scale << " decay "
                          << decay_choice);
                State got(initial);
                got.exp_avg = m0;
                got.exp_avg_sq = v0;
                step(isa, hyper, got.slice(with_half, half_format), grad, threads);
                REQUIRE(same_bits(got.param, expected.param));
                REQUIRE(same_bits(got.exp_avg, expected.exp_avg));
                REQUIRE(same_bits(got.exp_avg_sq, expected.exp_avg_sq));
                REQUIRE(got.param_half == expected.param_half);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("adam: the half copy is the conversion of the fp32 result", "[adam]") {
  for (HalfFormat half_format : {HalfFormat::kBF16, HalfFormat::kF16}) {
    for (Isa isa : supported_isas()) {
      INFO(cpu::isa_name(isa) << (half_format == HalfFormat::kBF16 ? " bf16" : " fp16"));
      std::mt19937_64 rng(5);
      const std::size_t n = 4099;
      State state(uniform_values(n, -3.0f, 3.0f, rng));
      const Gradient grad(GradFormat::kF32, normal_values(n, 1.0f, rng));
      AdamHyper hyper;
      step(isa, hyper, state.slice(true, half_format), grad, 2);
      std::vector<std::uint16_t> converted(n);
      cpu::f32_to_half(half_format, state.param.data(), converted.data(), n);
      CHECK(state.param_half == converted);
    }
  }
}

TEST_CASE("adam: Adam and AdamW differ only through weight decay", "[adam]") {
  std::mt19937_64 rng(11);
  const std::size_t n = 777;
  const std::vector<float> initial = uniform_values(n, -1.0f, 1.0f, rng);
  const Gradient grad(GradFormat::kF32, normal_values(n, 1.0f, rng));
  auto run = [&](bool decoupled, double weight_decay) {
    State state(initial);
    AdamHyper hyper;
    hyper.lr = 1e-2;
    hyper.weight_decay = weight_decay;
    hyper.decoupled_weight_decay = decoupled;
    cpu::adam_step(hyper, state.slice(), grad.f32.data());
    return state.param;
  };
  // Without weight decay the two are the same algorithm.
  CHECK(same_bits(run(true, 0.0), run(false, 0.0)));
  // With it, AdamW shrinks every parameter by lr*wd before the step, while Adam's L2 term goes
  // through the moments: on the first step Adam's update is normalised (about lr * sign), so the
  // decay barely shows; AdamW's shows as exactly that factor.
  const std::vector<float> adamw = run(true, 0.5);
  const std::vector<float> adam = run(false, 0.5);
  const std::vector<float> plain = run(true, 0.0);
  CHECK_FALSE(same_bits(adamw, adam));
  std::size_t checked = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // AdamW: p1 = p0*(1 - lr*wd) - update; plain: p0 - update, so the difference is -lr*wd*p0.
    const double decay_shift = static_cast<double>(adamw[i]) - static_cast<double>(plain[i]);
    CHECK(std::fabs(decay_shift - (-1e-2 * 0.5 * static_cast<double>(initial[i]))) <= 1e-6);
    ++checked;
  }
  CHECK(checked == n);
}

TEST_CASE("adam: grad_scale multiplies the gradient before use", "[adam]") {
  std::mt19937_64 rng(23);
  const std::size_t n = 2049;
  const std::vector<float> initial = uniform_values(n, -1.0f, 1.0f, rng);
  const std::vector<float> raw = normal_values(n, 1.0f, rng);
  std::vector<float> scaled(n);
  for (std::size_t i = 0; i < n; ++i) scaled[i] = raw[i] * 1024.0f;  // a loss scale of 2^10: exact

  for (bool decoupled : {true, false}) {
    AdamHyper hyper;
    hyper.weight_decay = 0.02;
    hyper.decoupled_weight_decay = decoupled;
    State unscaled(initial);
    State with_scale(initial);
    for (std::int64_t t = 1; t <= 3; ++t) {
      hyper.step = t;
      hyper.grad_scale = 1.0;
      cpu::adam_step(hyper, unscaled.slice(), raw.data());
      hyper.grad_scale = 1.0 / 1024.0;
      cpu::adam_step(hyper, with_scale.slice(), scaled.data());
    }
    CHECK(same_bits(unscaled.param, with_scale.param));
    CHECK(same_bits(unscaled.exp_avg, with_scale.exp_avg));
    CHECK(same_bits(unscaled.exp_avg_sq, with_scale.exp_avg_sq));
  }
  // And a scale that is not a power of two changes the step as the reference says.
  State state(initial);
  Reference reference(initial);
  AdamHyper hyper;
  hyper.grad_scale = 0.3;
  cpu::adam_step(hyper, state.slice(), raw.data());
  reference.step(hyper, raw);
  CHECK(count_misses("exp_avg", state.exp_avg, reference.exp_avg, 1e-6, 1e-9) == 0);
  CHECK(count_misses("param", state.param, reference.param, 1e-6, 1e-9) == 0);
}

// ---- PyTorch fixtures ----------------------------------------------------------------------------

nlohmann::json load_fixture(const std::string& name) {
  const std::string path = std::string(ZINF_FIXTURES_DIR) + "/adam/" + name;
  std::ifstream in(path);
  INFO("fixture " << path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<float> floats(const nlohmann::json& array) {
  std::vector<float> values;
  for (const auto& x : array) values.push_back(static_cast<float>(x.get<double>()));
  return values;
}

std::vector<double> doubles(const nlohmann::json& array) {
  std::vector<double> values;
  for (const auto& x : array) values.push_back(x.get<double>());
  return values;
}

TEST_CASE("adam: matches torch.optim fixtures step by step", "[adam][fixture]") {
  for (const char* name : {"adamw_5steps.json", "adam_5steps.json"}) {
    const nlohmann::json fixture = load_fixture(name);
    AdamHyper hyper;
    hyper.lr = fixture.at("lr").get<double>();
    hyper.beta1 = fixture.at("beta1").get<double>();
    hyper.beta2 = fixture.at("beta2").get<double>();
    hyper.eps = fixture.at("eps").get<double>();
    hyper.weight_decay = fixture.at("weight_decay").get<double>();
    hyper.decoupled_weight_decay = fixture.at("decoupled_weight_decay").get<bool>();
    const std::vector<float> initial = floats(fixture.at("initial_param"));
    REQUIRE(initial.size() == fixture.at("params").get<std::size_t>());
    const auto& grads = fixture.at("grads");
    const auto& expected = fixture.at("expected");
    REQUIRE(grads.size() == expected.size());
    for (Isa isa : supported_isas()) {
      INFO(name << " " << cpu::isa_name(isa));
      State state(initial);
      for (std::size_t k = 0; k < grads.size(); ++k) {
        const auto& want = expected[k];
        hyper.step = want.at("step").get<std::int64_t>();
        const std::vector<float> grad = floats(grads[k]);
        cpu::adam_step(isa, hyper, state.slice(), grad.data(), 1);
        INFO("step " << hyper.step);
        // Relative 1e-6, with a floor for values that cancel to near zero.
        CHECK(count_misses("param", state.param, doubles(want.at("param")), 1e-6, 1e-9) == 0);
        CHECK(count_misses("exp_avg", state.exp_avg, doubles(want.at("exp_avg")), 1e-6, 1e-9) == 0);
        CHECK(count_misses("exp_avg_sq", state.exp_avg_sq, doubles(want.at("exp_avg_sq")), 1e-6, 1e-12) == 0);
      }
    }
  }
}

// ---- Sum of squares ------------------------------------------------------------------------------

TEST_CASE("sum_squares: fp64 accuracy, same bits for every variant and thread count", "[sum_squares]") {
  std::mt19937_64 rng(31);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{17}, std::size_t{1000},
                        std::size_t{65'536}, std::size_t{65'537}, std::size_t{300'001}}) {
    const std::vector<float> x = normal_values(n, 3.0f, rng);
    long double exact = 0.0L;
    for (float value : x) exact += static_cast<long double>(value) * static_cast<long double>(value);
    std::vector<std::uint16_t> bf16(n);
    std::vector<std::uint16_t> f16(n);
    cpu::f32_to_bf16(x.data(), bf16.data(), n);
    cpu::f32_to_f16(x.data(), f16.data(), n);
    std::vector<float> bf16_wide(n);
    std::vector<float> f16_wide(n);
    cpu::bf16_to_f32(bf16.data(), bf16_wide.data(), n);
    cpu::f16_to_f32(f16.data(), f16_wide.data(), n);

    const double f32_sum = cpu::sum_squares(Isa::kScalar, x.data(), n, 1);
    const double bf16_sum = cpu::sum_squares(Isa::kScalar, bf16.data(), HalfFormat::kBF16, n, 1);
    const double f16_sum = cpu::sum_squares(Isa::kScalar, f16.data(), HalfFormat::kF16, n, 1);
    INFO("n=" << n);
    CHECK(std::fabs(f32_sum - static_cast<double>(exact)) <= 1e-12 * static_cast<double>(exact));
    // Half inputs sum the widened values.
    CHECK(bf16_sum == cpu::sum_squares(Isa::kScalar, bf16_wide.data(), n, 1));
    CHECK(f16_sum == cpu::sum_squares(Isa::kScalar, f16_wide.data(), n, 1));
    for (Isa isa : supported_isas()) {
      for (int threads : {1, 2, 3, 4}) {
        INFO(cpu::isa_name(isa) << " threads " << threads);
        CHECK(cpu::sum_squares(isa, x.data(), n, threads) == f32_sum);
        CHECK(cpu::sum_squares(isa, bf16.data(), HalfFormat::kBF16, n, threads) == bf16_sum);
        CHECK(cpu::sum_squares(isa, f16.data(), HalfFormat::kF16, n, threads) == f16_sum);
      }
    }
    CHECK(cpu::sum_squares(x.data(), n) == f32_sum);
  }
}

TEST_CASE("sum_squares: inf and NaN reach the result", "[sum_squares]") {
  std::vector<float> x(100'000, 0.5f);
  for (Isa isa : supported_isas()) {
    INFO(cpu::isa_name(isa));
    x[77'777] = std::numeric_limits<float>::infinity();
    CHECK(std::isinf(cpu::sum_squares(isa, x.data(), x.size(), 2)));
    x[77'777] = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(cpu::sum_squares(isa, x.data(), x.size(), 2)));
    std::vector<std::uint16_t> f16(x.size(), 0x3C00u);  // 1.0
    f16[12'345] = 0x7C00u;                              // fp16 overflowed to inf
    CHECK(std::isinf(cpu::sum_squares(isa, f16.data(), HalfFormat::kF16, f16.size(), 2)));
    f16[12'345] = 0x3C00u;
    CHECK(cpu::sum_squares(isa, f16.data(), HalfFormat::kF16, f16.size(), 2) == static_cast<double>(f16.size()));
  }
}

}  // namespace
}  // namespace zinf::kernels
