# Run a libFuzzer target for a few seconds from the committed seeds. New inputs go to
# a scratch folder in the build tree, never into the source tree. The seed is fixed so
# that a test run is repeatable (a CI failure reproduces); fuzzing for real, with fresh
# randomness and for longer, is tools/fuzz.sh.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -seed=20261130 -rss_limit_mb=4096
                        -max_len=131072 -print_final_stats=1 ${WORK} ${SEEDS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer ${FUZZER} failed (exit ${rc}); the crashing input is in the build folder")
endif()
