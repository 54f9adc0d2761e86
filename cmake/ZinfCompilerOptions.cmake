# Warnings and sanitizers, applied through one interface target so every zinf target gets the same
# flags and nothing leaks into projects that consume the installed package.
add_library(zinf_compile_options INTERFACE)
target_compile_options(zinf_compile_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
    -Wcast-align -Wformat=2 -Wimplicit-fallthrough -Wmissing-declarations>)
# nvcc: its own warnings, the host compiler's -Wall -Wextra on the host side of .cu files, and
# line info so profilers and compute-sanitizer can point at source lines.
target_compile_options(zinf_compile_options INTERFACE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra -lineinfo --expt-relaxed-constexpr>)
if(ZINF_WARNINGS_AS_ERRORS)
  target_compile_options(zinf_compile_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()

if(ZINF_SANITIZE)
  if(NOT ZINF_SANITIZE MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "ZINF_SANITIZE: '${ZINF_SANITIZE}' is not one of: address,undefined | address | undefined | thread")
  endif()
  target_compile_options(zinf_compile_options INTERFACE
    -fsanitize=${ZINF_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(zinf_compile_options INTERFACE -fsanitize=${ZINF_SANITIZE})
endif()

# Fuzzing with libFuzzer (tests/fuzz, scripts/fuzz.sh): every zinf target gets coverage
# instrumentation so the fuzzer is guided through the parsers, not only through the target file.
if(ZINF_FUZZ_ENGINE STREQUAL "libfuzzer")
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ZINF_FUZZ_ENGINE=libfuzzer needs Clang (CMAKE_CXX_COMPILER=clang++); "
                        "use ZINF_FUZZ_ENGINE=driver with ${CMAKE_CXX_COMPILER_ID}")
  endif()
  target_compile_options(zinf_compile_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
elseif(NOT ZINF_FUZZ_ENGINE STREQUAL "driver")
  message(FATAL_ERROR "ZINF_FUZZ_ENGINE: '${ZINF_FUZZ_ENGINE}' is not one of: driver, libfuzzer")
endif()
