// Memory model: each of the ZeRO-Infinity paper's formulas (SC21 §3) against values worked out by
// hand in the comments, and model_memory()'s totals against the exact parameter count.
#include "planner/memory_model.h"

#include "libengine/spec/model_shape.h"
#include "libengine/spec/training_spec.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

// GPT-2 small: 124,439,808 parameters (published; also checked by the spec tests).
constexpr std::uint64_t kGpt2Params = 124'439'808ULL;

spec::ModelShape gpt2_shape() { return spec::gpt_like_shape(12, 768, 12, 50257, 1024); }

TEST_CASE("paper parameter estimate is 12*nl*hd^2") {
  // 12 * 128 * 25600^2 = 1536 * 655,360,000 = 1,006,632,960,000.
  CHECK(paper_parameter_estimate(128, 25600) == 1.00663296e12);
  // 12 * 1 * 128^2 = 196,608.
  CHECK(paper_parameter_estimate(1, 128) == 196608.0);
  // GPT-3 175B: 12 * 96 * 12288^2 = 1152 * 150,994,944 = 173,946,175,488.
  CHECK(paper_parameter_estimate(96, 12288) == 173946175488.0);
}

TEST_CASE("activation checkpoints are 2*bsz*seq*hd*ceil(nl/ci) bytes") {
  // 2 * 2 * 1024 * 8192 * 100 = 4 * 8,388,608 * 100 = 3,355,443,200.
  CHECK(activation_checkpoint_bytes(2, 1024, 8192, 100, 1) == 3355443200.0);
  // ci = 4 divides 100: 25 checkpoints -> 2 * 2 * 1024 * 8192 * 25 = 838,860,800.
  CHECK(activation_checkpoint_bytes(2, 1024, 8192, 100, 4) == 838860800.0);
  // ci = 3 does not divide 100: ceil(100 / 3) = 34 checkpoints (33 full intervals + a partial one)
  // -> 2 * 2 * 1024 * 8192 * 34 = 33,554,432 * 34 = 1,140,850,688.
  CHECK(activation_checkpoint_bytes(2, 1024, 8192, 100, 3) == 1140850688.0);
  // ci larger than nl: a single checkpoint -> 2 * 1 * 1024 * 8192 = 16,777,216.
  CHECK(activation_checkpoint_bytes(1, 1024, 8192, 100, 1000) == 16777216.0);
}

TEST_CASE("model-state working memory is 16*hd^2/tiling for a paper-shaped model") {
  // hd = 25600: the MLP matrix has 4 * 25600^2 = 2,621,440,000 parameters; with 2 + 2 bytes of
  // half params and grads that is 16 * 655,360,000 = 10,485,760,000 bytes.
  CHECK(model_state_working_bytes(4ULL * 25600 * 25600, 4.0, 1) == 10485760000.0);
  // Tiling 16 splits it: 10,485,760,000 / 16 = 655,360,000.
  CHECK(model_state_working_bytes(4ULL * 25600 * 25600, 4.0, 16) == 655360000.0);

  // Through model_memory(): for hd = 25600 the largest operator is the MLP matrix (4*hd^2 beats the
  // 50257*hd embedding since 4*25600 > 50257), so the same 16*hd^2/tiling comes out.
  const spec::ModelShape shape = spec::gpt_like_shape(128, 25600, 200, 50257, 1024);
  spec::TrainingSpec training;
  training.tiling = 4;
  const ModelMemory memory = model_memory(shape, training);
  CHECK(memory.largest_operator_params == 2621440000ULL);
  // 16 * 25600^2 / 4 = 2,621,440,000 bytes.
  CHECK(memory.model_state_working_bytes_per_gpu == 2621440000.0);
}

TEST_CASE("activation working memory is bsz*seq*ci*(16*hd + 2*heads*seq)") {
  // 1 * 1024 * 1 * (16 * 8192 + 2 * 64 * 1024) = 1024 * (131,072 + 131,072) = 268,435,456.
  CHECK(activation_working_bytes(1, 1024, 1, 8192, 64) == 268435456.0);
  // 2 * 2048 * 3 * (16 * 1024 + 2 * 16 * 2048) = 12,288 * (16,384 + 65,536) = 12,288 * 81,920
  //   = 1,006,632,960.
  CHECK(activation_working_bytes(2, 2048, 3, 1024, 16) == 1006632960.0);
}

