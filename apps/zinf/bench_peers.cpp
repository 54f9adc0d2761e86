// `zinf bench peers` (bench_peers.h): options, the alternating rounds, the record. The sides are
// peer_sides.h; the rendering of the record is peers_render.cpp.
#include "apps/zinf/bench_peers.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/zinf/output.h"
#include "apps/zinf/peer_rows.h"
#include "apps/zinf/peer_sides.h"
#include "apps/zinf/peers_render.h"
#include "apps/zinf/scratch_dir.h"
#include "kernels/threads.h"
#include "libengine/core/units.h"
#include "libengine/io/swap_store.h"
#include "libengine/memory/staging_pool.h"
#include "probes/fio_runner.h"
#include "probes/io_bench_runner.h"
#include "probes/latency_stats.h"
#include "probes/machine_probes.h"
#include "probes/process.h"
#include "probes/ratio_spread.h"
#include "reports/record_envelope.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::find_program;
using probes::fio_argv;
using probes::fio_direction;
using probes::FioJob;
using probes::FioMeasurement;
using probes::io_test_name;
using probes::IoBenchConfig;
using probes::IoBenchResult;
using probes::IoSample;
using probes::IoTest;
using probes::IoTestResult;
using probes::kBenchIoStagingBytes;
using probes::kSpreadRule;
using probes::MachineProbes;
using probes::ProbeSample;
using probes::ratio_with_spread;
using probes::run_fio;
using probes::run_io_bench;
using probes::SampleSpread;
using probes::spread_of;

namespace {

using nlohmann::json;

const std::vector<std::string> kItems = {"optimizer", "nvme", "offload-cpu", "offload-nvme", "no-offload"};

// A figure of a peer's output, or its error text (which Rows::add records as the side's error).
json peer_value(const json& output, const char* side, const char* key) {
  if (output.contains("error")) return output.at("error");
  const json& s = output.at("sides").at(side);
  if (s.contains("error")) return s.at("error");
  return s.at(key);
}

class BenchPeersCommand final : public Subcommand {
 public:
  BenchPeersCommand(CLI::App& bench, CLI::App** app) {
    cmd_ = bench.add_subcommand("peers",
                                "zinf next to DeepSpeed and PyTorch 2 (the project venv): CPU AdamW, NVMe I/O, the "
                                "ZeRO-3 offloaded step and the plain step, alternating, in one record");
    *app = cmd_;
    CLI::App& c = *cmd_;
    c.add_option("--items", items_text_,
                 "Comma list of optimizer, nvme, offload-cpu, offload-nvme, no-offload (default all)")
        ->type_name("LIST");
    c.add_option("--repeat", repeat_text_, "Rounds of each item, 2..20, alternating who goes first (default 3)")
        ->type_name("N");
    c.add_option("--threads", threads_text_, "Compute threads of every side, 1..1024 (default: one per core)")
        ->type_name("N");
    c.add_option("--adam-elements", adam_text_, "fp32 parameters of the optimizer item (default 16777216)")
        ->type_name("N");
    c.add_option("--path", path_, "Directory for the NVMe item's files and the NVMe offload's swap (default .)")
        ->type_name("DIR");
    c.add_option("--io-size", io_size_text_, "Bytes written and read per NVMe sample (default 256MiB)")
        ->type_name("SIZE");
    c.add_option("--block", block_text_, "NVMe request size, a multiple of 4KiB (default 1MiB)")->type_name("SIZE");
    c.add_option("--qd", qd_text_, "NVMe queue depth, 1..1024 (default 32)")->type_name("N");
    for (auto& [flag, text, help] : model_flags_) c.add_option(flag, *text, help)->type_name("N");
    c.add_flag("--no-checkpointing", no_checkpointing_, "Train without activation checkpointing (default: with)");
    c.add_flag("--no-compile", no_compile_, "Skip torch.compile in the no-offload item");
    c.add_option("--peer-timeout", peer_timeout_text_,
                 "Seconds one peer run may take before it is killed and its "
                 "error recorded, 10..86400 (default 3600)")
        ->type_name("S");
    c.add_option("--python", python_, "The project venv's python (default: .venv/bin/python above this binary)")
        ->type_name("PATH");
    c.add_option("--peers-script", script_, "Path of peers.py (default: the checkout's scripts/bench/peers.py)")
        ->type_name("PATH");
    add_output_options(c, output_);
    c.footer(
        "Needs the project venv: scripts/install-deps.sh. Example:\n"
        "  zinf bench peers --repeat 3 --path /mnt/nvme --out runs/peers.json\n"
        "  zinf report runs/peers.json");
  }

