// Output: the --format and --out options every subcommand shares, and writing a rendered result.
//
// A subcommand renders once into a Rendered (a Document for people, a JSON record, a CSV table)
// and emit() picks by --format. --out FILE writes atomically (temporary file in the same
// directory, then rename), so an interrupted or failed write never leaves a half-written file and
// never destroys an existing one. Color: only for table output to a terminal, never under NO_COLOR.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/zinf/subcommand.h"
#include "libengine/core/status.h"
#include "reports/document.h"

namespace zinf::cli {

enum class Format { kTable, kJson, kCsv, kMarkdown };

struct OutputOptions {
  std::string format = "table";
  std::string out_path;  // empty: stdout
};

void add_output_options(CLI::App& command, OutputOptions& options);

struct Rendered {
  reports::Document document;  // table and md
  nlohmann::json record;       // json
  reports::Table csv;          // csv: one flat table in base units
};

// Validates --format ("--format: 'xml' is not one of table, json, csv, md").
Result<Format> parse_format(const std::string& text);

// Writes `rendered` in the chosen format to stdout or --out. An --out path that cannot be created
// is InvalidArgument naming --out; a failed write is IoError.
Status emit(const OutputOptions& options, const Rendered& rendered, const Io& io);

// Writes `text` to `path` atomically (temp file + fsync + rename).
Status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace zinf::cli