TEST_CASE("flops per GPU per step are 2*4*bsz*seq*params") {
  // 8 * 2 * 1024 * 1e9 = 16,384e9.
  CHECK(flops_per_gpu_per_step(2, 1024, 1e9) == 1.6384e13);
  // 8 * 1 * 1024 * 124,439,808 = 8192 * 124,439,808 = 1,019,410,907,136.
  CHECK(flops_per_gpu_per_step(1, 1024, static_cast<double>(kGpt2Params)) == 1019410907136.0);
}

TEST_CASE("model_memory under the paper accounting is 20 bytes per exact parameter") {
  spec::TrainingSpec training;  // seq 1024, micro-batch 1, ci 1, tiling 1, bf16, paper
  const ModelMemory memory = model_memory(gpt2_shape(), training);
  const double p = static_cast<double>(kGpt2Params);
  CHECK(memory.params == kGpt2Params);
  CHECK(memory.params_bytes == 2.0 * p);
  CHECK(memory.grads_bytes == 2.0 * p);
  CHECK(memory.optimizer_bytes == 16.0 * p);  // 4 fp32 params + 4 fp32 grads + 4 m + 4 v
  // 20 * 124,439,808 = 2,488,796,160.
  CHECK(memory.params_bytes + memory.grads_bytes + memory.optimizer_bytes == 2488796160.0);
  // Checkpoints: 2 * 1 * 1024 * 768 * 12 = 18,874,368.
  CHECK(memory.activation_checkpoint_bytes_per_gpu == 18874368.0);
  // GPT-2's largest operator is the embedding table, 50257 * 768 = 38,597,376 parameters;
  // 4 bytes each (2 + 2) = 154,389,504.
  CHECK(memory.largest_operator_params == 38597376ULL);
  CHECK(memory.model_state_working_bytes_per_gpu == 154389504.0);
  // 1 * 1024 * 1 * (16 * 768 + 2 * 12 * 1024) = 1024 * (12,288 + 24,576) = 37,748,736.
  CHECK(memory.activation_working_bytes_per_gpu == 37748736.0);
  CHECK(memory.flops_per_gpu_per_step == 1019410907136.0);
}

TEST_CASE("model_memory under the zero and fp32 accountings is 16 bytes per parameter") {
  const double p = static_cast<double>(kGpt2Params);
  spec::TrainingSpec training;
  training.accounting = spec::StateAccounting::kZero;  // 2 + 2 + 4 + 4 + 4, no fp32 grads
  ModelMemory memory = model_memory(gpt2_shape(), training);
  CHECK(memory.params_bytes == 2.0 * p);
  CHECK(memory.grads_bytes == 2.0 * p);
  CHECK(memory.optimizer_bytes == 12.0 * p);
  // 16 * 124,439,808 = 1,991,036,928.
  CHECK(memory.params_bytes + memory.grads_bytes + memory.optimizer_bytes == 1991036928.0);
  CHECK(memory.model_state_working_bytes_per_gpu == 4.0 * 38597376.0);

  training.accounting = spec::StateAccounting::kFp32;  // 4 + 4 + 4 + 4, no master copy
  training.precision = DType::kF32;
  memory = model_memory(gpt2_shape(), training);
  CHECK(memory.params_bytes == 4.0 * p);
  CHECK(memory.grads_bytes == 4.0 * p);
  CHECK(memory.optimizer_bytes == 8.0 * p);
  CHECK(memory.params_bytes + memory.grads_bytes + memory.optimizer_bytes == 1991036928.0);
  // fp32 params + grads of the largest operator: 8 * 38,597,376 = 308,779,008.
  CHECK(memory.model_state_working_bytes_per_gpu == 308779008.0);
}

TEST_CASE("model_memory recomputes at most the whole model when ci exceeds the layer count") {
  spec::TrainingSpec training;
  training.ckpt_interval = 100;  // GPT-2 small has 12 layers
  const ModelMemory memory = model_memory(gpt2_shape(), training);
  // One checkpoint: 2 * 1 * 1024 * 768 = 1,572,864.
  CHECK(memory.activation_checkpoint_bytes_per_gpu == 1572864.0);
  // 12 layers recomputed: 1024 * 12 * (16 * 768 + 2 * 12 * 1024) = 12,288 * 36,864 = 452,984,832.
  CHECK(memory.activation_working_bytes_per_gpu == 452984832.0);
}

}  // namespace
}  // namespace zinf::planner
