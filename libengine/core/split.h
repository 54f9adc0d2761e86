// split: cuts a user-typed list ("1,2,4", "params=nvme,optimizer=cpu") at a separator. Every item
// is kept, empty ones included, so "1,,2" reaches the item parser as "" and is reported there.
#pragma once

#include <string_view>
#include <vector>

namespace zinf {

// The views point into `text`, which must outlive them. An empty text gives one empty item.
std::vector<std::string_view> split(std::string_view text, char separator);

}  // namespace zinf
