#include "libengine/core/status.h"

#include <cstdio>
#include <cstdlib>

namespace zinf {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kOutOfMemory:
      return "out of memory";
    case ErrorCode::kIoError:
      return "I/O error";
    case ErrorCode::kInfeasible:
      return "infeasible";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

Status Status::with_context(std::string_view context) const {
  if (is_ok() || context.empty()) return *this;
  std::string message;
  message.reserve(context.size() + 2 + message_.size());
  message.append(context).append(": ").append(message_);
  return {code_, std::move(message)};
}

void fail_result_access(const Status& status) {
  std::fprintf(stderr, "zinf: internal error: value() called on a failed Result (%s: %s)\n",
               std::string(error_code_name(status.code())).c_str(), status.message().c_str());
  std::abort();
}

}  // namespace zinf
