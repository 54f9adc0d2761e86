// `zinf hw`: the hardware profiles the planner knows. `list` shows the built-ins; `show NAME|FILE`
// prints one — as the shipped JSON (a template for writing your own) or as a table; `probe`
// measures this machine (the bench suite) and writes a profile of it (hw_profile_probe.h).
#include <string>

#include <fmt/format.h>

#include "apps/zinf/bench_suite.h"
#include "apps/zinf/output.h"
#include "apps/zinf/subcommand.h"
#include "libengine/core/units.h"
#include "planner/hardware_profile.h"
#include "probes/hw_profile_probe.h"
#include "reports/record_envelope.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::profile_from_suite;

namespace {

using reports::Align;
using reports::Cell;

// Per math mode: "fp32 67 TFLOP/s peak (achievable estimated); bf16 989 TFLOP/s peak, 700 TFLOP/s achievable".
std::string flops_line(const planner::GpuSpec& gpu) {
  std::string out;
  for (planner::MathMode mode : planner::kAllMathModes) {
    if (!gpu.peak_flops.has(mode)) continue;
    const std::string achievable = gpu.achievable_flops.has(mode)
                                       ? fmt::format("{} achievable", format_flops(gpu.achievable_flops[mode]))
                                       : std::string("achievable estimated from another mode");
    out += fmt::format("{}{} {} peak, {}", out.empty() ? "" : "; ", planner::math_mode_name(mode),
                       format_flops(gpu.peak_flops[mode]), achievable);
  }
  if (gpu.single_rate) out += " (one figure in the file, read as the bf16/fp16 rate)";
  return out;
}

reports::Section profile_section(const planner::HardwareProfile& hw) {
  const planner::NodeSpec& n = hw.node;
  reports::Section s{hw.name, {}, {}, {}, {}};
  s.fields = {
      {"nodes", std::to_string(hw.nodes)},
      {"GPUs per node", fmt::format("{} x {}", n.gpus, n.gpu.name)},
      {"GPU memory", format_bytes(static_cast<double>(n.gpu.memory_bytes))},
      {"GPU FLOP/s", flops_line(n.gpu)},
      {"GPU memory bandwidth", format_bandwidth(n.gpu.memory_bandwidth)},
      {"CPU memory", fmt::format("{} at {}", format_bytes(static_cast<double>(n.cpu_memory_bytes)),
                                 format_bandwidth(n.cpu_memory_bandwidth))},
      {"NVMe", fmt::format("{}, read {}, write {}", format_bytes(static_cast<double>(n.nvme_capacity_bytes)),
                           format_bandwidth(n.nvme_read_bandwidth), format_bandwidth(n.nvme_write_bandwidth))},
      {"PCIe per GPU", format_bandwidth(n.pcie_bandwidth_per_gpu)},
      {"GPU to GPU", format_bandwidth(n.gpu_link_bandwidth)},
      {"network per node", format_bandwidth(n.network_bandwidth)},
  };
  if (!hw.description.empty()) s.notes.push_back(hw.description);
  return s;
}

class HwCommand final : public Subcommand {
 public:
  explicit HwCommand(CLI::App& app) {
    CLI::App* hw = app.add_subcommand("hw", "Hardware profiles for `zinf plan --hw`: list the built-ins, show one");
    hw->require_subcommand(1);
    list_ = hw->add_subcommand("list", "List the built-in hardware profiles");
    add_output_options(*list_, list_output_);
    show_ = hw->add_subcommand("show", "Show a profile; `--format json` prints a template for writing your own");
    show_->add_option("profile", profile_, "Built-in name or JSON file")->required()->type_name("NAME|FILE");
    add_output_options(*show_, show_output_);
    probe_ = hw->add_subcommand(
        "probe", "Measure this machine (zinf bench suite) and write a zinf.hardware/1 profile for `zinf plan --hw`");
    add_suite_flags(*probe_, probe_flags_);
    probe_->add_option("--base", base_, "Profile to copy what cannot be measured from (default cpu-only)")
        ->type_name("NAME|FILE");
    probe_->add_option("--name", probe_name_, "Name of the new profile (default probed-<hostname>)")->type_name("NAME");
    probe_->add_option("--suite-out", suite_out_, "Also write the bench suite record here")->type_name("FILE");
    add_output_options(*probe_, probe_output_);
    probe_->footer(
        "The profile goes to --out with --format json (e.g. zinf hw probe --format json --out mine.json), the "
        "table to stdout otherwise.\nExample: zinf hw probe --path /mnt/nvme0 --format json --out mine.json && zinf "
        "plan --params 1B --hw mine.json");
  }

  Status run(const Io& io) override {
    if (probe_->parsed()) return run_probe(io);
    return list_->parsed() ? run_list(io) : run_show(io);
  }

