// The rows of a `zinf bench peers` record (bench_peers.cpp): each side's samples of one figure as the
// rounds add them, turned into medians, ranges and zinf/peer ratios at the end.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zinf::cli {

// The samples of one row, side by side, as they accumulate over the rounds.
struct Row {
  std::string item, unit, what;
  bool higher_is_better = true;
  std::map<std::string, nlohmann::json>
      sides;  // "zinf", "deepspeed", "pytorch", "reference": {"name", "samples"|"error"}
};

// Not thread-safe; one per run. add() keeps the order in which rows first appear.
class Rows {
 public:
  // Adds one sample (or the side's error) to the row `name`, creating it on first use.
  void add(const std::string& name, const std::string& item, const std::string& unit, const std::string& what,
           bool higher, const std::string& side, const std::string& side_name, const nlohmann::json& value) {
    auto [it, inserted] = rows_.try_emplace(name);
    if (inserted) {
      order_.push_back(name);
      it->second = Row{item, unit, what, higher, {}};
    }
    nlohmann::json& s = it->second.sides[side];
    if (s.is_null()) s = {{"name", side_name}, {"samples", nlohmann::json::array()}};
    if (value.is_string()) {
      s["error"] = value;
    } else {
      s["samples"].push_back(value);
    }
  }
  // The rows in first-seen order: per side its samples with median/min/max (or its error), and
  // "ratios" zinf/deepspeed and zinf/pytorch with their spread (ratio_spread.h).
  nlohmann::json to_json() const;

 private:
  std::map<std::string, Row> rows_;
  std::vector<std::string> order_;
};

}  // namespace zinf::cli
