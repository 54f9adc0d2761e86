#include "apps/zinf/train_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "libengine/core/units.h"
#include "libengine/io/swap_store.h"
#include "libengine/memory/aligned_buffer.h"
#include "libengine/memory/staging_pool.h"
#include "planner/hardware_profile.h"
#include "probes/block_kernel_probe.h"
#include "probes/io_bench_runner.h"
#include "probes/machine_probes.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::BlockKernelSeconds;
using probes::IoBenchConfig;
using probes::IoBenchResult;
using probes::IoTest;
using probes::IoTestResult;
using probes::is_write_test;
using probes::kBenchIoStagingBytes;
using probes::MachineProbes;
using probes::probe_block_kernels;
using probes::ProbeSample;
using probes::run_io_bench;

namespace {

using nlohmann::json;

constexpr std::uint64_t kNvmeProbeBytes = 64ull << 20;
// Each NVMe figure is the best of three rounds, as the other probes take theirs: one round alone
// read 1.2 to 1.9 GB/s on the same disk from run to run (a run right after another that wrote
// gigabytes to the same disk measures it still busy), which moved a predicted optimizer phase 3x.
constexpr int kNvmeProbeRounds = 3;

struct NvmeProbe {
  double write = 0;  // B/s
  double read = 0;
  double mixed = 0;  // B/s of a read and a write of the same size running at once, both counted
};

// A read of one 64 MiB extent while another is rewritten, both in flight together (the optimizer
// pipeline reads ahead while it writes behind): the bytes of both over the time both took.
Result<double> mixed_bandwidth(io::SwapStore& store) {
  ZINF_ASSIGN_OR_RETURN(memory::AlignedBuffer first, memory::AlignedBuffer::allocate(kNvmeProbeBytes, 4096));
  ZINF_ASSIGN_OR_RETURN(memory::AlignedBuffer second, memory::AlignedBuffer::allocate(kNvmeProbeBytes, 4096));
  std::fill(first.data(), first.data() + first.size(), std::byte{1});
  std::fill(second.data(), second.data() + second.size(), std::byte{2});
  ZINF_ASSIGN_OR_RETURN(const io::Ticket a, store.write(first.bytes()));
  ZINF_RETURN_IF_ERROR(store.wait(a));
  ZINF_ASSIGN_OR_RETURN(const io::Ticket b, store.write(second.bytes()));
  ZINF_RETURN_IF_ERROR(store.wait(b));
  using Clock = std::chrono::steady_clock;
  double best = 0;
  for (int round = 0; round < kNvmeProbeRounds; ++round) {
    const Clock::time_point start = Clock::now();
    ZINF_ASSIGN_OR_RETURN(const io::Ticket reading, store.read(a, first.bytes()));
    ZINF_ASSIGN_OR_RETURN(const io::Ticket writing, store.rewrite(b, second.bytes()));
    ZINF_RETURN_IF_ERROR(store.wait(reading));
    ZINF_RETURN_IF_ERROR(store.wait(writing));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (seconds > 0) best = std::max(best, 2.0 * static_cast<double>(kNvmeProbeBytes) / seconds);
  }
  ZINF_RETURN_IF_ERROR(store.release(a));
  ZINF_RETURN_IF_ERROR(store.release(b));
  return best;
}

// Sequential writes and reads of 64 MiB through the swap store on the scenario's paths, then a read
// and a write at once (mixed_bandwidth); each the best of kNvmeProbeRounds.
Result<NvmeProbe> probe_nvme(const std::vector<std::string>& paths) {
  io::SwapStoreOptions store_options;
  store_options.paths = paths;
  store_options.planned_bytes = 2 * kNvmeProbeBytes;
  store_options.largest_transfer_bytes = kNvmeProbeBytes;
  store_options.queue_depth = 32;
  store_options.allow_buffered_fallback = true;
  store_options.staging_budget_bytes = kBenchIoStagingBytes;
  store_options.on_warning = [](const std::string&) {};
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<io::SwapStore> store, io::SwapStore::open(store_options));
  IoBenchConfig config;
  config.size_bytes = kNvmeProbeBytes;
  config.tensor_bytes = 16ull << 20;
  config.tests = {IoTest::kSeqWrite, IoTest::kSeqRead};
  config.repeat = kNvmeProbeRounds;
  config.staging_bytes = memory::StagingPool::recommended_bytes(config.tensor_bytes, store->block_bytes(),
                                                                store->queue_depth(), kBenchIoStagingBytes);
  ZINF_ASSIGN_OR_RETURN(const IoBenchResult result, run_io_bench(*store, config));
  NvmeProbe probe;
  for (const IoTestResult& test : result.tests) {
    (is_write_test(test.test) ? probe.write : probe.read) = test.gbps.max * 1e9;
  }
  ZINF_ASSIGN_OR_RETURN(probe.mixed, mixed_bandwidth(*store));
  return probe;
}