 private:
  Status run_list(const Io& io) const {
    ZINF_RETURN_IF_ERROR(output_format(list_output_).status());
    Rendered out;
    out.record = reports::make_record_envelope("hardware-list", 1, io.started);
    out.record["profiles"] = nlohmann::json::array();
    reports::Section s{"Built-in hardware profiles", {}, {}, {}, {}};
    s.table.columns = {{"name"},
                       {"GPUs", Align::kRight},
                       {"GPU"},
                       {"GPU mem", Align::kRight},
                       {"CPU mem", Align::kRight},
                       {"NVMe", Align::kRight},
                       {"NVMe read", Align::kRight}};
    for (std::string_view name : planner::builtin_profile_names()) {
      ZINF_ASSIGN_OR_RETURN(const planner::HardwareProfile hw, planner::load_hardware_profile(name));
      const planner::NodeSpec& n = hw.node;
      s.table.rows.push_back(
          {Cell(hw.name, reports::Emphasis::kStrong), std::to_string(n.gpus), n.gpu.name,
           format_bytes(static_cast<double>(n.gpu.memory_bytes)), format_bytes(static_cast<double>(n.cpu_memory_bytes)),
           format_bytes(static_cast<double>(n.nvme_capacity_bytes)), format_bandwidth(n.nvme_read_bandwidth)});
      out.record["profiles"].push_back(planner::hardware_profile_to_json(hw));
    }
    out.csv = s.table;
    s.notes.push_back("`zinf hw show NAME --format json` prints a profile to copy and edit; pass the file to --hw");
    out.document.title = "zinf hw list";
    out.document.sections.push_back(std::move(s));
    return emit(list_output_, out, io);
  }

  Status run_show(const Io& io) const {
    ZINF_ASSIGN_OR_RETURN(const Format format, output_format(show_output_));
    Result<planner::HardwareProfile> loaded = planner::load_hardware_profile(profile_);
    if (!loaded.is_ok()) return loaded.status().with_context("profile");
    const planner::HardwareProfile& hw = *loaded;
    Rendered out;
    out.record = planner::hardware_profile_to_json(hw);
    out.document.title = fmt::format("zinf hw show {}", profile_);
    out.document.sections.push_back(profile_section(hw));
    out.csv.columns = {{"field"}, {"value"}};
    for (const auto& [key, value] : out.document.sections.front().fields) out.csv.rows.push_back({key, value.text});
    // A built-in shown as JSON is printed as shipped: units and description intact, ready to edit.
    if (format == Format::kJson) {
      if (const auto text = planner::builtin_profile_text(profile_); text.is_ok()) {
        if (show_output_.out_path.empty() || show_output_.out_path == "-") {
          io.out << *text;
          return Status::ok();
        }
        ZINF_RETURN_IF_ERROR(write_output_file(show_output_.out_path, *text, "--out", io));
        announce_written(show_output_.out_path, io);
        return Status::ok();
      }
    }
    return emit(show_output_, out, io);
  }

  Status run_probe(const Io& io) const {
    ZINF_RETURN_IF_ERROR(output_format(probe_output_).status());
    ZINF_ASSIGN_OR_RETURN(const SuiteOptions options, parse_suite_options(probe_flags_));
    Result<planner::HardwareProfile> base = planner::load_hardware_profile(base_);
    if (!base.is_ok()) return base.status().with_context("--base");
    if (!probe_output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(probe_output_.out_path, "--out"));
    if (!suite_out_.empty()) ZINF_RETURN_IF_ERROR(check_output_path(suite_out_, "--suite-out"));
    ZINF_ASSIGN_OR_RETURN(const nlohmann::json suite, run_bench_suite(options, io.started, suite_progress(io)));
    if (io.err_is_terminal) io.err << '\n';
    if (!suite_out_.empty()) {
      ZINF_RETURN_IF_ERROR(write_output_file(suite_out_, suite.dump(2) + "\n", "--suite-out", io));
      announce_written(suite_out_, io);
    }
    ZINF_ASSIGN_OR_RETURN(const planner::HardwareProfile hw,
                          profile_from_suite(suite, *base, options.paths, probe_name_));
    Rendered out;
    out.record = planner::hardware_profile_to_json(hw);
    out.document.title = fmt::format("zinf hw probe: {}", hw.name);
    out.document.sections.push_back(profile_section(hw));
    reports::Section provenance{"Where each figure came from", {}, {}, {}, {}};
    for (const auto& [key, value] : hw.provenance) provenance.fields.emplace_back(key, value);
    out.document.sections.push_back(std::move(provenance));
    out.csv.columns = {{"field"}, {"value"}};
    for (const auto& [key, value] : out.document.sections.front().fields) out.csv.rows.push_back({key, value.text});
    return emit(probe_output_, out, io);
  }

  CLI::App* list_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* probe_ = nullptr;
  SuiteFlags probe_flags_;
  std::string base_ = "cpu-only";
  std::string probe_name_;
  std::string suite_out_;
  OutputOptions probe_output_;
  std::string profile_;
  OutputOptions list_output_;
  OutputOptions show_output_;
};

}  // namespace

std::unique_ptr<Subcommand> add_hw_command(CLI::App& app) { return std::make_unique<HwCommand>(app); }

}  // namespace zinf::cli
