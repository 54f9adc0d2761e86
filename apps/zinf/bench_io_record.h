// The people's views of a `zinf bench io` record ("zinf.bench-io/1", docs/records/bench-io-record.md): the
// terminal/Markdown document (setup, results with zinf next to fio and the ratio's range, store
// counters) and the CSV, both rendered from the record alone — never from the benchmark's result
// structs — so a stored record re-renders to exactly what the run printed.
#pragma once

#include <nlohmann/json.hpp>

#include "apps/zinf/output.h"

namespace zinf::cli {

// `record` as made by `zinf bench io` (fields it lacks render as "-"). Rendered.record is left empty
// for the caller to fill.
Rendered render_bench_io_record(const nlohmann::json& record);

}  // namespace zinf::cli
