# Run a libFuzzer target for a few seconds from the committed seeds. New inputs go to
# a scratch folder in the build tree, never into the source tree.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -rss_limit_mb=4096
                        -max_len=131072 -print_final_stats=1 ${WORK} ${SEEDS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer ${FUZZER} failed (exit ${rc}); the crashing input is in the build folder")
endif()
