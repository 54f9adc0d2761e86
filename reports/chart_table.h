// A chart's data as a table, so the Markdown and CSV renderings of a report carry exactly the
// numbers its SVG shows (docs/architecture.md §9: one record, every format the same figures).
#pragma once

#include "reports/chart.h"
#include "reports/document.h"

namespace zinf::reports {

// For kLine one row per distinct x (ascending) with one column per series ("" where a series has
// no point there); for bars one row per category. Reference lines become one extra row each
// ("reference: <label>") with the value in the first series' column. Values use format_figure.
Table chart_table(const Chart& chart);

}  // namespace zinf::reports
