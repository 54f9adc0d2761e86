// Exit codes of the zinf CLI (docs/cli.md § Exit codes and errors). Only apps/ chooses them.
#pragma once

#include "libengine/core/status.h"

namespace zinf::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;     // runtime failure: I/O, out of memory, internal
inline constexpr int kExitBadInput = 2;    // usage or input error: flags, sizes, JSON, profiles
inline constexpr int kExitRegression = 3;  // `zinf compare` found a regression
// `zinf plan` printed its answer and the model does not fit (a sweep: no point fits), so a script
// can branch on "does not fit" without parsing the table.
inline constexpr int kExitDoesNotFit = 4;

inline int exit_code_for(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kOk:
      return kExitOk;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

}  // namespace zinf::cli
