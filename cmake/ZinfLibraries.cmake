# Build settings shared by the C++ libraries outside kernels/ (the engine modules, planner, reports,
# probes), applied once every library exists. Both only make building the zinf binary cheaper
# (docs/build.md, "How long command 1 takes", has the measured gains); neither changes a result.
#
# - ZINF_LIBRARY_OPTIMIZE (-O2 in Release builds instead of the build type's -O3): their time is in
#   parsing and in instantiating std, fmt and nlohmann/json templates, which -O3 makes dearer (more
#   inlining and cloning) for no measured gain: the hot loops of a training step are in kernels/
#   (which keeps -O3 and its own flags) and OpenBLAS. Without -ffast-math or -m flags, GCC and Clang
#   give the same floating-point results at every -O level on x86-64 (no reassociation, and no FMA
#   instruction to contract a * b + c into without an -m flag); docs/build.md records the losses of
#   the quickstart and offload scenarios, bit for bit the same at -O3 and -O2.
# - One precompiled header for all of them (ZINF_PRECOMPILED_HEADERS): fmt, nlohmann/json and the
#   standard headers most of their sources include, compiled once by zinf_library_pch and reused
#   (REUSE_FROM) by every library. Reuse needs the same compile flags in every user, which these
#   libraries have (zinf_compile_options, position-independent code, C++20, the flag above); a
#   mismatch is a -Winvalid-pch warning, hence an error, never a silent slow-down. The CLI keeps its
#   own (apps/zinf/CMakeLists.txt: it adds CLI11 and compiles at -O1).
set(ZINF_LIBRARY_OPTIMIZE "-O2" CACHE STRING
    "Optimisation flag of the libraries outside kernels/ in Release builds (empty: the build type's)")

set(_zinf_library_pch_headers <fmt/format.h> <nlohmann/json.hpp> <algorithm> <array> <cmath> <cstddef>
    <cstdint> <cstring> <functional> <memory> <optional> <span> <string> <string_view> <utility> <vector>)

# _zinf_library_pch_host(<host> <extra links...>): the target that compiles the libraries' header:
# an empty source with their flags (and <extra links>' usage requirements), so it compiles once.
function(_zinf_library_pch_host host)
  set(_source ${PROJECT_BINARY_DIR}/${host}.cpp)
  file(CONFIGURE OUTPUT ${_source} CONTENT "// the host of the libraries' precompiled header\n")
  add_library(${host} OBJECT ${_source})
  set_target_properties(${host} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${host} PRIVATE cxx_std_20)
  target_link_libraries(${host} PRIVATE zinf_compile_options fmt::fmt nlohmann_json::nlohmann_json ${ARGN})
  target_compile_options(${host} PRIVATE ${_zinf_library_optimize})
  target_precompile_headers(${host} PRIVATE ${_zinf_library_pch_headers})
endfunction()

# zinf_library_settings(<targets...>): applies both settings to each of <targets> (C++ sources only).
# A header compiled without -fopenmp is refused where `_OPENMP` is defined (GCC: "not used because
# `_OPENMP' is defined"), so the libraries that link OpenMP (zero, device) reuse a second one.
function(zinf_library_settings)
  set(_zinf_library_optimize "")
  if(ZINF_LIBRARY_OPTIMIZE)
    set(_zinf_library_optimize "$<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:${ZINF_LIBRARY_OPTIMIZE}>")
  endif()
  if(ZINF_PRECOMPILED_HEADERS)
    find_package(OpenMP REQUIRED COMPONENTS CXX)
    _zinf_library_pch_host(zinf_library_pch)
    _zinf_library_pch_host(zinf_library_pch_openmp OpenMP::OpenMP_CXX)
  endif()
  foreach(_target IN LISTS ARGN)
    target_compile_options(${_target} PRIVATE ${_zinf_library_optimize})
    if(ZINF_PRECOMPILED_HEADERS)
      get_target_property(_links ${_target} LINK_LIBRARIES)
      if("OpenMP::OpenMP_CXX" IN_LIST _links)
        target_precompile_headers(${_target} REUSE_FROM zinf_library_pch_openmp)
      else()
        target_precompile_headers(${_target} REUSE_FROM zinf_library_pch)
      endif()
    endif()
  endforeach()
endfunction()
