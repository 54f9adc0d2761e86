// The planner: for a model, a training setup and a cluster, where each kind of state should live,
// how much memory that takes on each tier, how fast a step will be and what limits it — or, when
// nothing fits, why not and the smallest changes that would make it fit.
//
// make_plan() tries every placement each family of the strategy allows (at most 2 x 3^4), keeps
// those that fit every tier, and picks the one with the shortest predicted step; ties go to the
// placement that keeps more bytes on faster tiers. Pure computation (no I/O), microseconds per plan.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/spec/model_shape.h"
#include "libengine/spec/state_placement.h"
#include "libengine/spec/training_spec.h"
#include "planner/bandwidth_model.h"
#include "planner/field_names.h"
#include "planner/hardware_profile.h"
#include "planner/memory_model.h"
#include "planner/placement.h"
#include "planner/strategy.h"

namespace zinf::planner {

struct PlanInput {
  spec::ModelShape shape;
  std::string model_source;            // how the caller says the shape was given, e.g. "--params 1T (shape rule)"
  std::uint64_t requested_params = 0;  // the count the shape rule was asked for, 0 when the shape was given directly
  spec::TrainingSpec training;
  HardwareProfile hardware;
  Strategy strategy = Strategy::kAuto;
  // Kinds pinned to a tier by the user (field::kPlacement, e.g. optimizer=nvme); others are searched.
  std::array<std::optional<spec::Tier>, spec::kAllStateKinds.size()> pinned{};
  // fp32 training whose matmuls run in TF32 (PyTorch's allow_tf32 / set_float32_matmul_precision
  // ("high")); off by default, as in PyTorch since 1.12. Only meaningful with fp32 precision.
  bool fp32_matmul_tf32 = false;
  double target_efficiency = 0.9;       // the efficiency "required bandwidth" is quoted for
  Schedule schedule = Schedule::kZinf;  // whose step schedule the prediction follows (schedule_model.h)
};

// Whether the optimizer's update must wait for the global gradient norm: clipping, or fp16's loss
// scaling (its overflow check).
bool norm_before_step(const spec::TrainingSpec& training);

// The math mode the input's matmuls run in (math_mode_for) and the GPU's rate in it; InvalidArgument
// naming the profile field when the profile has no rate for that mode.
Result<ComputeRate> plan_compute_rate(const PlanInput& input);

// One change to the input: {field::kNodes, "4"}.
struct FieldChange {
  std::string_view field;  // one of field::kNodes, kTiling, kMicroBatch, kCkptInterval, kNvmeCapacity, kCpuMemory
  std::string value;       // as the user would type it: "4", "16", "12TB"
};

// Changes to the input that together make an infeasible plan fit: usually one, two when one alone
// cannot (tiling for the GPU working memory, then enough nodes for the states).
struct Suggestion {
  std::vector<FieldChange> changes;
  std::string why;  // one sentence
};

struct Prediction {
  double step_seconds = 0;               // the input's schedule (StepModel::scheduled)
  double step_seconds_full_overlap = 0;  // every transfer hidden behind every computation (the lower bound)
  double step_seconds_no_overlap = 0;
  double step_seconds_other_schedule = 0;  // the same placement under the other schedule
  double compute_seconds = 0;
  double tokens_per_second = 0;       // whole cluster
  double achieved_flops_per_gpu = 0;  // 8·bsz·seq·P / step (recompute included, as the paper counts; 6· without)
  double mfu = 0;                     // 6·bsz·seq·P / step / the plan's peak rate (model FLOPs, no recompute)
  double efficiency = 0;              // compute time / step time
};

struct Plan {
  PlanInput input;
  spec::ParameterCount parameters;
  ModelMemory memory;
  ComputeRate rate;     // the math mode the plan computes in and the GPU's rate in it
  StrategyRules rules;  // of the family the chosen placement belongs to
  std::string family;   // describe_family() of the choice: "ZeRO-2 (...)"
  bool feasible = false;
  spec::StatePlacement placement;       // the chosen one; when infeasible, the closest to fitting
  Footprint footprint;                  // of `placement`
  StepModel step;                       // of `placement` (meaningful only when feasible)
  Prediction prediction;                // zeros when infeasible
  std::string bottleneck;               // a sentence: what limits the step, or why nothing fits
  std::vector<Suggestion> suggestions;  // only when infeasible
  std::vector<std::string> notes;       // caveats worth reading (e.g. optimizer on NVMe dominates)
};

// Fails only on invalid input (InvalidArgument naming the field as `name_field` calls it); an
// infeasible plan is a valid answer with feasible == false.
Result<Plan> make_plan(const PlanInput& input, const FieldNamer& name_field = own_field_name);

// The same search without the explanation, suggestions or notes: what sweeps and --max-params
// call thousands of times. Returns whether a placement fits and, if so, the chosen placement
// and its step model.
struct PlacementChoice {
  bool feasible = false;
  StrategyRules rules;  // the family the placement belongs to
  spec::StatePlacement placement;
  Footprint footprint;
  StepModel step;
};
// Searches every family of input.strategy (candidate_rules), honouring input.pinned.
// Precondition: plan_compute_rate(input) is ok (make_plan, run_sweep and max_params_per_strategy
// check it); otherwise nothing is feasible.
PlacementChoice choose_placement(const ModelMemory& memory, const PlanInput& input);

Prediction predict(const ModelMemory& memory, const PlanInput& input, const ComputeRate& rate, const StepModel& step);

// Ok when every figure of `prediction` is finite. validate(HardwareProfile) keeps every input in a
// range where this holds, so a failure is a bug; it is reported (Internal) rather than printed as
// "inf" or "-nan%". make_plan, run_sweep and max_params_per_strategy check every prediction.
Status check_finite(const Prediction& prediction);

}  // namespace zinf::planner
