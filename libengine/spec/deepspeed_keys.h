// The names a DeepSpeed config may give a key (spec/deepspeed_config.h, DsKeyAlias): which name a
// JSON object used, and the checks DeepSpeed makes when two names of one setting meet. Internal to
// the DeepSpeed config parser (deepspeed_config.cpp); the table itself is deepspeed_key_aliases().
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/spec/deepspeed_config.h"
#include "libengine/spec/json_input.h"

namespace zinf::spec {

// The aliases of keys of `section` ("" = the top level, "zero_optimization").
std::vector<const DsKeyAlias*> aliases_in(std::string_view section);

// The name `object` (the section `section`) writes `canonical` under: the first alias of it that
// the object has, else `canonical` (also when the object has neither).
std::string_view written_name(const JsonObject& object, std::string_view section, std::string_view canonical);

// Refuses a setting written under two of its names ("max_live_parameters" and
// "stage3_max_live_parameters"; "cpu_offload" with "offload_optimizer", which DeepSpeed itself
// asserts against), naming both keys. Records in `written_as` every key the object wrote under an
// alias (as "<section>.<canonical>" -> "<section>.<alias>", the top level without the prefix).
Status check_aliases(const JsonObject& object, std::string_view section,
                     std::vector<std::pair<std::string, std::string>>& written_as);

}  // namespace zinf::spec
