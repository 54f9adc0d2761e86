// TrainingSpec: how a model is trained — sequence length, micro-batch, activation checkpointing,
// memory-centric tiling, precision — and what each parameter costs in model-state bytes.
// Pure data shared by the planner (to predict) and the engine (to allocate).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"

namespace zinf::spec {

// Which buffers count as model states. The paper's 20 bytes/param is one choice; ZeRO's original
// paper counts 16 (no fp32 gradient copy); a pure fp32 run keeps 16 of a different kind.
enum class StateAccounting {
  kPaper,  // ZeRO-Infinity §3: 2 (half params) + 2 (half grads) + 4 (fp32 params) + 4 (fp32 grads) + 4 (m) + 4 (v) = 20
  kZero,   // ZeRO (SC20): 2 + 2 + 4 (fp32 params) + 4 (m) + 4 (v) = 16; fp32 grads are never materialised
  kFp32,   // fp32 training: 4 (params) + 4 (grads) + 4 (m) + 4 (v) = 16; no separate master copy
};

std::string_view accounting_name(StateAccounting accounting);  // "paper", "zero", "fp32"
std::optional<StateAccounting> accounting_from_name(std::string_view name);

// Bytes per parameter of every model-state buffer under an accounting. The working copy of params
// and grads is in the compute precision; everything the optimizer owns is fp32.
struct StateBytesPerParam {
  double params = 0;         // compute-precision parameters (fp16/bf16, or fp32 under kFp32)
  double grads = 0;          // compute-precision gradients
  double master_params = 0;  // fp32 master copy (0 under kFp32: params are already fp32)
  double fp32_grads = 0;     // fp32 gradient copy the optimizer reads (kPaper only)
  double momentum = 0;       // Adam m
  double variance = 0;       // Adam v
  // Everything the optimizer step owns and touches: master params, fp32 grads, m, v.
  double optimizer() const { return master_params + fp32_grads + momentum + variance; }
  double total() const { return params + grads + optimizer(); }
};

StateBytesPerParam state_bytes_per_param(StateAccounting accounting);

struct TrainingSpec {
  std::int64_t seq = 1024;         // tokens per sample
  std::int64_t micro_batch = 1;    // samples per GPU per step
  std::int64_t ckpt_interval = 1;  // transformer layers between activation checkpoints
  std::int64_t tiling = 1;         // memory-centric tiling factor: largest operator split into this many tiles
  DType precision = DType::kBF16;  // compute/storage precision of params and grads
  StateAccounting accounting = StateAccounting::kPaper;
  // Activation checkpointing: keep one checkpoint every ckpt_interval layers and recompute the
  // forward in backward (8·bsz·seq·P FLOPs per step). Off: every layer's activations stay on the
  // device and nothing is recomputed (6·bsz·seq·P); ckpt_interval is then not used.
  bool activation_checkpointing = true;
  // The optimizer step needs the global gradient norm before it may start (gradient clipping, or
  // fp16 loss scaling's overflow check): an overlapped optimizer can then only read ahead during the
  // backward pass, not step.
  bool norm_before_step = false;
};

// Positive seq/micro-batch/ckpt-interval/tiling; fp32 precision goes with fp32 accounting and
// half precision with paper/zero. Errors name the field ("training.accounting: ...").
Status validate(const TrainingSpec& training);

// The precision/accounting half of validate(), with the two fields named by the caller (the CLI
// says "--accounting" and "--precision").
Status check_accounting(const TrainingSpec& training, std::string_view accounting_field,
                        std::string_view precision_field);

}  // namespace zinf::spec
