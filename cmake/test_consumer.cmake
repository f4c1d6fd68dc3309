# ctest `consumer`: install this build into a fresh prefix, configure and build
# tests/consumer against it with find_package(nibble), run it (on kjv-7m when present);
# then build examples/simple.c with the compiler and `pkg-config --cflags --libs nibble`
# alone (the .pc's Cflags must be just -I of the prefix's include folder) and run it on
# a .nib the installed nibble makes, where it must print text.
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

# pkg-config, from an install made with --prefix: the .pc finds its prefix by itself
set(prefix "${WORK}/prefix")
set(ENV{PKG_CONFIG_PATH} "${prefix}/${LIBDIR}/pkgconfig")
set(ENV{PKG_CONFIG_LIBDIR} "${prefix}/${LIBDIR}/pkgconfig") # no other .pc is looked at
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
function(pc out)
  execute_process(COMMAND ${PKG_CONFIG} ${ARGN} nibble RESULT_VARIABLE rc OUTPUT_VARIABLE o
                  ERROR_VARIABLE e OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer: pkg-config ${ARGN} nibble failed: ${e}")
  endif()
  separate_arguments(o UNIX_COMMAND "${o}")
  set(${out} ${o} PARENT_SCOPE)
endfunction()
pc(cflags --cflags)
pc(libs --libs)
list(JOIN cflags " " _c)
list(JOIN libs " " _l)
message("consumer: pkg-config: ${_c} ${_l}")
file(REAL_PATH "${prefix}/include" want_inc)
list(LENGTH cflags n_cflags)
set(inc "")
if(n_cflags EQUAL 1 AND cflags MATCHES "^-I(.+)$")
  file(REAL_PATH "${CMAKE_MATCH_1}" inc)
endif()
if(NOT inc STREQUAL want_inc)
  message(FATAL_ERROR "consumer: nibble.pc's Cflags are '${cflags}', not just -I${want_inc}")
endif()
separate_arguments(c_flags UNIX_COMMAND "${C_FLAGS}")
run(${C_COMPILER} -std=c11 -Wall -Wextra -Werror ${c_flags} ${cflags}
    "${SOURCE}/examples/simple.c" -o "${WORK}/simple" ${libs})
if(MODEL AND EXISTS "${MODEL}")
  # a packed model runs as it is: the example maps it, no first-use quantization
  run("${prefix}/bin/nibble" quantize -q -m "${MODEL}" --path w4a8 -o "${WORK}/kjv.nib")
  set(ENV{LD_LIBRARY_PATH} "${prefix}/${LIBDIR}")
  execute_process(COMMAND "${WORK}/simple" "${WORK}/kjv.nib" "In the beginning" 16
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("consumer: simple: ${out}${err}")
  string(STRIP "${out}" text)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    message(FATAL_ERROR "consumer: examples/simple.c built with pkg-config printed no text (${rc})")
  endif()
endif()
file(REMOVE_RECURSE "${WORK}")
