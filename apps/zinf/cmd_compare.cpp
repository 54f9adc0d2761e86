// `zinf compare BASE.json NEW.json [--threshold 5%] [--alpha 0.05] [--exclude METRIC]...
// [--allow-different-scenarios]`: the regression gate. Compares two records of the same schema metric
// by metric (reports/compare.h) and exits 3 when any metric regressed beyond the threshold with
// significance or a metric of the base is missing from the new record, 0 otherwise, 2 when the
// records cannot be compared (different kinds or schema versions, different scenarios without
// --allow-different-scenarios, unreadable files). Both records' run conditions are shown, with a
// warning on stderr when they differ enough to explain a change (reports/compare_conditions.h).
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/zinf/exit_codes.h"
#include "apps/zinf/output.h"
#include "apps/zinf/subcommand.h"
#include "libengine/spec/json_input.h"
#include "reports/compare.h"
#include "reports/record_envelope.h"
#include "reports/record_report.h"

namespace zinf::cli {
namespace {

// "5%", "5 %", "0.05": a fraction in (0, 10] (1000% is the largest change a gate can mean).
Result<double> parse_fraction(const std::string& text, std::string_view flag, bool allow_percent, double max) {
  std::string digits = text;
  bool percent = false;
  if (allow_percent && !digits.empty() && digits.back() == '%') {
    percent = true;
    digits.pop_back();
    while (!digits.empty() && digits.back() == ' ') digits.pop_back();
  }
  char* end = nullptr;
  const double value = digits.empty() ? std::nan("") : std::strtod(digits.c_str(), &end);
  const bool parsed = end != nullptr && *end == '\0' && std::isfinite(value);
  const double fraction = percent ? value / 100.0 : value;
  if (!parsed || !(fraction > 0) || fraction > max) {
    return Status::invalid_argument(fmt::format(
        "{}: '{}' is not {}", flag, text,
        allow_percent ? "a change above 0 and up to 1000%, e.g. 5% or 0.05" : "a level in (0, 0.5], e.g. 0.05"));
  }
  return fraction;
}

class CompareCommand final : public Subcommand {
 public:
  explicit CompareCommand(CLI::App& app) {
    CLI::App* c = app.add_subcommand(
        "compare",
        "Compare two records of the same kind: median change + Mann-Whitney U per metric; exit 3 on regression");
    c->add_option("base", base_path_, "The baseline record")->required()->type_name("BASE.json");
    c->add_option("new", new_path_, "The record to judge")->required()->type_name("NEW.json");
    c->add_option("--threshold", threshold_, "Smallest change of a median that counts (default 5%)")->type_name("PCT");
    c->add_option("--alpha", alpha_, "Significance level of the U test (default 0.05)")->type_name("P");
    c->add_option("--noise-floor", noise_floor_, "Times shorter than this (ms) are not judged (default 0.1)")
        ->type_name("MS");
    c->add_flag("--allow-different-scenarios,--force", allow_different_scenarios_,
                "Compare records of different scenarios (same kind and schema version still required)");
    c->add_option("--exclude", exclude_,
                  "Leave METRIC (a name from the metric column, or a prefix such as summary) out of the gate; "
                  "repeat for several. A metric of the base missing from the new record fails unless excluded")
        ->type_name("METRIC")
        ->allow_extra_args(false);
    c->add_option("--format", output_.format, "Output format: table (default), json, csv, md or html")
        ->type_name("FMT")
        ->default_str("table");
    c->add_option("--out", output_.out_path,
                  "Write the output to FILE (atomically; - is stdout; FIFOs and devices are written through)")
        ->type_name("FILE");
    c->footer(
        "Exit codes: 0 no regression, 3 a metric regressed (beyond --threshold, p < --alpha) or is missing from "
        "the new record, 2 records that cannot be compared, 1 runtime failure.");
  }

  Status run(const Io& io) override {
    ZINF_RETURN_IF_ERROR(output_format(output_, true).status());
    reports::CompareOptions options;
    ZINF_ASSIGN_OR_RETURN(options.threshold, parse_fraction(threshold_, "--threshold", true, 10.0));
    ZINF_ASSIGN_OR_RETURN(options.alpha, parse_fraction(alpha_, "--alpha", false, 0.5));
    options.allow_different_scenarios = allow_different_scenarios_;
    options.exclude = exclude_;
    {
      char* end = nullptr;
      const double ms = std::strtod(noise_floor_.c_str(), &end);
      if (noise_floor_.empty() || end == nullptr || *end != '\0' || !std::isfinite(ms) || ms < 0 || ms > 1e6) {
        return Status::invalid_argument(
            fmt::format("--noise-floor: '{}' is not a time in milliseconds from 0 to 1e6, e.g. 0.1", noise_floor_));
      }
      options.noise_floor_ms = ms;
    }
    if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));
    ZINF_ASSIGN_OR_RETURN(const nlohmann::json base, spec::read_json_file(base_path_));
    ZINF_ASSIGN_OR_RETURN(const nlohmann::json candidate, spec::read_json_file(new_path_));
    ZINF_ASSIGN_OR_RETURN(const reports::Comparison comparison, reports::compare_records(base, candidate, options));
    Rendered out;
    out.document = reports::comparison_document(comparison, options, base_path_, new_path_);
    out.csv = out.document.sections.back().table;
    out.record = reports::make_record_envelope("compare", 1, io.started);
    out.record["base"] = base_path_;
    out.record["new"] = new_path_;
    out.record.update(reports::comparison_json(comparison, options));
    failed_ = comparison.failed();
    ZINF_RETURN_IF_ERROR(emit(output_, out, io, true));
    // On stderr as well, so a CI log shows it whatever --format and --out say.
    if (comparison.conditions.differ()) {
      io.err << fmt::format(
          "warning: compare: the run conditions differ enough to explain a change of up to {:.1f}%: {}\n",
          comparison.conditions.explainable_change.value_or(0.0) * 100.0, comparison.conditions.differences.front());
    }
    if (!comparison.conditions.base.is_object() || !comparison.conditions.candidate.is_object()) {
      io.err << "warning: compare: " << comparison.conditions.unknowns.front() << '\n';
    }
    return Status::ok();
  }

  int exit_code_on_success() const override { return failed_ ? kExitRegression : kExitOk; }

 private:
  std::string base_path_;
  std::string new_path_;
  std::string threshold_ = "5%";
  std::string alpha_ = "0.05";
  std::string noise_floor_ = "0.1";
  bool allow_different_scenarios_ = false;
  std::vector<std::string> exclude_;
  bool failed_ = false;
  OutputOptions output_;
};

}  // namespace

std::unique_ptr<Subcommand> add_compare_command(CLI::App& app) { return std::make_unique<CompareCommand>(app); }

}  // namespace zinf::cli
