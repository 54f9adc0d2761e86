// ZINF_CHECK: invariants that only a bug in zinf can violate. Failing one prints where and why and
// aborts; it is never used for user input or I/O results (those return a Status, see status.h).
#pragma once

namespace zinf::detail {
[[noreturn]] void check_failed(const char* condition, const char* file, int line, const char* message);
}  // namespace zinf::detail

#define ZINF_CHECK(cond, message)                                                    \
  do {                                                                               \
    if (!(cond)) ::zinf::detail::check_failed(#cond, __FILE__, __LINE__, (message)); \
  } while (false)
