# Optional features: CUDA and MPI are detected (ON when found, OFF otherwise) and can be forced.
# A forced ON that cannot be satisfied is a configure error, never a silent downgrade.
include(CheckLanguage)

set(ZINF_CUDA_ENABLED OFF)
set(ZINF_CUDA_DETAIL "")
if(NOT ZINF_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper (H100/H200); override with -DCMAKE_CUDA_ARCHITECTURES=...
    endif()
    # nvcc's -O sets the optimisation of the host code only (the C++ around the kernel launches);
    # the device code is optimised by cicc and ptxas -O3 whatever it says. Release builds compile
    # that host code at -O1: nvcc's host compile is about a third of a .cu file's time, and the
    # cubin and PTX come out byte-identical (docs/build.md, "How long command 1 takes").
    if(NOT DEFINED CMAKE_CUDA_FLAGS_RELEASE)
      set(CMAKE_CUDA_FLAGS_RELEASE "-O1 -DNDEBUG" CACHE STRING "Flags used by the CUDA compiler during RELEASE builds")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(ZINF_CUDA_ENABLED ON)
    set(ZINF_CUDA_DETAIL "CUDA ${CUDAToolkit_VERSION}, sm_${CMAKE_CUDA_ARCHITECTURES}")
  elseif(ZINF_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ZINF_WITH_CUDA=ON but no CUDA compiler was found; install the CUDA toolkit or set CMAKE_CUDA_COMPILER")
  endif()
endif()

set(ZINF_MPI_ENABLED OFF)
set(ZINF_MPI_DETAIL "")
if(NOT ZINF_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(ZINF_MPI_ENABLED ON)
    string(REGEX REPLACE "[\r\n]+.*" "" _zinf_mpi_first_line "${MPI_CXX_LIBRARY_VERSION_STRING}")
    string(REGEX MATCH "[A-Za-z ]*MPI v?[0-9.]+" ZINF_MPI_DETAIL "${_zinf_mpi_first_line}")
    string(STRIP "${ZINF_MPI_DETAIL}" ZINF_MPI_DETAIL)
    if(NOT ZINF_MPI_DETAIL)
      set(ZINF_MPI_DETAIL "MPI ${MPI_CXX_VERSION}")
    endif()
  elseif(ZINF_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "ZINF_WITH_MPI=ON but MPI was not found; run scripts/install-deps.sh (libopenmpi-dev)")
  endif()
endif()

message(STATUS "zinf: CUDA ${ZINF_CUDA_ENABLED} ${ZINF_CUDA_DETAIL}; MPI ${ZINF_MPI_ENABLED} ${ZINF_MPI_DETAIL}; sanitizers '${ZINF_SANITIZE}'")
