// `zinf report RECORD.json... [--format html|md|csv|json|table] [--out FILE]`: renders any mix of
// zinf records (train, bench, plan, sweeps, and kinds it does not know) as one report — a
// self-contained HTML page with inline SVG charts by default. The figures come from the records
// (reports/record_report.h); this file only reads the files and picks the writer.
#include <fmt/format.h>

#include "apps/zinf/output.h"
#include "apps/zinf/subcommand.h"
#include "libengine/spec/json_input.h"
#include "reports/record_envelope.h"
#include "reports/record_report.h"

namespace zinf::cli {
namespace {

class ReportCommand final : public Subcommand {
 public:
  explicit ReportCommand(CLI::App& app) {
    CLI::App* c = app.add_subcommand(
        "report", "Render run, bench and plan records as one report: self-contained HTML (inline SVG charts), md, csv");
    c->add_option("records", paths_, "JSON records written by zinf (plan, train, bench ...)")
        ->required()
        ->type_name("RECORD.json...");
    c->add_option("--format", output_.format, "Output format: html (default), md, csv, json or table")
        ->type_name("FMT")
        ->default_str("html");
    c->add_option("--out", output_.out_path,
                  "Write the output to FILE (atomically; - is stdout; FIFOs and devices are written through)")
        ->type_name("FILE");
    c->footer(
        "Examples:\n"
        "  zinf report runs/quickstart/record.json --out quickstart.html\n"
        "  zinf report a.json b.json --format md --out scaling.md");
  }

  Status run(const Io& io) override {
    ZINF_RETURN_IF_ERROR(output_format(output_, true, Format::kHtml).status());
    if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));
    std::vector<reports::SourcedRecord> records;
    for (const std::string& path : paths_) {
      Result<nlohmann::json> record = spec::read_json_file(path);
      if (!record.is_ok()) return record.status();
      if (!record->is_object()) {
        return Status::invalid_argument(
            fmt::format("{}: a record is a JSON object; found {}", path, spec::describe_json_value(*record)));
      }
      records.push_back({path, std::move(record).value()});
    }
    Rendered out;
    out.document = reports::report_of_records(records);
    out.csv = reports::document_csv(out.document);
    out.record = reports::make_record_envelope("report", 1, io.started);
    out.record["sources"] = paths_;
    out.record["report"] = reports::document_json(out.document);
    return emit(output_, out, io, true, Format::kHtml);
  }

 private:
  std::vector<std::string> paths_;
  OutputOptions output_;
};

}  // namespace

std::unique_ptr<Subcommand> add_report_command(CLI::App& app) { return std::make_unique<ReportCommand>(app); }

}  // namespace zinf::cli