  Status run(const Io& io) override;

 private:
  Status parse();
  Status optimizer_round(const PeerScript& peers, bool zinf_first, json& raw);
  Status nvme_round(io::SwapStore& store, const PeerScript& peers, const std::string& fio, bool zinf_first, json& raw);
  Status train_round(const std::string& item, const PeerScript& peers, const std::filesystem::path& work,
                     bool zinf_first, json& raw);
  // The bytes each side read from and wrote to storage per measured step of an NVMe-offloaded run.
  void add_storage_rows(const std::string& item, const std::string& what, const json& zinf, const json& ds);

  CLI::App* cmd_ = nullptr;
  std::string items_text_ = "optimizer,nvme,offload-cpu,offload-nvme,no-offload";
  std::string repeat_text_ = "3", threads_text_, adam_text_ = "16777216", path_ = ".", io_size_text_ = "256MiB";
  std::string block_text_ = "1MiB", qd_text_ = "32";
  std::string layers_ = "4", hidden_ = "512", heads_ = "8", vocab_ = "8192", seq_ = "128", batch_ = "4";
  std::string steps_ = "4", warmup_ = "1";
  struct ModelFlag {
    const char* flag;
    std::string* text;
    const char* help;
  };
  ModelFlag model_flags_[8] = {{"--layers", &layers_, "GPT blocks of the training items (default 4)"},
                               {"--hidden", &hidden_, "Hidden size (default 512)"},
                               {"--heads", &heads_, "Attention heads (default 8)"},
                               {"--vocab", &vocab_, "Vocabulary (default 8192)"},
                               {"--seq", &seq_, "Tokens per sequence (default 128)"},
                               {"--batch", &batch_, "Sequences per step (default 4)"},
                               {"--steps", &steps_, "Timed steps per training run (default 4)"},
                               {"--warmup", &warmup_, "Untimed steps before them (default 1)"}};
  bool no_checkpointing_ = false, no_compile_ = false;
  std::string python_, script_, peer_timeout_text_ = "3600";
  int peer_timeout_ = 3600;
  OutputOptions output_;

  std::vector<std::string> items_;
  std::int64_t repeat_ = 3;
  std::size_t adam_elements_ = 0;
  std::uint64_t io_size_ = 0, block_ = 0;
  unsigned qd_ = 32;
  TrainShape shape_;
  Rows rows_;
};

Status BenchPeersCommand::parse() {
  std::set<std::string> seen;
  std::string text = items_text_;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    if (std::find(kItems.begin(), kItems.end(), item) == kItems.end()) {
      return Status::invalid_argument(fmt::format("--items: '{}' is not one of {}", item, fmt::join(kItems, ", ")));
    }
    if (!seen.insert(item).second) return Status::invalid_argument(fmt::format("--items: '{}' is repeated", item));
    items_.push_back(item);
    start = comma + 1;
  }
  ZINF_ASSIGN_OR_RETURN(repeat_, parse_int_in_range(repeat_text_, "--repeat", 2, 20));
  shape_.threads = kernels::cpu::available_cores();
  if (!threads_text_.empty()) {
    ZINF_ASSIGN_OR_RETURN(const std::int64_t t, parse_int_in_range(threads_text_, "--threads", 1, 1024));
    shape_.threads = static_cast<int>(t);
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t adam, parse_int_in_range(adam_text_, "--adam-elements", 1024, 1ll << 31));
  adam_elements_ = static_cast<std::size_t>(adam);
  ZINF_ASSIGN_OR_RETURN(block_, parse_bytes(block_text_, "--block"));
  if (block_ % 4096 != 0 || block_ > (256ull << 20)) {
    return Status::invalid_argument(fmt::format("--block: '{}' is not a multiple of 4KiB up to 256MiB", block_text_));
  }
  ZINF_ASSIGN_OR_RETURN(io_size_, parse_bytes(io_size_text_, "--io-size"));
  if (io_size_ % block_ != 0) {
    return Status::invalid_argument(
        fmt::format("--io-size: '{}' is not a multiple of --block {}", io_size_text_, block_text_));
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t qd, parse_int_in_range(qd_text_, "--qd", 1, 1024));
  qd_ = static_cast<unsigned>(qd);
  std::int64_t* targets[8] = {&shape_.layers, &shape_.hidden, &shape_.heads, &shape_.vocab,
                              &shape_.seq,    &shape_.batch,  &shape_.steps, &shape_.warmup};
  for (int i = 0; i < 8; ++i) {
    const std::int64_t min = i == 7 ? 0 : 1;
    ZINF_ASSIGN_OR_RETURN(*targets[i], parse_int_in_range(*model_flags_[i].text, model_flags_[i].flag, min, 1 << 20));
  }
  if (shape_.hidden % shape_.heads != 0) {
    return Status::invalid_argument(
        fmt::format("--heads: {} does not divide --hidden {}", shape_.heads, shape_.hidden));
  }
  shape_.activation_checkpointing = !no_checkpointing_;
  ZINF_ASSIGN_OR_RETURN(const std::int64_t timeout,
                        parse_int_in_range(peer_timeout_text_, "--peer-timeout", 10, 86400));
  peer_timeout_ = static_cast<int>(timeout);
  return check_writable_directory(path_, "--path");
}

