#include "libengine/core/build_info.h"

#include "libengine/core/build_config.h"
#include "libengine/core/git_sha.h"

namespace zinf {

const BuildInfo& build_info() {
  static const BuildInfo info{
      .version = ZINF_VERSION_STRING,
      .git_sha = ZINF_GIT_SHA,
      .build_type = ZINF_BUILD_TYPE,
      .compiler = ZINF_COMPILER,
      .features = {{"cuda", ZINF_FEATURE_CUDA, ZINF_FEATURE_CUDA_DETAIL},
                   {"mpi", ZINF_FEATURE_MPI, ZINF_FEATURE_MPI_DETAIL},
                   {"sanitizers", ZINF_FEATURE_SANITIZE, ZINF_FEATURE_SANITIZE_DETAIL}},
  };
  return info;
}

}  // namespace zinf