// FLOP/s of the model's own block matmuls on the CPU: qkv [B·T, C] x [3C, C]^T, attention proj
// [C, C], MLP fc [F, C] and proj [C, F], one round timed as a whole (the MLP shape alone is the most
// efficient of the four). Small shapes reach far less than the 2048^3 peak, and the step's time is
// mostly such matmuls. Best of 5 rounds after a warm-up (the machine may be shared: the best round
// is the machine's figure, as for the other probes).
double model_shape_matmul_flops(const spec::Scenario& scenario) {
  const auto rows = static_cast<std::size_t>(scenario.batch * scenario.seq);
  const auto c = static_cast<std::size_t>(scenario.shape.hidden);
  const auto f = static_cast<std::size_t>(scenario.shape.ffn_hidden);
  const std::array<std::pair<std::size_t, std::size_t>, 4> shapes{{{c, 3 * c}, {c, c}, {c, f}, {f, c}}};
  const std::size_t widest = std::max(3 * c, f);
  std::vector<float> a(rows * widest, 0.01f), w(widest * widest, 0.02f), out(rows * widest);
  double flops = 0;
  for (const auto& [in, n] : shapes) flops += 2.0 * static_cast<double>(rows * in * n);
  const auto round = [&] {
    for (const auto& [in, n] : shapes)
      kernels::cpu::matmul_forward(out.data(), a.data(), w.data(), nullptr, rows, in, n);
  };
  round();
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    round();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (seconds > 0) best = std::max(best, flops / seconds);
  }
  return best;
}

double error_percent(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

json row(std::string figure, std::string unit, double predicted, double measured) {
  const bool comparable = measured > 0 && std::isfinite(measured);
  return {{"figure", std::move(figure)},
          {"unit", std::move(unit)},
          {"predicted", predicted},
          {"measured", measured},
          {"error_percent", comparable ? json(error_percent(predicted, measured)) : json(nullptr)}};
}

double number_at(const json& record, std::initializer_list<const char*> path) {
  const json* at = &record;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return 0.0;
    at = &at->at(key);
  }
  return at->is_number() ? at->get<double>() : 0.0;
}

json items_json(const std::vector<planner::MemoryItem>& items) {
  json out = json::array();
  for (const planner::MemoryItem& item : items) out.push_back({{"what", item.what}, {"bytes", item.bytes}});
  return out;
}

}  // namespace

Result<RunHardware> run_hardware(const spec::Scenario& scenario, const std::string& profile, double measured_flops,
                                 bool compute_on_host) {
  RunHardware out;
  out.figures.compute_on_host = compute_on_host;
  if (!profile.empty()) {
    Result<planner::HardwareProfile> loaded = planner::load_hardware_profile(profile);
    if (!loaded.is_ok()) return loaded.status().with_context("--hw");
    const planner::NodeSpec& node = loaded->node;
    // The scenario's matmuls run in its precision (fp32 without TF32, as PyTorch does by default).
    Result<planner::ComputeRate> rate =
        planner::gpu_compute_rate(*loaded, planner::math_mode_for(scenario.precision, /*fp32_matmul_tf32=*/false));
    if (!rate.is_ok()) return rate.status().with_context("--hw");
    out.figures.compute_flops = rate->achievable_flops;
    out.figures.memory_bandwidth = node.cpu_memory_bandwidth;
    out.figures.host_device_bandwidth = node.pcie_bandwidth_per_gpu;
    out.figures.nvme_read_bandwidth = node.nvme_read_bandwidth;
    out.figures.nvme_write_bandwidth = node.nvme_write_bandwidth;
    out.source = {{"from", fmt::format("profile {}", profile)}};
    out.from_profile = true;
  } else {
    out.figures.compute_flops = measured_flops;
    out.source = {{"from", "measured in this run"},
                  {"compute_flops", "the run's matmul peak probe (best of the probes)"}};
    if (compute_on_host) {
      out.model_shape_flops = model_shape_matmul_flops(scenario);
      use_compute_peak(out, measured_flops);
      out.source["compute_flops"] =
          "the model's four block matmul shapes, best of 5 rounds (at most the run's 2048^3 peak)";
      const BlockKernelSeconds kernels = probe_block_kernels(scenario);
      out.figures.block_kernel_forward_seconds = kernels.forward;
      out.figures.block_kernel_backward_seconds = kernels.backward;
      out.source["block_kernels"] =
          "one block's layer norms, attention, residuals and GELU on the model's shapes, best of 3";
    }
    MachineProbes probes;
    double triad = 0, copy = 0;
    for (int i = 0; i < 3; ++i) {  // the first touches the pages; the best of the rest is the machine's
      ZINF_ASSIGN_OR_RETURN(const ProbeSample memory, probes.memory_bandwidth());
      triad = std::max(triad, memory.zinf * 1e9);
      copy = std::max(copy, memory.baseline * 1e9);
    }
    out.figures.memory_bandwidth = triad;
    // On the CPU backend host<->device copies are memcpy: half memcpy's two-way figure, as `zinf hw
    // probe` takes it. On a GPU the pinned copies run over PCIe; without a profile the memcpy figure
    // is the best this probe knows.
    out.figures.host_device_bandwidth = copy / 2.0;
    out.source["memory_bandwidth"] = "triad over 3 x 128 MiB, best of 3";
    out.source["host_device_bandwidth"] = "half of memcpy, best of 3";
    if (scenario.zero.partitioned() && scenario.zero.uses_nvme()) {
      const Result<NvmeProbe> nvme = probe_nvme(scenario.zero.nvme_paths);
      if (nvme.is_ok()) {
        out.figures.nvme_write_bandwidth = nvme->write;
        out.figures.nvme_read_bandwidth = nvme->read;
        out.figures.nvme_mixed_bandwidth = nvme->mixed;
        out.source["nvme"] =
            "64 MiB sequential writes and reads through the swap store on scenario.zero.nvme_paths, then a 64 MiB "
            "read and a 64 MiB rewrite at once (mixed), each the best of 3";
      } else {
        // The run does not need this probe; its plan cannot do without it, and says so.
        const std::string why =
            fmt::format("NVMe bandwidth unmeasured: the 64 MiB probe on scenario.zero.nvme_paths could not run: {}",
                        nvme.status().message());
        out.source["nvme"] = why;
        out.unmeasured.push_back(why);
      }
    }
  }
  return out;
}

