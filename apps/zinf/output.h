// Output: the --format and --out options every subcommand shares, and writing a rendered result.
//
// A subcommand renders once into a Rendered (a Document for people, a JSON record, a CSV table)
// and emit() picks by --format. Where it goes (write_output_file, also used for run records):
//   - "-" or no --out: standard output;
//   - a regular file, or a path that does not exist yet: written atomically (temporary file in the
//     same directory, fsync, rename), so an interrupted or failed write never leaves a half-written
//     file and never destroys an existing one; an existing file keeps its permission bits;
//   - a symbolic link: followed to its final target, which is then written as above (the link stays);
//   - a FIFO, a character device (/dev/null, a terminal) or another special file: written through,
//     never replaced by a regular file;
//   - a directory: refused.
// check_output_path() runs the same decisions before the work, so a run that would fail to write its
// output fails in milliseconds instead of after hours. Color: only for table output to a terminal,
// never under NO_COLOR.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/zinf/subcommand.h"
#include "libengine/core/status.h"
#include "reports/document.h"

namespace zinf::cli {

enum class Format { kTable, kJson, kCsv, kMarkdown, kHtml };

struct OutputOptions {
  std::string format;    // empty: --format not given (the --out file's extension, else the default)
  std::string out_path;  // empty: stdout
};

void add_output_options(CLI::App& command, OutputOptions& options);

struct Rendered {
  reports::Document document;  // table, md and html
  nlohmann::json record;       // json
  reports::Table csv;          // csv: one flat table in base units
};

// Validates --format ("--format: 'xml' is not one of table, json, csv, md"); html only where
// `allow_html` (zinf report and zinf compare).
Result<Format> parse_format(const std::string& text, bool allow_html = false);

// The format to write: --format when given; otherwise the --out file's extension (.json, .csv,
// .md/.markdown, .txt = table, .html/.htm where `allow_html`); otherwise `fallback`. An --out of
// ".html" where html is not allowed is InvalidArgument naming --out; other extensions fall back.
Result<Format> output_format(const OutputOptions& options, bool allow_html = false, Format fallback = Format::kTable);

// Writes `rendered` in output_format(options, allow_html, fallback) to stdout or --out; a file
// written is announced on io.err ("wrote FILE"). An --out path that cannot be created is
// InvalidArgument naming --out; a failed write is IoError.
Status emit(const OutputOptions& options, const Rendered& rendered, const Io& io, bool allow_html = false,
            Format fallback = Format::kTable);

// "wrote PATH" on io.err: after every file a command writes for --out, --emit-ds-config and the like,
// so a user sees where the output went. Nothing for "-" (stdout).
void announce_written(const std::string& path, const Io& io);

// Writes `text` to `path` as the head comment says ("-": io.out). `field` names the setting the path
// came from in errors ("--out", "--record", "scenario.output.record"): a directory, a path whose
// directory is missing or unwritable, or a link loop is InvalidArgument; a failed write, fsync or
// rename is IoError. On failure an existing file at `path` is untouched.
Status write_output_file(const std::string& path, std::string_view text, std::string_view field, const Io& io);

// Checks, without writing `path`, that write_output_file(path, …, field, …) can write it: not a
// directory; a special file must be writable; otherwise the directory it will be created in must
// exist (or, with create_parents, is created now) and accept a new file (a probe file is created and
// removed, which catches read-only mounts and permissions alike). Errors as write_output_file's.
Status check_output_path(const std::string& path, std::string_view field, bool create_parents = false);

// Creates `dir` when missing and checks that a file can be created in it (probe file, removed).
// InvalidArgument naming `field` ("scenario.checkpoint.dir") otherwise.
Status check_writable_directory(const std::string& dir, std::string_view field);

}  // namespace zinf::cli