Status BenchPeersCommand::optimizer_round(const PeerScript& peers, bool zinf_first, json& raw) {
  const std::vector<std::string> args = {"optimizer", "--elements", std::to_string(adam_elements_), "--threads",
                                         std::to_string(shape_.threads)};
  json zinf, peer;
  MachineProbes probes;
  for (int turn = 0; turn < 2; ++turn) {
    if ((turn == 0) == zinf_first) {
      zinf = zinf_adam_sample(adam_elements_, 5);
      ZINF_ASSIGN_OR_RETURN(const ProbeSample triad, probes.memory_bandwidth());
      zinf["triad_gbps"] = triad.zinf;
    } else {
      ZINF_ASSIGN_OR_RETURN(peer, run_peer(peers, args, peer_timeout_));
    }
  }
  const std::string what =
      fmt::format("AdamW step over {} fp32 parameters, {} threads", adam_elements_, shape_.threads);
  const std::string ds = "DeepSpeedCPUAdam(adamw_mode=True)", pt = "torch.optim.AdamW(foreach=True)";
  const std::string zname = zinf.at("name").get<std::string>();
  rows_.add("cpu adamw params/s", "optimizer", "params/s", what, true, "zinf", zname, zinf.at("params_per_s"));
  rows_.add("cpu adamw params/s", "optimizer", "params/s", what, true, "deepspeed", ds,
            peer_value(peer, "deepspeed", "params_per_s"));
  rows_.add("cpu adamw params/s", "optimizer", "params/s", what, true, "pytorch", pt,
            peer_value(peer, "pytorch", "params_per_s"));
  const std::string gb_what = what + "; 28 bytes moved per parameter; reference: the round's triad (the bound)";
  rows_.add("cpu adamw GB/s", "optimizer", "GB/s", gb_what, true, "zinf", zname, zinf.at("gbps"));
  rows_.add("cpu adamw GB/s", "optimizer", "GB/s", gb_what, true, "deepspeed", ds,
            peer_value(peer, "deepspeed", "gbps"));
  rows_.add("cpu adamw GB/s", "optimizer", "GB/s", gb_what, true, "pytorch", pt, peer_value(peer, "pytorch", "gbps"));
  rows_.add("cpu adamw GB/s", "optimizer", "GB/s", gb_what, true, "reference", "triad a = b + 3c (zinf, same round)",
            zinf.at("triad_gbps"));
  raw = {{"zinf", zinf}, {"peers", peer}};
  return Status::ok();
}

