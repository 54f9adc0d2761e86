#include "libengine/core/check.h"

#include <cstdio>
#include <cstdlib>

namespace zinf::detail {

void check_failed(const char* condition, const char* file, int line, const char* message) {
  std::fprintf(stderr, "zinf: internal check failed at %s:%d: %s (%s)\n", file, line, message, condition);
  std::abort();
}

}  // namespace zinf::detail
