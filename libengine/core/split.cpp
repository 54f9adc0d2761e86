#include "libengine/core/split.h"

namespace zinf {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> items;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(separator, start);
    items.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return items;
    start = end + 1;
  }
}

}  // namespace zinf
