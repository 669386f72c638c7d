# Writes OUTPUT (a header defining FAISS_EXT_GIT_COMMIT) from the git state of
# SOURCE_DIR; rewrites it only when the commit changes, so nothing rebuilds
# needlessly. Run as: cmake -DSOURCE_DIR=... -DOUTPUT=... -P GitCommit.cmake
execute_process(COMMAND git -C ${SOURCE_DIR} describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#pragma once\n#define FAISS_EXT_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUTPUT} "${text}")
endif()
