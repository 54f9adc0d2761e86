# Run at build time (cmake -P) to write the git SHA header. configure_file rewrites the file only
# when its content changes, so an unchanged SHA triggers no recompilation.
#   -DSOURCE_DIR=<repo> -DOUTPUT=<header> -DTEMPLATE=<template>
set(ZINF_GIT_SHA "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE _sha RESULT_VARIABLE _rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_rc EQUAL 0 AND _sha)
    set(ZINF_GIT_SHA "${_sha}")
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
      WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE _dirty RESULT_VARIABLE _rc2 ERROR_QUIET)
    if(_rc2 EQUAL 0 AND NOT _dirty STREQUAL "")
      string(APPEND ZINF_GIT_SHA "-dirty")
    endif()
  endif()
endif()
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