void use_compute_peak(RunHardware& hardware, double peak_flops) {
  if (hardware.from_profile) return;
  hardware.figures.compute_flops =
      hardware.model_shape_flops > 0 ? std::min(peak_flops, hardware.model_shape_flops) : peak_flops;
}

json plan_vs_measured(const planner::EnginePrediction& p, const RunHardware& hardware, const json& record) {
  const json& summary = record.at("summary");
  json rows = json::array();
  rows.push_back(row("step", "ms", p.step.step_seconds * 1e3, number_at(summary, {"step_ms", "median"})));
  rows.push_back(row("forward", "ms", p.step.forward.seconds * 1e3, number_at(summary, {"forward_ms_median"})));
  rows.push_back(row("backward", "ms", p.step.backward.seconds * 1e3, number_at(summary, {"backward_ms_median"})));
  rows.push_back(row("optimizer", "ms", p.step.optimizer.seconds * 1e3, number_at(summary, {"optimizer_ms_median"})));
  if (!hardware.unmeasured.empty()) {
    // A bandwidth of 0 drops that traffic's time from the model: a prediction, but of another run.
    for (json& time_row : rows) {
      time_row["predicted"] = nullptr;
      time_row["error_percent"] = nullptr;
    }
  }
  const json& memory = record.at("memory");
  rows.push_back(row("device peak", "bytes", p.device_peak_bytes, number_at(memory, {"device", "peak_bytes"})));
  rows.push_back(row("host peak", "bytes", p.host_peak_bytes, number_at(memory, {"host", "peak_bytes"})));
  rows.push_back(row("nvme peak", "bytes", p.nvme_peak_bytes, number_at(memory, {"nvme", "peak_bytes"})));
  const json& links = record.at("engine").at("links");
  const auto link = [&](const char* name) {
    return number_at(links, {name, "forward_backward_bytes_per_step"}) +
           number_at(links, {name, "optimizer_bytes_per_step"});
  };
  rows.push_back(row("host_to_device", "bytes/step", p.host_to_device_bytes, link("host_to_device")));
  rows.push_back(row("device_to_host", "bytes/step", p.device_to_host_bytes, link("device_to_host")));
  rows.push_back(row("nvme_read", "bytes/step", p.nvme_read_bytes, link("nvme_read")));
  rows.push_back(row("nvme_write", "bytes/step", p.nvme_write_bytes, link("nvme_write")));
  const planner::EngineHardware& hw = hardware.figures;
  return {{"schedule", planner::schedule_name(p.step.schedule)},
          {"hardware",
           {{"compute_flops", hw.compute_flops},
            {"memory_bandwidth", hw.memory_bandwidth},
            {"host_device_bandwidth", hw.host_device_bandwidth},
            {"nvme_read_bandwidth", hw.nvme_read_bandwidth},
            {"nvme_write_bandwidth", hw.nvme_write_bandwidth},
            {"nvme_mixed_bandwidth", hw.nvme_mixed_bandwidth},
            {"block_kernel_forward_seconds", hw.block_kernel_forward_seconds},
            {"block_kernel_backward_seconds", hw.block_kernel_backward_seconds},
            {"source", hardware.source}}},
          {"rows", std::move(rows)},
          {"unmeasured", hardware.unmeasured},
          {"optimizer_work_ms", p.step.optimizer_work_seconds * 1e3},
          {"optimizer_hidden_ms", p.step.optimizer_hidden_seconds * 1e3},
          {"resolved",
           {{"max_live_bytes", p.max_live_bytes},
            {"prefetch_bytes", p.prefetch_bytes},
            {"sub_groups", p.sub_groups},
            {"optimizer_read_ahead", p.optimizer_read_ahead},
            {"activation_bytes", p.activation_bytes}}},
          {"memory_items",
           {{"device", items_json(p.device_items)},
            {"host", items_json(p.host_items)},
            {"nvme", items_json(p.nvme_items)}}}};
}

