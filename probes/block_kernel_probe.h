// Block kernel probe: how long one transformer block's kernels other than its matmuls take on the
// CPU, at the scenario's shapes — the two norms (LayerNorm or RMSNorm), the rotary embedding where
// the model has it, causal attention (grouped K/V heads read in place), the two residual adds and the
// GELU or SwiGLU, forward and backward. The run's plan (train_plan.h) adds them to the matmuls' FLOPs
// at the measured matmul rate: for a small hidden size they are a third of the step
// (scenarios/offload-*.json), for a large one a few percent.
#pragma once

#include "libengine/spec/scenario.h"

namespace zinf::probes {

struct BlockKernelSeconds {
  double forward = 0;   // one block's forward pass, matmuls excluded
  double backward = 0;  // one block's backward pass, matmuls excluded (not the recompute)
};

// Best of 3 rounds after a warm-up (the machine's figure, as for the other probes), on the run's
// compute threads. Allocates the block's activations for one batch (fp32) for the duration.
BlockKernelSeconds probe_block_kernels(const spec::Scenario& scenario);

}  // namespace zinf::probes