Status BenchPeersCommand::nvme_round(io::SwapStore& store, const PeerScript& peers, const std::string& fio,
                                     bool zinf_first, json& raw) {
  json zinf = json::object(), peer, fio_out = json::object();
  for (int turn = 0; turn < 2; ++turn) {
    if ((turn == 0) == zinf_first) {
      IoBenchConfig config;
      config.size_bytes = io_size_;
      config.tensor_bytes = std::min<std::uint64_t>(io_size_, 64ull << 20);
      config.tests = {IoTest::kSeqWrite, IoTest::kSeqRead};
      config.staging_bytes = memory::StagingPool::recommended_bytes(config.tensor_bytes, store.block_bytes(),
                                                                    store.queue_depth(), kBenchIoStagingBytes);
      config.after_sample_overwrites = !fio.empty();
      // fio right after each zinf pass, on the store's own files (as bench io --fio does).
      config.after_sample = [&](IoTest test, unsigned, unsigned, const IoSample&) -> Status {
        if (fio.empty()) return Status::ok();
        FioJob job;
        job.name = fmt::format("zinf-peers-{}", io_test_name(test));
        bool direct = true;
        for (const io::SwapPathInfo& p : store.paths()) {
          job.filenames.push_back(p.reopen_path);
          direct = direct && p.direct;
        }
        job.rw = test == IoTest::kSeqWrite ? "write" : "read";
        job.direct = direct;
        job.block_bytes = store.block_bytes();
        job.iodepth = store.queue_depth();
        job.size_bytes = io_size_;
        ZINF_ASSIGN_OR_RETURN(const std::vector<std::string> argv, fio_argv(fio, job));
        ZINF_ASSIGN_OR_RETURN(const FioMeasurement m, run_fio(argv, fio_direction(job.rw)));
        fio_out[job.rw] = m.bytes_per_second / 1e9;
        fio_out[job.rw + "_argv"] = argv;
        return Status::ok();
      };
      ZINF_ASSIGN_OR_RETURN(const IoBenchResult result, run_io_bench(store, config));
      for (const IoTestResult& t : result.tests) {
        zinf[std::string(io_test_name(t.test))] = t.samples.front().gbps;
        if (t.verified) zinf["verified"] = *t.verified;
      }
    } else {
      ZINF_ASSIGN_OR_RETURN(peer, run_peer(peers,
                                           {"io", "--dir", path_, "--bytes", std::to_string(io_size_), "--block",
                                            std::to_string(block_), "--queue-depth", std::to_string(qd_)},
                                           peer_timeout_));
    }
  }
  const std::string what = fmt::format(
      "sequential {} in {}, block {}, queue depth {}; reference: fio (io_uring, the "
      "swap store's files)",
      format_bytes(static_cast<double>(io_size_)), path_, format_bytes(static_cast<double>(block_)), qd_);
  for (const char* dir : {"write", "read"}) {
    const std::string name = fmt::format("nvme seq {} GB/s", dir);
    rows_.add(name, "nvme", "GB/s", what, true, "zinf", "swap store", zinf.at(fmt::format("seq-{}", dir)));
    json v =
        peer.contains("error") ? peer.at("error") : peer.at("sides").at("deepspeed").at(fmt::format("{}_gbps", dir));
    rows_.add(name, "nvme", "GB/s", what, true, "deepspeed", "aio_handle sync_pwrite/sync_pread", v);
    if (fio_out.contains(dir)) rows_.add(name, "nvme", "GB/s", what, true, "reference", "fio", fio_out.at(dir));
  }
  raw = {{"zinf", zinf}, {"peers", peer}, {"fio", fio_out}};
  return Status::ok();
}

