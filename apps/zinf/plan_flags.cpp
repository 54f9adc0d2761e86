#include "apps/zinf/plan_flags.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "planner/shape_rule.h"

namespace zinf::cli {
namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kFlagOfField{{
    {planner::field::kNodes, "--nodes"},
    {planner::field::kTiling, "--tiling"},
    {planner::field::kMicroBatch, "--micro-batch"},
    {planner::field::kCkptInterval, "--ckpt-interval"},
    {planner::field::kNvmeCapacity, "--nvme"},
    {planner::field::kCpuMemory, "--cpu-mem"},
    {planner::field::kParams, "--params"},
    {planner::field::kShape, "--layers/--hidden/--heads"},
    {planner::field::kPlacement, "--place"},
    {planner::field::kStrategy, "--strategy"},
    {planner::field::kTargetEfficiency, "--target-efficiency"},
    {planner::field::kSweep, "--sweep"},
    {"training.seq", "--seq"},
    {"training.accounting", "--accounting"},
    {"training.precision", "--precision"},
    {"precision", "--precision"},
}};

}  // namespace

std::string plan_flag_for(std::string_view field) {
  for (const auto& [name, flag] : kFlagOfField) {
    if (name == field) return std::string(flag);
  }
  return std::string(field);
}

std::string suggestion_command_line(const planner::Suggestion& suggestion) {
  std::string line;
  for (const planner::FieldChange& change : suggestion.changes)
    line += fmt::format("{}{} {}", line.empty() ? "" : " ", plan_flag_for(change.field), change.value);
  return line;
}

spec::ShapeResolver scenario_shape_resolver() {
  return [](std::uint64_t params, std::int64_t vocab, std::int64_t seq) {
    return planner::shape_for_params(params, vocab, seq, [](std::string_view field) -> std::string {
      if (field == planner::field::kParams) return "scenario.model.params";
      if (field == planner::field::kShape) return "model.layers/hidden/heads";
      return std::string(field);
    });
  };
}

}  // namespace zinf::cli
