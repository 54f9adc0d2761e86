// Plan records: the JSON form of a plan, a max-params table and a sweep, every figure in base
// units (bytes, bytes/s, FLOP/s, seconds). These are the payloads of the "zinf.plan/1",
// "zinf.max-params/1" and "zinf.plan-sweep/1" records documented in docs/records/plan-record.md; the
// caller wraps them in the common record envelope (reports/record_envelope.h). Tables, CSV and
// Markdown are rendered from the same data, never computed separately.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "planner/max_params.h"
#include "planner/planner.h"
#include "planner/sweep.h"

namespace zinf::planner {

inline constexpr int kPlanRecordVersion = 1;

nlohmann::json model_shape_to_json(const spec::ModelShape& shape);
nlohmann::json training_to_json(const spec::TrainingSpec& training);
nlohmann::json placement_to_json(const spec::StatePlacement& placement);
nlohmann::json prediction_to_json(const Prediction& prediction);

// Adds the plan's fields to `record` (an envelope or an empty object).
void append_plan(const Plan& plan, nlohmann::json& record);
void append_max_params(const PlanInput& base, const std::vector<MaxParamsResult>& results, nlohmann::json& record);
void append_sweep(const std::vector<SweepDimension>& dimensions, const std::vector<SweepPoint>& points,
                  nlohmann::json& record);

}  // namespace zinf::planner
