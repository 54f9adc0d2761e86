// The built-in hardware profiles: planner/profiles/*.json, embedded at build time by
// cmake/EmbedProfiles.cmake so the binary needs no data files. Internal to the planner.
#pragma once

#include <span>
#include <string_view>

namespace zinf::planner {

struct BuiltinProfile {
  std::string_view name;       // file name without ".json"
  std::string_view json_text;  // the file's contents
};

std::span<const BuiltinProfile> builtin_profiles();

}  // namespace zinf::planner
