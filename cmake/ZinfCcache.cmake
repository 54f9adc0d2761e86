# Compile through ccache when it is on PATH, unless the user chose a launcher (a -D or the
# CMAKE_<LANG>_COMPILER_LAUNCHER environment variable CMake itself reads) or turned it off with
# -DZINF_USE_CCACHE=OFF. A fresh clone then rebuilds from the cache in seconds.
#
# ccache keys on the compiler command line and the preprocessed source, both of which hold absolute
# paths. CCACHE_BASEDIR=<source dir> makes the paths under the checkout relative, so two clones in
# different folders share entries; a base_dir the user set (environment) is left alone.
# ZinfCcache is included before ZinfUnity, so the sloppiness is set whether or not the precompiled
# headers are on (it only widens what ccache may cache).
option(ZINF_USE_CCACHE "Compile through ccache when it is found on PATH" ON)
if(ZINF_USE_CCACHE)
  find_program(ZINF_CCACHE_PROGRAM ccache)
  if(ZINF_CCACHE_PROGRAM)
    set(_zinf_env "")
    if(NOT DEFINED ENV{CCACHE_BASEDIR})
      list(APPEND _zinf_env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR})
    endif()
    # Compiles that use a precompiled header (cmake/ZinfUnity.cmake) are cached only with these
    # (ccache's manual, "Precompiled headers"); a sloppiness the user set is left alone.
    if(NOT DEFINED ENV{CCACHE_SLOPPINESS})
      list(APPEND _zinf_env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime)
    endif()
    if(_zinf_env)
      set(_zinf_launcher ${CMAKE_COMMAND} -E env ${_zinf_env} ${ZINF_CCACHE_PROGRAM})
    else()
      set(_zinf_launcher ${ZINF_CCACHE_PROGRAM})
    endif()
    foreach(_lang C CXX CUDA)
      if(NOT DEFINED CMAKE_${_lang}_COMPILER_LAUNCHER AND NOT DEFINED ENV{CMAKE_${_lang}_COMPILER_LAUNCHER})
        set(CMAKE_${_lang}_COMPILER_LAUNCHER ${_zinf_launcher})
        set(_zinf_ccache_used ON)
      endif()
    endforeach()
    if(_zinf_ccache_used)
      message(STATUS "zinf: compiling through ${ZINF_CCACHE_PROGRAM} (-DZINF_USE_CCACHE=OFF to stop)")
    endif()
  endif()
endif()
