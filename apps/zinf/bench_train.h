// `zinf bench train`: training-step throughput of a scenario's model, zinf next to PyTorch training
// the same model (scripts/bench/torch_train.py: same shape, fp32, AdamW foreach, same thread count)
// in the same run, repetitions alternating so drift hits both alike; prints tokens/s of each, the
// ratio, step times, and zinf's TFLOP/s and MFU against a same-run matmul peak.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "apps/zinf/subcommand.h"

namespace zinf::cli {

// Adds `train` under `bench` and returns the object that owns its options and runs it.
std::unique_ptr<Subcommand> add_bench_train_command(CLI::App& bench);

}  // namespace zinf::cli
