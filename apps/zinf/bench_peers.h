// `zinf bench peers`: zinf next to the real DeepSpeed and PyTorch 2 on this machine, in one run
// (issue 25). Four items, each measured in rounds that alternate which side goes first (zinf then the
// peers, then the peers then zinf, ...), so a load that drifts lands on both:
//
//   optimizer     zinf's CPU AdamW (kernels::cpu::adam_step) vs DeepSpeedCPUAdam(adamw_mode=True) vs
//                 torch.optim.AdamW(foreach=True) on the same fp32 tensor size and threads; params/s
//                 and GB/s with the same round's triad (memory bandwidth) as the bound;
//   nvme          zinf's swap store vs DeepSpeed's aio handle vs fio, same directory, block size and
//                 queue depth, sequential write and read;
//   offload-cpu,  the GPT training step with ZeRO-3, parameters and optimizer on the CPU (then on
//   offload-nvme  NVMe): zinf vs DeepSpeed's engine on its CPU accelerator (gloo, one rank); tokens/s,
//                 peak RSS, and the first steps' losses;
//   no-offload    the same model with no offload: zinf vs PyTorch 2 eager and torch.compile.
//
// The peers run in scripts/bench/peers.py through the project venv (.venv, scripts/install-deps.sh);
// zinf's training runs are `zinf train` children of this binary. One record ("bench-peers"): every
// row with each side's samples, median and range, the zinf/peer ratios with their spread
// (ratio_spread.h), and every round's raw output (step times, losses, the peers' versions) — the
// evidence each figure came from a real run. A peer that cannot run a configuration has its exact
// error in the row instead of a figure. Exit 2 on bad input (a flag, a missing venv), 1 when a zinf
// side fails.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "apps/zinf/subcommand.h"

namespace zinf::cli {

// Adds `peers` under `bench`; *app receives the CLI11 subcommand (to see whether it was parsed).
std::unique_ptr<Subcommand> add_bench_peers_command(CLI::App& bench, CLI::App** app);

}  // namespace zinf::cli
