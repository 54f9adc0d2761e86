# Install rules: the `zinf` executable, every module library in one export set (zinf::<module>),
# the public headers under include/zinf/<path from the repository root>, and a CMake package, so
# that a library user writes
#   find_package(zinf REQUIRED)
#   target_link_libraries(app PRIVATE zinf::engine)
# Included last by the top-level CMakeLists.txt, after every module has recorded itself in the
# ZINF_MODULE_TARGETS global property (cmake/ZinfModule.cmake). tests/package checks the result.
include(CMakePackageConfigHelpers)

set(ZINF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/zinf)

if(TARGET zinf)
  install(TARGETS zinf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

get_property(_zinf_modules GLOBAL PROPERTY ZINF_MODULE_TARGETS)
list(REMOVE_DUPLICATES _zinf_modules)

# Static modules list zinf_compile_options as $<LINK_ONLY:...> in their link interface, so it must
# be exported too. Consumers get only its link options (the sanitizer runtime in sanitizer builds,
# which instrumented static libraries need); its warning flags never reach their compiles.
set_target_properties(zinf_compile_options PROPERTIES EXPORT_NAME compile_options)
install(TARGETS ${_zinf_modules} zinf_compile_options
  EXPORT zinfTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zinf)
install(EXPORT zinfTargets
  NAMESPACE zinf::
  FILE zinfTargets.cmake
  DESTINATION ${ZINF_INSTALL_CMAKEDIR})

# Public headers keep their repository paths ("libengine/core/status.h") under include/zinf, which
# is the INSTALL_INTERFACE include directory of every module. Only headers from the source tree are
# installed: the generated ones (build_config.h, git_sha.h) are private to zinf_core's sources.
# CONFIGURE_DEPENDS re-globs on each build, so a new header is installed without a manual re-run.
file(GLOB_RECURSE _zinf_public_headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/kernels/*.h
  ${PROJECT_SOURCE_DIR}/libengine/*.h
  ${PROJECT_SOURCE_DIR}/planner/*.h
  ${PROJECT_SOURCE_DIR}/probes/*.h
  ${PROJECT_SOURCE_DIR}/reports/*.h)
foreach(_header IN LISTS _zinf_public_headers)
  get_filename_component(_header_dir ${_header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${_header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zinf/${_header_dir})
endforeach()

# find_dependency() calls for imported targets that the exported link interfaces name. fmt and
# nlohmann_json are always there (written in the template); others are added when a module starts
# using them, so the package never asks a consumer for something it does not need.
set(_zinf_link_text "")
foreach(_target IN LISTS _zinf_modules ITEMS zinf_compile_options)
  get_target_property(_links ${_target} INTERFACE_LINK_LIBRARIES)
  if(_links)
    string(APPEND _zinf_link_text ";${_links}")
  endif()
endforeach()
set(_zinf_known_deps
  "CLI11::|find_dependency(CLI11)"
  "Threads::|find_dependency(Threads)"
  "MPI::|find_dependency(MPI COMPONENTS CXX)"
  "CUDA::|find_dependency(CUDAToolkit)"
  "OpenMP::|find_dependency(OpenMP COMPONENTS CXX)"
  "BLAS::|find_dependency(BLAS)"
  "benchmark::|find_dependency(benchmark)"
  "PkgConfig::|find_dependency(PkgConfig)")
set(ZINF_CONFIG_EXTRA_DEPENDENCIES "")
set(_zinf_unhandled "${_zinf_link_text}")
foreach(_entry IN LISTS _zinf_known_deps)
  string(REPLACE "|" ";" _pair "${_entry}")
  list(GET _pair 0 _namespace)
  list(GET _pair 1 _call)
  if(_zinf_link_text MATCHES "(^|[^A-Za-z0-9_])${_namespace}")
    string(APPEND ZINF_CONFIG_EXTRA_DEPENDENCIES "${_call}\n")
  endif()
  string(REGEX REPLACE "(^|[^A-Za-z0-9_])${_namespace}[A-Za-z0-9_.+-]+" "\\1" _zinf_unhandled "${_zinf_unhandled}")
endforeach()
# Each pkg-config module (PkgConfig::<name>, e.g. liburing, openblas) is looked up again by name.
string(REGEX MATCHALL "PkgConfig::[A-Za-z0-9_.+-]+" _zinf_pkg_targets "${_zinf_link_text}")
list(REMOVE_DUPLICATES _zinf_pkg_targets)
foreach(_pkg_target IN LISTS _zinf_pkg_targets)
  string(REPLACE "PkgConfig::" "" _pkg "${_pkg_target}")
  string(APPEND ZINF_CONFIG_EXTRA_DEPENDENCIES "pkg_check_modules(${_pkg} REQUIRED IMPORTED_TARGET ${_pkg})\n")
endforeach()
string(REGEX REPLACE "(^|[^A-Za-z0-9_])(zinf|fmt|nlohmann_json)::[A-Za-z0-9_.+-]+" "\\1" _zinf_unhandled "${_zinf_unhandled}")
string(REGEX MATCHALL "[A-Za-z0-9_.+-]+::[A-Za-z0-9_.+-]+" _zinf_unhandled "${_zinf_unhandled}")
if(_zinf_unhandled)
  list(REMOVE_DUPLICATES _zinf_unhandled)
  message(WARNING "zinf install: exported targets link ${_zinf_unhandled}, which zinfConfig.cmake does not "
    "find; add a find_dependency() for it to the list in cmake/ZinfInstall.cmake or the installed package "
    "will not load")
endif()

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/zinfConfig.cmake.in
  ${PROJECT_BINARY_DIR}/zinfConfig.cmake
  INSTALL_DESTINATION ${ZINF_INSTALL_CMAKEDIR})
# SameMajorVersion: a request for 0.1 is met by any 0.x at or above it, but not by 1.0, so a
# consumer never silently picks up an API/ABI break across majors. AnyNewerVersion would promise
# that every future release is compatible, which nothing here guarantees. While the major version
# is 0, minors may still change the API; a consumer that needs one exact release asks for it with
# find_package(zinf 0.1.0 EXACT).
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/zinfConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/zinfConfig.cmake
  ${PROJECT_BINARY_DIR}/zinfConfigVersion.cmake
  DESTINATION ${ZINF_INSTALL_CMAKEDIR})
