// The interface every fuzz target implements: libFuzzer's entry point. One target per user input
// parser (tests/fuzz/README.md lists them). A target feeds the bytes to the parser and checks what
// must hold for every input — no crash, no uncaught exception, no sanitizer report, errors are one
// line — plus its own invariants; a broken invariant calls fuzz_fail(), which aborts so that
// libFuzzer (or fuzz_driver.cpp) saves the input.
//
// Built two ways (tests/fuzz/CMakeLists.txt): with Clang's libFuzzer (ZINF_FUZZ_ENGINE=libfuzzer,
// scripts/fuzz.sh) for coverage-guided runs of any length, or with fuzz_driver.cpp, a deterministic
// mutation driver that CTest runs for a bounded number of inputs in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "libengine/core/status.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace zinf::fuzz {

// Prints `what` (and the input's size) to stderr and aborts.
[[noreturn]] void fuzz_fail(std::string_view what, std::size_t input_size);

// An error must be one non-empty line of bounded length (zinf's contract for every bad input).
void check_one_line(const Status& status, std::size_t input_size);

// Whether `text` holds "inf" or "nan" as a word, any case, "-nan" included: how a non-finite figure
// prints. ("Infinity" in "ZeRO-Infinity" is not one.)
bool has_non_finite_word(std::string_view text);

}  // namespace zinf::fuzz
