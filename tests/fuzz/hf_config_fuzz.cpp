// Fuzz target: a Hugging Face config.json (`zinf plan --hf-config FILE`), parsed as
// spec::load_hf_config does. Invariants: no crash or exception; errors are one line; an accepted
// config gives a shape that validates and whose parameter count is computable.
#include <string_view>

#include "libengine/spec/hf_config.h"
#include "libengine/spec/json_input.h"
#include "tests/fuzz/fuzz_target.h"

using zinf::fuzz::check_one_line;
using zinf::fuzz::fuzz_fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto document = zinf::spec::parse_json_text(text, "config.json");
  check_one_line(document.status(), size);
  if (!document.is_ok()) return 0;
  const auto shape = zinf::spec::model_shape_from_hf_config(*document, "config.json");
  check_one_line(shape.status(), size);
  if (!shape.is_ok()) return 0;
  if (!zinf::spec::validate(*shape).is_ok()) fuzz_fail("an accepted config's shape does not validate", size);
  if (zinf::spec::count_parameters(*shape).total == 0) fuzz_fail("an accepted config has no parameters", size);
  return 0;
}