json machine_load() {
  std::ifstream in("/proc/loadavg");
  double one_minute = 0;
  if (!(in >> one_minute)) return nullptr;
  return {{"load_average_1min", one_minute}, {"cores", kernels::cpu::available_cores()}};
}

std::string shared_machine_note(const json& load, const RunHardware& hardware, const json& plan) {
  if (!load.is_object()) return {};
  const double average = load.at("load_average_1min").get<double>();
  const int cores = load.at("cores").get<int>();
  if (average <= static_cast<double>(cores)) return {};
  const std::string shared =
      fmt::format("the machine was shared: 1-min load average {:.1f} on {} cores after the steps", average, cores);
  std::optional<double> step_error;
  if (plan.is_object() && plan.contains("rows")) {
    for (const json& r : plan.at("rows")) {
      if (r.at("figure") == "step" && r.at("error_percent").is_number())
        step_error = r.at("error_percent").get<double>();
    }
  }
  // The load slows the steps, never the prediction: it explains a negative step error (predicted
  // faster than measured), not a positive one.
  const std::string effect =
      hardware.from_profile ? "the steps had what the other jobs left of the profile's hardware"
                            : "the probes take the machine's best moment and the steps had what the other jobs left";
  if (!step_error) return fmt::format("{}; {}", shared, effect);
  if (*step_error < 0) {
    return fmt::format("{}; {}, so the plan reads fast (step {:+.1f}%)", shared, effect, *step_error);
  }
  return fmt::format(
      "{}; {}, yet the plan's step is {:+.1f}% slower than measured: the load does not explain that "
      "error",
      shared, effect, *step_error);
}

reports::Section render_plan_section(const json& plan) {
  reports::Section s;
  s.title = fmt::format("Plan vs measured ({} schedule)", plan.at("schedule").get<std::string>());
  s.table.columns = {{"figure"},
                     {"predicted", reports::Align::kRight},
                     {"measured", reports::Align::kRight},
                     {"error", reports::Align::kRight}};
  for (const json& r : plan.at("rows")) {
    const std::string unit = r.at("unit").get<std::string>();
    const auto text = [&](double value) {
      if (unit == "ms") return fmt::format("{:.1f} ms", value);
      return format_bytes(value) + (unit == "bytes/step" ? "/step" : "");
    };
    const json& error = r.at("error_percent");
    const double measured = r.at("measured").get<double>();
    std::string error_text = "-";
    if (error.is_number()) error_text = fmt::format("{:+.1f}%", error.get<double>());
    const json& predicted = r.at("predicted");
    s.table.rows.push_back({r.at("figure").get<std::string>(),
                            predicted.is_number() ? text(predicted.get<double>()) : std::string("unmeasured"),
                            text(measured),
                            reports::Cell(error_text, error.is_number() && std::abs(error.get<double>()) > 20.0
                                                          ? reports::Emphasis::kWarn
                                                          : reports::Emphasis::kNone)});
  }
  if (const auto note = plan.find("note"); note != plan.end() && note->is_string()) s.notes.push_back(*note);
  if (const auto unmeasured = plan.find("unmeasured"); unmeasured != plan.end() && unmeasured->is_array()) {
    for (const json& why : *unmeasured) s.notes.push_back(why.get<std::string>() + "; the times are not predicted");
  }
  s.notes.push_back(fmt::format("hardware: {}; error = (predicted - measured) / measured",
                                plan.at("hardware").at("source").value("from", std::string("?"))));
  return s;
}

}  // namespace zinf::cli