Status BenchPeersCommand::train_round(const std::string& item, const PeerScript& peers,
                                      const std::filesystem::path& work, bool zinf_first, json& raw) {
  const std::string tier = item == "offload-cpu" ? "cpu" : item == "offload-nvme" ? "nvme" : "device";
  const std::filesystem::path nvme = std::filesystem::path(path_) / fmt::format("zinf-peers-swap-{}", ::getpid());
  std::error_code ignored;
  if (tier == "nvme") std::filesystem::create_directories(nvme, ignored);
  std::vector<std::string> modes;
  if (tier == "device") {
    modes = {"eager"};
    if (!no_compile_) modes.emplace_back("compile");
  } else {
    modes = {tier == "cpu" ? "ds-cpu" : "ds-nvme"};
  }
  json zinf, peer = json::object();
  for (int turn = 0; turn < 2; ++turn) {
    if ((turn == 0) == zinf_first) {
      ZINF_ASSIGN_OR_RETURN(zinf, run_zinf_train(peer_scenario(shape_, tier, nvme.string()), work, item));
    } else {
      for (const std::string& mode : modes) {
        ZINF_ASSIGN_OR_RETURN(peer[mode], run_peer(peers, peer_train_args(shape_, mode, nvme.string()), peer_timeout_));
      }
    }
  }
  std::filesystem::remove_all(nvme, ignored);
  const std::string what = fmt::format(
      "GPT {}L h{} heads {} vocab {}, batch {} x seq {}, fp32, AdamW, activation checkpointing {}, {} threads{}",
      shape_.layers, shape_.hidden, shape_.heads, shape_.vocab, shape_.batch, shape_.seq,
      shape_.activation_checkpointing ? "on" : "off", shape_.threads,
      tier == "device" ? ", no offload" : fmt::format(", ZeRO-3, params + optimizer on {}", tier));
  raw = {{"zinf", zinf}, {"peers", peer}, {"loss_max_rel_diff", json::object()}};
  for (const std::string& mode : modes) {
    const json& out = peer.at(mode);
    if (out.contains("losses")) raw["loss_max_rel_diff"][mode] = loss_max_rel_diff(zinf.at("losses"), out.at("losses"));
  }
  if (tier == "nvme") add_storage_rows(item, what, zinf, peer.at("ds-nvme"));
  for (const std::string& mode : modes) {
    const bool ds = mode.rfind("ds-", 0) == 0;
    const std::string side = ds ? "deepspeed" : "pytorch";
    const std::string side_name =
        ds ? "deepspeed.initialize (CPU accelerator, gloo)" : (mode == "compile" ? "torch.compile" : "PyTorch eager");
    const json& out = peer.at(mode);
    const std::string name = fmt::format("{} tokens/s{}", item, mode == "compile" ? " (torch.compile)" : "");
    rows_.add(name, item, "tokens/s", what, true, "zinf", "zinf train", zinf.at("tokens_per_s"));
    rows_.add(name, item, "tokens/s", what, true, side, side_name,
              out.contains("error") ? out.at("error") : out.at("tokens_per_s"));
    if (mode == "compile") continue;
    const std::string rss = fmt::format("{} peak RSS MiB", item);
    rows_.add(rss, item, "MiB (lower is better)", what, false, "zinf", "zinf train",
              zinf.at("peak_rss_bytes").get<double>() / 1048576.0);
    rows_.add(rss, item, "MiB (lower is better)", what, false, side, side_name,
              out.contains("error") ? out.at("error") : json(out.at("peak_rss_bytes").get<double>() / 1048576.0));
  }
  return Status::ok();
}

void BenchPeersCommand::add_storage_rows(const std::string& item, const std::string& what, const json& zinf,
                                         const json& ds) {
  const std::string note =
      what + "; zinf: its swap store's counters; DeepSpeed: /proc/self/io read_bytes / write_bytes of its process";
  for (const char* dir : {"read", "write"}) {
    const std::string name = fmt::format("{} storage {} MB/step", item, dir);
    const std::string unit = "MB/step (lower is better)";
    rows_.add(name, item, unit, note, false, "zinf", "zinf train (swap counters)",
              zinf.at(fmt::format("nvme_{}_bytes_per_step", dir)).get<double>() / 1e6);
    const std::string key = fmt::format("storage_{}_bytes_per_step", dir);
    json v = ds.contains("error") ? ds.at("error")
             : ds.contains(key)   ? json(ds.at(key).get<double>() / 1e6)
                                  : json("not measured: /proc/self/io was not readable in the DeepSpeed process");
    rows_.add(name, item, unit, note, false, "deepspeed", "deepspeed.initialize (/proc/self/io)", v);
  }
}

