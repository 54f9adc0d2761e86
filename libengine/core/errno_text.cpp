#include "libengine/core/errno_text.h"

#include <cstring>

#include <fmt/format.h>

namespace zinf {

std::string errno_text(int error_number) {
  const char* name = ::strerrorname_np(error_number);  // glibc 2.32+; null for unknown numbers
  return fmt::format("{} ({})", std::strerror(error_number),
                     name != nullptr ? std::string(name) : fmt::format("errno {}", error_number));
}

}  // namespace zinf
