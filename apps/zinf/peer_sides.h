// The measured sides of `zinf bench peers` (bench_peers.h): one sample of zinf's own optimizer and
// training step, and one run of the peers' script (scripts/bench/peers.py: DeepSpeed and PyTorch 2
// in the project venv scripts/install-deps.sh makes). bench_peers.cpp alternates them and records.
//
// Each function measures once and returns the raw figures it measured (JSON), so the record keeps
// the evidence a figure came from: step times, losses, the child's own output. Nothing here
// retries or averages.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"

namespace zinf::cli {

// The python of the project venv and the peers' script.
struct PeerScript {
  std::string python;  // <checkout>/.venv/bin/python, or --python
  std::string script;  // <checkout>/scripts/bench/peers.py, or --peers-script
};

// Finds them: `python` / `script` when given (checked to exist), otherwise searched in the folders
// above this executable (zinf runs from <checkout>/build/<preset>/bin). NotFound names the flag, the
// path looked for and the install command (scripts/install-deps.sh) when the venv is missing.
Result<PeerScript> find_peer_script(const std::string& python, const std::string& script);

// Runs `script` with `args` through the venv's python and returns its one JSON line. The script
// prints {"error": ...} and exits 3 when a peer cannot run: that JSON comes back (the caller
// records the error). Any other failure (no JSON, another exit status) is Internal with the last
// line of its stderr. A run longer than `timeout_seconds` is killed and comes back as {"error": ...}.
Result<nlohmann::json> run_peer(const PeerScript& peers, const std::vector<std::string>& args, int timeout_seconds);

// One step of zinf's CPU AdamW (kernels::cpu::adam_step, decoupled weight decay 0.01, lr 1e-3) over
// `elements` fp32 parameters with an fp32 gradient, on compute_threads() threads: 2 untimed steps,
// then `steps` timed. Returns {"step_seconds": [...], "step_cpu_seconds": [...] (the process's CPU
// time over each step, all threads), "params_per_s", "gbps"} (28 bytes per element,
// the count the peers' side uses). The buffers live only during the call.
nlohmann::json zinf_adam_sample(std::size_t elements, int steps);

// The GPT shape and training settings every training row shares.
struct TrainShape {
  std::int64_t layers = 2, hidden = 128, heads = 4, vocab = 256, seq = 64, batch = 4;
  std::int64_t steps = 3, warmup = 1;
  int threads = 2;
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
  bool activation_checkpointing = true;
  std::int64_t seed = 1234;
  // The shared initial weights (HF GPT-2 safetensors) and token file that peers.py `init` wrote; every
  // side of every training row starts from these and trains batch n at step n. Empty: each side uses
  // its own initialisation and data (zinf: its ParamTable and Markov source; the peers: random tokens).
  std::string init_weights, tokens;
};

// The peers' script's arguments that write those files for `shape` into `dir` (peers.py init):
// warmup + steps windows of batch * seq + 1 tokens, weights from the shape's seed.
std::vector<std::string> peer_init_args(const TrainShape& shape, const std::string& dir);

// max over the first min(3, both sizes) steps of |zinf - peer| / |peer|; null when either is empty.
nlohmann::json loss_max_rel_diff(const nlohmann::json& zinf_losses, const nlohmann::json& peer_losses);

// The zinf scenario of `shape` with parameters and optimizer states on `tier` ("device": no ZeRO
// offload at all; "cpu"; "nvme" with swap under `nvme_dir`). fp32, constant learning rate, no
// gradient clipping, on the CPU device.
nlohmann::json peer_scenario(const TrainShape& shape, const std::string& tier, const std::string& nvme_dir);

// The peers' script's arguments for a training run of `shape` in `mode` (eager, compile, ds-cpu,
// ds-nvme).
std::vector<std::string> peer_train_args(const TrainShape& shape, const std::string& mode, const std::string& nvme_dir);

// Runs `zinf train SCENARIO --format json` as a child (this executable) with `scenario` written into
// `work` and returns {"tokens_per_s", "step_ms" (measured steps), "losses" (every step),
// "peak_rss_bytes", "nvme_read_bytes_per_step" / "nvme_write_bytes_per_step" (the engine's swap
// counters over the measured steps / their count), "nvme_bytes_per_step" (their sum),
// "host_device_bytes_per_step"}.
// A failed run is Internal with the child's last error line.
Result<nlohmann::json> run_zinf_train(const nlohmann::json& scenario, const std::filesystem::path& work,
                                      const std::string& tag);

}  // namespace zinf::cli