Status BenchPeersCommand::run(const Io& io) {
  ZINF_RETURN_IF_ERROR(output_format(output_).status());
  if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));
  ZINF_RETURN_IF_ERROR(parse());
  ZINF_ASSIGN_OR_RETURN(const PeerScript peers, find_peer_script(python_, script_));
  kernels::cpu::set_compute_threads(shape_.threads);
  ZINF_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::create("bench peers", "zinf-peers-"));
  json record = reports::make_record_envelope("bench-peers", 1, io.started);
  json rounds = json::array();
  std::optional<json> versions;
  json init = nullptr;
  if (std::any_of(items_.begin(), items_.end(), [](const std::string& i) { return i != "optimizer" && i != "nvme"; })) {
    // One set of initial weights and one token stream for every side of every training row.
    io.err << "bench peers: writing the shared initial weights and tokens (peers.py init)\n";
    ZINF_ASSIGN_OR_RETURN(init,
                          run_peer(peers, peer_init_args(shape_, (work.path() / "init").string()), peer_timeout_));
    if (init.contains("error")) {
      return Status::internal(
          fmt::format("bench peers: peers.py init failed: {}", init.at("error").get<std::string>()));
    }
    shape_.init_weights = init.at("weights").get<std::string>();
    shape_.tokens = init.at("tokens").get<std::string>();
  }
  for (const std::string& item : items_) {
    std::unique_ptr<io::SwapStore> store;
    std::string fio;
    if (item == "nvme") {
      io::SwapStoreOptions options;
      options.paths = {path_};
      options.planned_bytes = io_size_;
      options.block_bytes = block_;
      options.queue_depth = qd_;
      options.largest_transfer_bytes = std::min<std::uint64_t>(io_size_, 64ull << 20);
      options.staging_budget_bytes = kBenchIoStagingBytes;
      ZINF_ASSIGN_OR_RETURN(store, io::SwapStore::open(options));
      const char* search = std::getenv("PATH");
      if (Result<std::string> found = find_program("fio", search == nullptr ? "/usr/bin:/bin" : search);
          found.is_ok()) {
        fio = *found;
      }
    }
    for (std::int64_t r = 0; r < repeat_; ++r) {
      const bool zinf_first = r % 2 == 0;
      io.err << fmt::format("bench peers: {} round {}/{} ({} first)\n", item, r + 1, repeat_,
                            zinf_first ? "zinf" : "peers");
      json raw;
      if (item == "optimizer") {
        ZINF_RETURN_IF_ERROR(optimizer_round(peers, zinf_first, raw));
      } else if (item == "nvme") {
        ZINF_RETURN_IF_ERROR(nvme_round(*store, peers, fio, zinf_first, raw));
      } else {
        ZINF_RETURN_IF_ERROR(train_round(item, peers, work.path(), zinf_first, raw));
      }
      raw["item"] = item;
      raw["round"] = r + 1;
      raw["first"] = zinf_first ? "zinf" : "peers";
      for (const json& p : {raw.at("peers")}) {
        if (!versions && p.contains("versions")) versions = p.at("versions");
        for (const auto& [mode, out] : p.items()) {
          if (!versions && out.is_object() && out.contains("versions")) versions = out.at("versions");
        }
      }
      rounds.push_back(std::move(raw));
    }
  }
  record["input"] = {{"items", items_},
                     {"repeat", repeat_},
                     {"threads", shape_.threads},
                     {"adam_elements", adam_elements_},
                     {"path", path_},
                     {"io_bytes", io_size_},
                     {"block_bytes", block_},
                     {"queue_depth", qd_},
                     {"model",
                      {{"layers", shape_.layers},
                       {"hidden", shape_.hidden},
                       {"heads", shape_.heads},
                       {"vocab", shape_.vocab},
                       {"seq", shape_.seq},
                       {"batch", shape_.batch},
                       {"steps", shape_.steps},
                       {"warmup", shape_.warmup},
                       {"activation_checkpointing", shape_.activation_checkpointing}}},
                     {"python", peers.python},
                     {"peers_script", peers.script}};
  record["init"] = init;
  record["peer_versions"] = versions.value_or(json(nullptr));
  record["spread_rule"] = kSpreadRule;
  record["rows"] = rows_.to_json();
  record["rounds"] = std::move(rounds);
  record["conditions"] = reports::record_conditions(io.started);
  return emit(output_, render_bench_peers(record), io);
}

}  // namespace

std::unique_ptr<Subcommand> add_bench_peers_command(CLI::App& bench, CLI::App** app) {
  return std::make_unique<BenchPeersCommand>(bench, app);
}

}  // namespace zinf::cli
