// The CUDA test binary's entry point: on a machine without a usable GPU it prints why and exits
// with 77, which CTest reports as "skipped" (SKIP_RETURN_CODE), instead of failing every test.
// Listing the tests (catch_discover_tests at build time) never needs a GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string_view>

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).rfind("--list", 0) == 0) listing = true;
  }
  if (!listing) {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
      std::printf("skipped: no CUDA device (%s)\n",
                  error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount found 0 devices");
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}
