// cuda::embedding_forward/backward (and their row-range variants over vocabulary tiles) against the
// CPU kernels (kernels/embedding.h), bit for bit.
//
// Why exact: the forward is one fp32 addition rounded once to `elem` on both sides (the CPU result
// rounded with round_to is what the GPU must store); the backward adds the same fp32 values (dout
// rounded to `elem` first) into fp32 gradients in the same order (each token's positions in
// increasing order, each dwpe row over b in order), so every bit must agree. Shapes: odd channel
// counts (the scalar paths), C a multiple of 4 but not of 8 (bf16 forward scalar, backward vector),
// many repeated tokens (long runs, unused vocabulary rows that must stay as they were), a GPT-2
// sized vocabulary, C wide enough for several dwte channel slices (grid.y > 1) on the vector and
// the scalar path; the backward runs twice to show it gives the same bits each time.
#include "kernels/embedding.h"

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

struct Shape {
  std::int64_t batch;
  std::int64_t seq_len;
  std::int64_t channels;
  std::int64_t vocab;
  std::int64_t max_positions;
};

void require_same_bits(const std::vector<float>& actual, const std::vector<float>& expected, const char* what) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0) {
      INFO(what << " element " << i << ": got " << actual[i] << ", expected " << expected[i]);
      REQUIRE(std::memcmp(&actual[i], &expected[i], sizeof(float)) == 0);
    }
  }
}

// Tokens in [0, vocab): with probability `repeat` one of the first three ids (long runs), else any.
std::vector<std::int32_t> make_tokens(std::size_t n, std::int64_t vocab, double repeat, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<std::int64_t> any(0, vocab - 1);
  std::uniform_int_distribution<std::int64_t> few(0, vocab < 3 ? vocab - 1 : 2);
  std::vector<std::int32_t> tokens(n);
  for (auto& t : tokens) t = static_cast<std::int32_t>(coin(rng) < repeat ? few(rng) : any(rng));
  return tokens;
}

class DeviceTokens {
 public:
  explicit DeviceTokens(const std::vector<std::int32_t>& tokens) {
    REQUIRE(cudaMalloc(&data_, tokens.size() * 4 + 4) == cudaSuccess);
    REQUIRE(cudaMemcpy(data_, tokens.data(), tokens.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  DeviceTokens(const DeviceTokens&) = delete;
  DeviceTokens& operator=(const DeviceTokens&) = delete;
  ~DeviceTokens() { cudaFree(data_); }
  const std::int32_t* data() const { return static_cast<const std::int32_t*>(data_); }

 private:
  void* data_ = nullptr;
};

void check_embedding(Elem elem, const Shape& s, double repeat) {
  INFO("elem " << static_cast<int>(elem) << ", B " << s.batch << " T " << s.seq_len << " C " << s.channels << " V "
               << s.vocab);
  const auto positions = static_cast<std::size_t>(s.batch * s.seq_len);
  const auto c = static_cast<std::size_t>(s.channels);
  const std::vector<std::int32_t> tokens = make_tokens(positions, s.vocab, repeat, 17);
  const std::vector<float> wte = round_to(elem, random_values(static_cast<std::size_t>(s.vocab) * c, 1, 1.0f));
  const std::vector<float> wpe = round_to(elem, random_values(static_cast<std::size_t>(s.max_positions) * c, 2, 0.5f));
  const DeviceTokens tokens_d(tokens);

  // Forward.
  DeviceArray wte_d(wte, elem);
  DeviceArray wpe_d(wpe, elem);
  DeviceArray out_d(elem, positions * c);
  out_d.poison();
  REQUIRE(kernels::cuda::embedding_forward(elem, out_d.data(), tokens_d.data(), wte_d.data(), wpe_d.data(), s.batch,
                                           s.seq_len, s.channels, nullptr) == 0);
  std::vector<float> out(positions * c);
  kernels::cpu::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), static_cast<std::size_t>(s.batch),
                                  static_cast<std::size_t>(s.seq_len), c, 1);
  require_same_bits(out_d.download(), round_to(elem, out), "out");

  // Backward, twice from the same starting gradients.
  const std::vector<float> dout = round_to(elem, random_values(positions * c, 3, 1.0f));
  const std::vector<float> dwte_start = random_values(static_cast<std::size_t>(s.vocab) * c, 4, 1.0f);
  const std::vector<float> dwpe_start = random_values(static_cast<std::size_t>(s.max_positions) * c, 5, 1.0f);
  std::vector<float> dwte = dwte_start;
  std::vector<float> dwpe = dwpe_start;
  kernels::cpu::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(),
                                   static_cast<std::size_t>(s.batch), static_cast<std::size_t>(s.seq_len), c, 1);
  DeviceArray dout_d(dout, elem);
  const std::size_t scratch_bytes =
      kernels::cuda::embedding_backward_scratch_bytes(s.batch, s.seq_len, s.channels, s.vocab);
  REQUIRE(scratch_bytes > 0);
  DeviceArray scratch(Elem::kF32, scratch_bytes / 4 + 1);
  std::vector<float> first_dwte;
  std::vector<float> first_dwpe;
  for (int run = 0; run < 2; ++run) {
    DeviceArray dwte_d(dwte_start);
    DeviceArray dwpe_d(dwpe_start);
    scratch.poison();  // contents unspecified: the kernel must not depend on them
    REQUIRE(kernels::cuda::embedding_backward(elem, dwte_d.f32(), dwpe_d.f32(), dout_d.data(), tokens_d.data(), s.batch,
                                              s.seq_len, s.channels, s.vocab, scratch.data(), scratch_bytes,
                                              nullptr) == 0);
    const std::vector<float> gpu_dwte = dwte_d.download();
    const std::vector<float> gpu_dwpe = dwpe_d.download();
    require_same_bits(gpu_dwte, dwte, "dwte");
    require_same_bits(gpu_dwpe, dwpe, "dwpe");
    if (run == 0) {
      first_dwte = gpu_dwte;
      first_dwpe = gpu_dwpe;
    } else {
      require_same_bits(gpu_dwte, first_dwte, "dwte (second run)");
      require_same_bits(gpu_dwpe, first_dwpe, "dwpe (second run)");
    }
  }
}

