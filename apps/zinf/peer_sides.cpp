#include "apps/zinf/peer_sides.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <system_error>

#include <fmt/format.h>

#include "kernels/adam.h"
#include "libengine/spec/json_input.h"
#include "probes/latency_stats.h"
#include "probes/process.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::find_program;
using probes::ProcessOutput;
using probes::run_process;
using probes::spread_of;

namespace {

using nlohmann::json;

constexpr double kAdamBytesPerParam = 28.0;  // read p, g, m, v; write p, m, v (fp32)
constexpr int kPeerScriptFailed = 3;         // peers.py: a peer could not run; its JSON says why

// The first `relative` found in the folders above this executable (at most 6 up), or empty.
std::filesystem::path above_executable(const std::filesystem::path& relative) {
  std::error_code error;
  std::filesystem::path dir = std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
  for (int up = 0; !error && up < 6 && !dir.empty(); ++up) {
    const std::filesystem::path candidate = dir / relative;
    if (std::filesystem::exists(candidate, error)) return candidate;
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return {};
}

std::string last_line(const std::string& text) {
  const std::size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  const std::size_t begin = text.rfind('\n', end);
  const std::size_t from = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(from, end + 1 - from);
}

// CPU seconds of every thread of this process so far (the peers' side reads time.process_time, the
// same clock): on a shared machine it shows the work of a step whose wall time includes waiting.
double process_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

Result<PeerScript> find_peer_script(const std::string& python, const std::string& script) {
  PeerScript out;
  if (!python.empty()) {
    if (::access(python.c_str(), X_OK) != 0) {
      return Status::not_found(
          fmt::format("--python: '{}' is not an executable file; give the project venv's python "
                      "(.venv/bin/python, made by scripts/install-deps.sh)",
                      python));
    }
    out.python = python;
  } else {
    const std::filesystem::path found = above_executable(".venv/bin/python");
    if (found.empty()) {
      return Status::not_found(
          "--python: no project venv (.venv/bin/python in a folder above this zinf binary); create it with "
          "scripts/install-deps.sh (it installs DeepSpeed, PyTorch and transformers into .venv), or give --python");
    }
    out.python = found.string();
  }
  if (!script.empty()) {
    if (!std::filesystem::exists(script)) {
      return Status::not_found(fmt::format("--peers-script: '{}' does not exist", script));
    }
    out.script = script;
  } else {
    const std::filesystem::path found = above_executable("scripts/bench/peers.py");
    if (found.empty()) {
      return Status::not_found(
          "--peers-script: scripts/bench/peers.py not found in a folder above this zinf binary; give its path");
    }
    out.script = found.string();
  }
  return out;
}

Result<json> run_peer(const PeerScript& peers, const std::vector<std::string>& args, int timeout_seconds) {
  std::vector<std::string> argv = {peers.python, peers.script};
  argv.insert(argv.end(), args.begin(), args.end());
  // coreutils' timeout kills a peer that hangs (a DeepSpeed op waiting on another process's JIT-build
  // lock waits without a word); the kill is recorded as the peer's error, not a figure.
  std::vector<std::string> command = argv;
  if (Result<std::string> timeout = find_program("timeout", "/usr/bin:/bin"); timeout.is_ok()) {
    command = {*timeout, "-s", "KILL", std::to_string(timeout_seconds)};
    command.insert(command.end(), argv.begin(), argv.end());
  }
  ZINF_ASSIGN_OR_RETURN(const ProcessOutput out, run_process(command));
  if (out.exit_status == 128 + 9 && command.size() > argv.size()) {
    return json{{"error", fmt::format("killed after --peer-timeout {} s (no answer; a DeepSpeed op build waiting "
                                      "on its lock in ~/.cache/torch_extensions?)",
                                      timeout_seconds)},
                {"argv", argv}};
  }
  const std::string line = last_line(out.out);
  json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
  const bool usable = parsed.is_object() && (out.exit_status == 0 || out.exit_status == kPeerScriptFailed);
  if (!usable) {
    return Status::internal(fmt::format("bench peers: {} {} failed (exit {}): {}", peers.script,
                                        args.empty() ? std::string() : args.front(), out.exit_status,
                                        last_line(out.err).empty() ? std::string("no message") : last_line(out.err)));
  }
  parsed["argv"] = argv;
  return parsed;
}

namespace {

// n floats, 64-byte aligned, uninitialised; throws std::bad_alloc as a std::vector would.
class AlignedFloats {
 public:
  explicit AlignedFloats(std::size_t n)
      : data_(static_cast<float*>(std::aligned_alloc(kAlignment, rounded_bytes(n))), &std::free) {
    if (data_ == nullptr) throw std::bad_alloc();
  }
  float* data() { return data_.get(); }
  float& operator[](std::size_t i) { return data_.get()[i]; }

 private:
  static constexpr std::size_t kAlignment = 64;
  // aligned_alloc wants a multiple of the alignment.
  static std::size_t rounded_bytes(std::size_t n) {
    return (std::max<std::size_t>(n, 1) * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  }
  std::unique_ptr<float, decltype(&std::free)> data_;
};

}  // namespace

json zinf_adam_sample(std::size_t elements, int steps) {
  // 64-byte aligned, as PyTorch's CPU allocator aligns the peers' tensors (a std::vector of this
  // size starts 16 bytes past a page, so every other 32-byte vector would straddle two cache lines),
  // and on ordinary pages, as theirs are: zinf's own buffers ask for huge pages, which would make
  // this a comparison of allocators rather than of the two AdamW steps.
  AlignedFloats p(elements), g(elements), m(elements), v(elements);
  // The same kind of values the peers' side uses: uniform in [-1, 1); the moments start at 0.
  for (std::size_t i = 0; i < elements; ++i) {
    p[i] = static_cast<float>((i * 2654435761u) % 2000u) / 1000.0f - 1.0f;
    g[i] = static_cast<float>((i * 40503u) % 2000u) / 1000.0f - 1.0f;
    m[i] = 0.0f;
    v[i] = 0.0f;
  }
  kernels::AdamHyper hyper;
  hyper.lr = 1e-3;
  hyper.weight_decay = 0.01;
  kernels::AdamSlice slice;
  slice.param = p.data();
  slice.exp_avg = m.data();
  slice.exp_avg_sq = v.data();
  slice.n = elements;
  std::vector<double> seconds, cpu_seconds;
  for (int i = 0; i < 2 + steps; ++i) {
    hyper.step = i + 1;
    const double start_cpu = process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    kernels::cpu::adam_step(hyper, slice, g.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i >= 2) {
      seconds.push_back(s);
      cpu_seconds.push_back(process_cpu_seconds() - start_cpu);
    }
  }
  const double median = spread_of(seconds).median;
  const double n = static_cast<double>(elements);
  return {{"name", "kernels::cpu::adam_step (AdamW)"},
          {"step_seconds", seconds},
          {"step_cpu_seconds", cpu_seconds},
          {"params_per_s", n / median},
          {"gbps", kAdamBytesPerParam * n / median / 1e9}};
}

json peer_scenario(const TrainShape& shape, const std::string& tier, const std::string& nvme_dir) {
  json scenario = {{"name", fmt::format("bench-peers-{}", tier)},
                   {"model",
                    {{"layers", shape.layers},
                     {"hidden", shape.hidden},
                     {"heads", shape.heads},
                     {"vocab", shape.vocab},
                     {"max_positions", shape.seq}}},
                   {"data", {{"source", "markov"}, {"successors", 16}, {"skew", 2.0}}},
                   {"batch", shape.batch},
                   {"seq", shape.seq},
                   {"steps", shape.warmup + shape.steps},
                   {"precision", "fp32"},
                   {"optimizer",
                    {{"type", "adamw"},
                     {"lr", shape.lr},
                     {"beta1", shape.beta1},
                     {"beta2", shape.beta2},
                     {"eps", shape.eps},
                     {"weight_decay", shape.weight_decay},
                     {"grad_clip", 0.0},
                     {"schedule", {{"kind", "constant"}}}}},
                   {"seed", shape.seed},
                   {"device", "cpu"},
                   {"threads", shape.threads},
                   {"activation_checkpointing", shape.activation_checkpointing},
                   {"output", {{"log_every", 1}}}};
  if (!shape.tokens.empty()) scenario["data"] = {{"source", "file"}, {"path", shape.tokens}};
  if (!shape.init_weights.empty()) scenario["init"] = {{"safetensors", shape.init_weights}};
  if (tier != "device") {
    json zero = {{"stage", 3}, {"params", tier}, {"optimizer", tier}};
    if (tier == "nvme") zero["nvme_paths"] = json::array({nvme_dir});
    scenario["zero"] = std::move(zero);
  }
  return scenario;
}

std::vector<std::string> peer_train_args(const TrainShape& shape, const std::string& mode,
                                         const std::string& nvme_dir) {
  std::vector<std::string> args = {"train",
                                   "--mode",
                                   mode,
                                   "--layers",
                                   std::to_string(shape.layers),
                                   "--hidden",
                                   std::to_string(shape.hidden),
                                   "--heads",
                                   std::to_string(shape.heads),
                                   "--vocab",
                                   std::to_string(shape.vocab),
                                   "--seq",
                                   std::to_string(shape.seq),
                                   "--batch",
                                   std::to_string(shape.batch),
                                   "--steps",
                                   std::to_string(shape.steps),
                                   "--warmup",
                                   std::to_string(shape.warmup),
                                   "--threads",
                                   std::to_string(shape.threads),
                                   "--seed",
                                   std::to_string(shape.seed),
                                   "--lr",
                                   fmt::format("{}", shape.lr),
                                   "--beta1",
                                   fmt::format("{}", shape.beta1),
                                   "--beta2",
                                   fmt::format("{}", shape.beta2),
                                   "--eps",
                                   fmt::format("{}", shape.eps),
                                   "--weight-decay",
                                   fmt::format("{}", shape.weight_decay)};
  if (shape.activation_checkpointing) args.emplace_back("--activation-checkpointing");
  if (!shape.init_weights.empty()) args.insert(args.end(), {"--init", shape.init_weights});
  if (!shape.tokens.empty()) args.insert(args.end(), {"--tokens", shape.tokens});
  if (mode == "ds-nvme") {
    args.emplace_back("--nvme-path");
    args.push_back(nvme_dir);
  }
  return args;
}

std::vector<std::string> peer_init_args(const TrainShape& shape, const std::string& dir) {
  return {"init",
          "--layers",
          std::to_string(shape.layers),
          "--hidden",
          std::to_string(shape.hidden),
          "--heads",
          std::to_string(shape.heads),
          "--vocab",
          std::to_string(shape.vocab),
          "--seq",
          std::to_string(shape.seq),
          "--batch",
          std::to_string(shape.batch),
          "--batches",
          std::to_string(shape.warmup + shape.steps),
          "--seed",
          std::to_string(shape.seed),
          "--out",
          dir};
}

json loss_max_rel_diff(const json& zinf_losses, const json& peer_losses) {
  const std::size_t n = std::min<std::size_t>({3, zinf_losses.size(), peer_losses.size()});
  if (n == 0) return nullptr;
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double z = zinf_losses.at(i).get<double>(), p = peer_losses.at(i).get<double>();
    worst = std::max(worst, std::abs(z - p) / std::abs(p));
  }
  return worst;
}

Result<json> run_zinf_train(const json& scenario, const std::filesystem::path& work, const std::string& tag) {
  const std::filesystem::path scenario_path = work / fmt::format("{}.json", tag);
  const std::filesystem::path record_path = work / fmt::format("{}-record.json", tag);
  {
    std::error_code error;
    std::filesystem::remove(record_path, error);
  }
  {
    std::ofstream file(scenario_path);
    file << scenario.dump(2) << '\n';
    if (!file.flush()) return Status::io_error(fmt::format("bench peers: cannot write {}", scenario_path.string()));
  }
  std::error_code error;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
  if (error) return Status::internal(fmt::format("bench peers: cannot find this executable: {}", error.message()));
  const std::vector<std::string> argv = {self,   "train", scenario_path.string(), "--quiet", "--no-resume", "--format",
                                         "json", "--out", record_path.string()};
  ZINF_ASSIGN_OR_RETURN(const ProcessOutput out, run_process(argv));
  if (out.exit_status != 0) {
    return Status::internal(fmt::format("bench peers: zinf train ({}) failed (exit {}): {}", tag, out.exit_status,
                                        last_line(out.err).empty() ? std::string("no message") : last_line(out.err)));
  }
  ZINF_ASSIGN_OR_RETURN(const json record, spec::read_json_file(record_path.string()));
  json result = {{"argv", argv}, {"scenario", scenario}};
  std::vector<double> losses, step_ms;
  double moved = 0, nvme_read = 0, nvme_write = 0;
  std::size_t measured = 0;
  for (const json& step : record.at("steps")) {
    losses.push_back(step.at("loss").get<double>());
    if (step.value("warmup", false)) continue;
    step_ms.push_back(step.at("step_ms").get<double>());
    const json& e = step.at("engine");
    nvme_read += e.value("nvme_read_bytes", 0.0);
    nvme_write += e.value("nvme_write_bytes", 0.0);
    moved += e.value("host_to_device_bytes", 0.0) + e.value("device_to_host_bytes", 0.0);
    ++measured;
  }
  if (measured == 0) return Status::internal(fmt::format("bench peers: zinf train ({}) measured no step", tag));
  result["tokens_per_s"] = record.at("summary").at("tokens_per_s");
  result["step_ms"] = step_ms;
  result["losses"] = losses;
  result["peak_rss_bytes"] = record.at("memory").at("host").at("peak_rss_bytes");
  result["nvme_read_bytes_per_step"] = nvme_read / static_cast<double>(measured);
  result["nvme_write_bytes_per_step"] = nvme_write / static_cast<double>(measured);
  result["nvme_bytes_per_step"] = (nvme_read + nvme_write) / static_cast<double>(measured);
  result["host_device_bytes_per_step"] = moved / static_cast<double>(measured);
  result["params"] = record.at("memory").at("model_states_bytes").value("params", 0.0);
  return result;
}

}  // namespace zinf::cli
