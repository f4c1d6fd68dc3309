# ctest `consumer`: install this build into a fresh prefix, configure and build
# tests/consumer against it with find_package(nibble), run it (on kjv-7m when present).
# -D: BUILD (this build folder), SOURCE (the tree), WORK (scratch), C_COMPILER, C_FLAGS,
# LIBDIR (CMAKE_INSTALL_LIBDIR), MODEL (may be empty), GENERATOR.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer: failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD}" --prefix "${WORK}/prefix")
foreach(f include/nibble.h include/nibble_eval.h include/nibble_server.h include/nibble_synth.h
          ${LIBDIR}/pkgconfig/nibble.pc ${LIBDIR}/cmake/nibble/nibbleConfig.cmake
          ${LIBDIR}/cmake/nibble/nibbleConfigVersion.cmake)
  if(NOT EXISTS "${WORK}/prefix/${f}")
    message(FATAL_ERROR "consumer: the install lacks ${f}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S "${SOURCE}/tests/consumer" -B "${WORK}/build" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${WORK}/prefix" "-DCMAKE_C_COMPILER=${C_COMPILER}"
    "-DCMAKE_C_FLAGS=${C_FLAGS}")
run(${CMAKE_COMMAND} --build "${WORK}/build")
if(MODEL AND EXISTS "${MODEL}")
  run("${WORK}/build/consumer" "${MODEL}")
else()
  run("${WORK}/build/consumer")
endif()
file(REMOVE_RECURSE "${WORK}")
