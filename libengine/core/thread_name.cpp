#include "libengine/core/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace zinf {

void name_this_thread(std::string_view name) {
  std::array<char, 16> text{};  // 15 bytes and the terminator: Linux's limit (TASK_COMM_LEN)
  const std::size_t length = std::min(name.size(), text.size() - 1);
  std::memcpy(text.data(), name.data(), length);
  (void)pthread_setname_np(pthread_self(), text.data());
}

}  // namespace zinf
