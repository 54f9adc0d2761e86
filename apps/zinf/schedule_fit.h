// Fitting a scenario's learning-rate warm-up into fewer steps than the scenario was written for.
//
// `zinf train S --steps N` and `zinf bench train S` (its warm-up + timed steps) run a scenario for a
// number of steps its author did not choose. A decaying schedule (cosine, linear) needs at least one
// step after its warm-up, so quickstart's 20 warm-up steps made `--steps 20` fail. The warm-up is
// scaled with the steps instead (the same fraction of the run, at most steps - 1), and the caller
// prints the returned one-line note. The steps and the warm-up both come from the scenario file
// when no override was given, so that case is still the loader's and TrainSession's error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "libengine/spec/scenario.h"

namespace zinf::cli {

// `scenario.steps` already holds the overriding step count; `written_steps` is the scenario file's.
// Shortens scenario.optimizer.schedule.warmup_steps when a decaying schedule leaves no step after
// it, and returns the note naming `flag` (what set the steps: "--steps", "bench train"). nullopt: nothing changed.
// Pure: touches only `scenario`.
std::optional<std::string> fit_schedule_warmup(spec::Scenario& scenario, std::int64_t written_steps,
                                               std::string_view flag);

}  // namespace zinf::cli
