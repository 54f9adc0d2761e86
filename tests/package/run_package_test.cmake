# The package.find_package test, run with cmake -P (see tests/package/CMakeLists.txt):
#   1. cmake --install <build> --prefix <WORK_DIR>/prefix
#   2. check the installed package: zinfConfig.cmake present, and every quoted #include in an
#      installed header resolves to an installed header (so none names a build-private generated
#      header such as libengine/core/build_config.h or git_sha.h)
#   3. configure and build tests/package/consumer with CMAKE_PREFIX_PATH=<prefix>, checking that
#      zinf came from that prefix
#   4. run the consumer (exit 0 only if the engine computes the expected numbers)
# WORK_DIR is removed at the start and on success; on failure it is kept for inspection.
foreach(_var ZINF_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT ${_var})
    message(FATAL_ERROR "run_package_test.cmake: -D${_var}=... is required")
  endif()
endforeach()

set(_prefix ${WORK_DIR}/prefix)
set(_consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

set(_config_args "")
if(ZINF_CONFIG)
  set(_config_args --config ${ZINF_CONFIG})
endif()

# Runs a command; on failure prints its output and stops the test.
function(_run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "package test: ${step} failed (exit ${_rc}):\n${_out}\n"
      "package test: scratch directory kept: ${WORK_DIR}")
  endif()
  message(STATUS "package test: ${step}: ok")
  set(_last_output "${_out}" PARENT_SCOPE)
endfunction()

# 1. install
_run("cmake --install" ${CMAKE_COMMAND} --install ${ZINF_BUILD_DIR} --prefix ${_prefix} ${_config_args})

# 2. the installed package
file(GLOB_RECURSE _config_files ${_prefix}/*/zinfConfig.cmake)
if(NOT _config_files)
  message(FATAL_ERROR "package test: no zinfConfig.cmake under ${_prefix}")
endif()
set(_include_root ${_prefix}/include/zinf)
file(GLOB_RECURSE _headers RELATIVE ${_include_root} ${_include_root}/*.h)
if(NOT _headers)
  message(FATAL_ERROR "package test: no headers installed under ${_include_root}")
endif()
set(_problems "")
foreach(_header IN LISTS _headers)
  file(STRINGS ${_include_root}/${_header} _includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(_line IN LISTS _includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" _included "${_line}")
    if(_included MATCHES "(^|/)(build_config|git_sha)\\.h$")
      string(APPEND _problems "\n  ${_header} includes the build-private generated header ${_included}")
    elseif(NOT EXISTS ${_include_root}/${_included})
      get_filename_component(_dir ${_header} DIRECTORY)
      if(NOT EXISTS ${_include_root}/${_dir}/${_included})
        string(APPEND _problems "\n  ${_header} includes ${_included}, which is not installed")
      endif()
    endif()
  endforeach()
endforeach()
if(_problems)
  message(FATAL_ERROR "package test: installed headers are not self-contained:${_problems}")
endif()
list(LENGTH _headers _header_count)
message(STATUS "package test: ${_header_count} installed headers include only installed headers")

# 3. configure and build the consumer against the prefix only
set(_prefix_path ${_prefix})
if(EXTRA_PREFIX_PATH)
  string(REPLACE "|" ";" _extra "${EXTRA_PREFIX_PATH}")
  list(APPEND _prefix_path ${_extra})
endif()
# Settings go through an initial-cache file: a list value would not survive being passed as an argument.
set(_init ${WORK_DIR}/consumer-init.cmake)
file(WRITE ${_init} "set(CMAKE_PREFIX_PATH \"${_prefix_path}\" CACHE STRING \"\")\n")
if(MAKE_PROGRAM)
  file(APPEND ${_init} "set(CMAKE_MAKE_PROGRAM \"${MAKE_PROGRAM}\" CACHE FILEPATH \"\")\n")
endif()
if(CXX_COMPILER)
  file(APPEND ${_init} "set(CMAKE_CXX_COMPILER \"${CXX_COMPILER}\" CACHE FILEPATH \"\")\n")
endif()
if(ZINF_CONFIG)
  file(APPEND ${_init} "set(CMAKE_BUILD_TYPE \"${ZINF_CONFIG}\" CACHE STRING \"\")\n")
endif()
set(_configure_args -C ${_init} -S ${CONSUMER_SOURCE_DIR} -B ${_consumer_build} -G ${GENERATOR})
_run("configure consumer" ${CMAKE_COMMAND} ${_configure_args})

file(STRINGS ${_consumer_build}/CMakeCache.txt _zinf_dir REGEX "^zinf_DIR:")
string(REGEX REPLACE "^zinf_DIR:[A-Z]+=" "" _zinf_dir "${_zinf_dir}")
file(REAL_PATH ${_prefix} _real_prefix)
file(REAL_PATH "${_zinf_dir}" _real_zinf_dir)
string(FIND "${_real_zinf_dir}/" "${_real_prefix}/" _at)
if(NOT _at EQUAL 0)
  message(FATAL_ERROR "package test: the consumer found zinf in '${_zinf_dir}', not under ${_prefix}")
endif()

_run("build consumer" ${CMAKE_COMMAND} --build ${_consumer_build} ${_config_args})

# 4. run it
set(_exe ${_consumer_build}/bin/zinf_consumer)
if(NOT EXISTS ${_exe})
  message(FATAL_ERROR "package test: consumer executable ${_exe} was not built")
endif()
_run("run consumer" ${_exe})
message(STATUS "package test: consumer says: ${_last_output}")

file(REMOVE_RECURSE ${WORK_DIR})