TEST_CASE("cuda embedding: forward and backward match the CPU bit for bit", "[cuda][embedding]") {
  const Shape shapes[] = {
      {1, 1, 1, 1, 1},          // one position, one channel, one token
      {3, 5, 7, 37, 9},         // odd C: scalar paths
      {2, 9, 100, 37, 12},      // C % 4 == 0, C % 8 != 0
      {4, 64, 64, 37, 64},      // vector paths, every id repeated many times
      {2, 33, 64, 50257, 40},   // GPT-2 vocabulary (16 sort bits), random tokens
      {8, 256, 132, 500, 256},  // long runs: half the positions share three ids
      {2, 17, 772, 300, 20},    // C % 4 == 0, 193 vectors: four dwte channel slices (grid.y = 4)
      {3, 11, 201, 50, 16},     // odd C past one block of channels: scalar dwte over four slices
  };
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (const Shape& s : shapes) check_embedding(elem, s, 0.5);
  }
  check_embedding(Elem::kBF16, {16, 128, 64, 1000, 128}, 0.98);  // runs of thousands
}

// The row-range variants over three tiles of the vocabulary give the whole-table CPU bits.
void check_embedding_rows(Elem elem, const Shape& s) {
  INFO("rows, elem " << static_cast<int>(elem) << ", C " << s.channels << " V " << s.vocab);
  const auto positions = static_cast<std::size_t>(s.batch * s.seq_len);
  const auto c = static_cast<std::size_t>(s.channels);
  const auto b = static_cast<std::size_t>(s.batch), t = static_cast<std::size_t>(s.seq_len);
  const std::vector<std::int32_t> tokens = make_tokens(positions, s.vocab, 0.3, 23);
  const std::vector<float> wte = round_to(elem, random_values(static_cast<std::size_t>(s.vocab) * c, 6, 1.0f));
  const std::vector<float> wpe = round_to(elem, random_values(static_cast<std::size_t>(s.max_positions) * c, 7, 0.5f));
  const std::vector<float> dout = round_to(elem, random_values(positions * c, 8, 1.0f));
  const std::vector<float> dwte_start = random_values(static_cast<std::size_t>(s.vocab) * c, 9, 1.0f);
  const std::vector<float> dwpe_start = random_values(static_cast<std::size_t>(s.max_positions) * c, 10, 1.0f);
  std::vector<float> out(positions * c), dwte = dwte_start, dwpe = dwpe_start;
  kernels::cpu::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), b, t, c, 1);
  kernels::cpu::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), b, t, c, 1);

  const DeviceTokens tokens_d(tokens);
  DeviceArray wpe_d(wpe, elem);
  DeviceArray dout_d(dout, elem);
  DeviceArray out_d(elem, positions * c);
  DeviceArray dwpe_d(dwpe_start);
  const std::size_t scratch_bytes =
      kernels::cuda::embedding_backward_scratch_bytes(s.batch, s.seq_len, s.channels, s.vocab);
  DeviceArray scratch(Elem::kF32, scratch_bytes / 4 + 1);
  const std::int64_t begins[] = {0, s.vocab / 3, 2 * s.vocab / 3, s.vocab};
  for (int k = 0; k < 3; ++k) {
    const auto first = static_cast<std::size_t>(begins[k]) * c, last = static_cast<std::size_t>(begins[k + 1]) * c;
    const std::int64_t rows = begins[k + 1] - begins[k];
    DeviceArray wte_d(std::vector<float>(wte.begin() + first, wte.begin() + last), elem);
    DeviceArray dwte_d(std::vector<float>(dwte_start.begin() + first, dwte_start.begin() + last));
    REQUIRE(kernels::cuda::embedding_forward_rows(elem, out_d.data(), tokens_d.data(), wte_d.data(), begins[k], rows,
                                                  wpe_d.data(), s.batch, s.seq_len, s.channels, nullptr) == 0);
    REQUIRE(kernels::cuda::embedding_backward_rows(elem, dwte_d.f32(), begins[k], rows, k == 2 ? dwpe_d.f32() : nullptr,
                                                   dout_d.data(), tokens_d.data(), s.batch, s.seq_len, s.channels,
                                                   s.vocab, scratch.data(), scratch_bytes, nullptr) == 0);
    require_same_bits(dwte_d.download(), std::vector<float>(dwte.begin() + first, dwte.begin() + last), "dwte tile");
  }
  require_same_bits(out_d.download(), round_to(elem, out), "out");
  require_same_bits(dwpe_d.download(), dwpe, "dwpe");
}

TEST_CASE("cuda embedding rows: three vocabulary tiles match the whole-table CPU bits", "[cuda][embedding]") {
  for (Elem elem : {Elem::kF32, Elem::kBF16}) {
    check_embedding_rows(elem, {2, 17, 64, 37, 20});
    check_embedding_rows(elem, {3, 11, 7, 50, 16});
  }
}

TEST_CASE("cuda embedding: no positions does nothing", "[cuda][embedding]") {
  REQUIRE(kernels::cuda::embedding_forward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, 0, 5, 8, nullptr) == 0);
  REQUIRE(kernels::cuda::embedding_backward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, 3, 0, 8, 10, nullptr, 0,
                                            nullptr) == 0);
}

}  // namespace
}  // namespace zinf::cuda_test
