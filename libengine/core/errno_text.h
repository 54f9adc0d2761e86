// errno_text: how zinf writes an OS error number in messages, one way everywhere:
// "No space left on device (ENOSPC)". The symbolic name is what people search for; the text is
// what they read.
#pragma once

#include <string>

namespace zinf {

std::string errno_text(int error_number);

}  // namespace zinf
