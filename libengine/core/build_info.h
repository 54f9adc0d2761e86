// Build information: what this binary is, for `zinf --version` and for every run record.
// The values are generated at build time (cmake/BuildInfo.cmake), so the git SHA is the one the
// binary was built from, not the one CMake was configured at.
#pragma once

#include <string_view>
#include <vector>

namespace zinf {

struct BuildFeature {
  std::string_view name;  // "cuda", "mpi", "liburing", ...
  bool enabled;
  std::string_view detail;  // e.g. "sm_90" or "OpenMPI 4.1.4"; empty when none
};

struct BuildInfo {
  std::string_view version;     // semantic version of the project, "0.1.0"
  std::string_view git_sha;     // short SHA, with "-dirty" when the tree had changes; "unknown" outside git
  std::string_view build_type;  // CMAKE_BUILD_TYPE
  std::string_view compiler;    // "GNU 12.2.0"
  std::vector<BuildFeature> features;
};

const BuildInfo& build_info();

}  // namespace zinf
