# zinf_module(<target> SOURCES ... PUBLIC_LINKS ... PRIVATE_LINKS ...)
# One library per module, aliased zinf::<name> (zinf_core -> zinf::core). Includes are written
# from the repository root ("libengine/core/status.h"); installed headers keep those paths under
# include/zinf/. Every module is recorded in the ZINF_MODULE_TARGETS global property, which the
# install rules (ZinfInstall.cmake) export.
function(zinf_module target)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_LINKS;PRIVATE_LINKS" ${ARGN})
  add_library(${target} ${ARG_SOURCES})
  string(REPLACE "zinf_" "" _short ${target})
  add_library(zinf::${_short} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${_short} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/zinf>)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_LINKS} PRIVATE zinf_compile_options ${ARG_PRIVATE_LINKS})
  target_compile_features(${target} PUBLIC cxx_std_20)
  set_property(GLOBAL APPEND PROPERTY ZINF_MODULE_TARGETS ${target})
endfunction()
