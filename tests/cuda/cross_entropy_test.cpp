// cuda::cross_entropy_forward/backward against the CPU kernels (kernels/cross_entropy.h): every
// element type, V = 1, odd V (rows start at every alignment, so every head/vector/tail split), a
// GPT-2 sized vocabulary, R = 1, the backward out of place (aligned and misaligned against the
// logits: vector and scalar write paths) and in place (dlogits == logits).
//
// Logits are rounded to `elem` first, so both sides see the same values; the GPU uses expf and an
// fp32 row sum where the CPU uses its own exp (relative error <= 2e-7) and an fp64 sum, so the two
// agree to about 1e-6 relative. Tolerances: the losses (fp32, O(log V)) 1e-5 relative with a floor
// of 1; dlogits 1e-5 (fp32) or 1e-2 (16-bit storage, 8 significant bits in bf16) relative, with an
// absolute floor of dloss / R: the target's (p - 1) cancels when p is near 1, and every other
// element is p * dloss / R, so the floor is the scale of the one-hot term.
#include "kernels/cross_entropy.h"

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

constexpr float kDloss = 1.7f;

class DeviceTargets {
 public:
  explicit DeviceTargets(const std::vector<std::int32_t>& targets) {
    REQUIRE(cudaMalloc(&data_, targets.size() * 4 + 4) == cudaSuccess);
    REQUIRE(cudaMemcpy(data_, targets.data(), targets.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  DeviceTargets(const DeviceTargets&) = delete;
  DeviceTargets& operator=(const DeviceTargets&) = delete;
  ~DeviceTargets() { cudaFree(data_); }
  const std::int32_t* data() const { return static_cast<const std::int32_t*>(data_); }

 private:
  void* data_ = nullptr;
};

void* at(const DeviceArray& array, Elem elem, std::size_t offset) {
  return static_cast<unsigned char*>(array.data()) + offset * elem_bytes(elem);
}

std::vector<float> slice(const std::vector<float>& values, std::size_t offset, std::size_t n) {
  return {values.begin() + static_cast<std::ptrdiff_t>(offset),
          values.begin() + static_cast<std::ptrdiff_t>(offset + n)};
}

void check_cross_entropy(Elem elem, std::int64_t rows, std::int64_t vocab) {
  INFO("elem " << static_cast<int>(elem) << ", R " << rows << " V " << vocab);
  const auto r = static_cast<std::size_t>(rows);
  const auto v = static_cast<std::size_t>(vocab);
  const double rel = elem == Elem::kF32 ? 1e-5 : 1e-2;
  const std::vector<float> logits = round_to(elem, random_values(r * v, r * 31 + v, 3.0f));
  std::mt19937_64 rng(r + v);
  std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
  std::vector<std::int32_t> targets(r);
  for (auto& t : targets) t = static_cast<std::int32_t>(pick(rng));
  const DeviceTargets targets_d(targets);
  DeviceArray logits_d(logits, elem);

  // Forward.
  std::vector<float> losses(r);
  kernels::cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), r, v, 1);
  DeviceArray losses_d(Elem::kF32, r);
  losses_d.poison();
  REQUIRE(kernels::cuda::cross_entropy_forward(elem, losses_d.f32(), logits_d.data(), targets_d.data(), rows, vocab,
                                               nullptr) == 0);
  require_close(losses_d.download(), losses, 1e-5, 1.0);

  // Backward.
  std::vector<float> dlogits(r * v);
  kernels::cpu::cross_entropy_backward(dlogits.data(), logits.data(), targets.data(), kDloss, r, v, 1);
  const double floor = static_cast<double>(kDloss) / static_cast<double>(rows);
  for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // same alignment as logits, then not
    INFO("dlogits offset " << offset);
    DeviceArray dlogits_d(elem, r * v + offset);
    dlogits_d.poison();
    REQUIRE(kernels::cuda::cross_entropy_backward(elem, at(dlogits_d, elem, offset), logits_d.data(), targets_d.data(),
                                                  kDloss, rows, vocab, nullptr) == 0);
    require_close(slice(dlogits_d.download(), offset, r * v), dlogits, rel, floor);
  }
  // In place: the gradient replaces the logits.
  DeviceArray inplace_d(logits, elem);
  REQUIRE(kernels::cuda::cross_entropy_backward(elem, inplace_d.data(), inplace_d.data(), targets_d.data(), kDloss,
                                                rows, vocab, nullptr) == 0);
  require_close(inplace_d.download(), dlogits, rel, floor);
}

TEST_CASE("cuda cross_entropy: forward and backward (out of place and in place) match the CPU",
          "[cuda][cross_entropy]") {
  const std::int64_t shapes[][2] = {
      {1, 1},      // a single logit: loss 0, gradient 0
      {3, 7},      // tiny odd rows: every row at another alignment
      {1, 1000},   // R = 1
      {5, 1541},   // 3 * 512 + 5: a partial last pass over the row
      {33, 8192},  // aligned rows
      {4, 50257},  // GPT-2's vocabulary
      {257, 100},  // many short rows
  };
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (const auto& s : shapes) check_cross_entropy(elem, s[0], s[1]);
  }
}

TEST_CASE("cuda cross_entropy: huge logits give finite losses", "[cuda][cross_entropy]") {
  // Max subtraction: logits of about +-1e4 (after rounding to the format) give finite losses of
  // about 2e4, where a plain exp would overflow.
  const std::vector<float> logits = {1e4f, -1e4f, 0.0f, 1e4f, 5.0f, -1e4f};
  const std::vector<std::int32_t> targets = {1, 2};
  const DeviceTargets targets_d(targets);
  for (Elem elem : {Elem::kF32, Elem::kBF16}) {
    const std::vector<float> rounded = round_to(elem, logits);
    DeviceArray logits_d(rounded, elem);
    DeviceArray losses_d(Elem::kF32, 2);
    REQUIRE(kernels::cuda::cross_entropy_forward(elem, losses_d.f32(), logits_d.data(), targets_d.data(), 2, 3,
                                                 nullptr) == 0);
    std::vector<float> losses(2);
    kernels::cpu::cross_entropy_forward(losses.data(), rounded.data(), targets.data(), 2, 3, 1);
    const std::vector<float> gpu = losses_d.download();
    for (float loss : gpu) REQUIRE(std::isfinite(loss));
    require_close(gpu, losses, 1e-5, 1.0);
  }
}

TEST_CASE("cuda cross_entropy: no rows does nothing, V == 0 is refused", "[cuda][cross_entropy]") {
  REQUIRE(kernels::cuda::cross_entropy_forward(Elem::kF32, nullptr, nullptr, nullptr, 0, 10, nullptr) == 0);
  REQUIRE(kernels::cuda::cross_entropy_backward(Elem::kF32, nullptr, nullptr, nullptr, 1.0f, 0, 10, nullptr) == 0);
  REQUIRE(kernels::cuda::cross_entropy_forward(Elem::kF32, nullptr, nullptr, nullptr, 2, 0, nullptr) != 0);
}

}  // namespace
}  // namespace zinf::cuda_test
