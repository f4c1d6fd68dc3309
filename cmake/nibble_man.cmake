# cmake/nibble_man.cmake — the man page nibble.1, written by help2man from the program's
# own help: `nibble --help` and `--version` for the page, and a COMMANDS section that
# holds `nibble CMD --help` for every command `nibble --help` lists.
# Run as: cmake -DNIBBLE=path/to/nibble -DHELP2MAN=help2man -DOUT=nibble.1 -P nibble_man.cmake
execute_process(COMMAND ${NIBBLE} --help OUTPUT_VARIABLE _help RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NIBBLE} --help failed")
endif()
string(REGEX MATCHALL "\n  [a-z][a-z-]*  " _lines "${_help}")
set(_inc "[COMMANDS]\n")
foreach(_l ${_lines})
  string(STRIP "${_l}" _cmd)
  execute_process(COMMAND ${NIBBLE} ${_cmd} --help OUTPUT_VARIABLE _cmd_help)
  # roff: a leading '.' or '\'' would be a request; backslashes are escapes
  string(REPLACE "\\" "\\e" _cmd_help "${_cmd_help}")
  string(REGEX REPLACE "\n([.'])" "\n\\\\&\\1" _cmd_help "\n${_cmd_help}")
  string(APPEND _inc ".SS nibble ${_cmd}\n.nf\n${_cmd_help}\n.fi\n")
endforeach()
string(APPEND _inc "[SEE ALSO]\nThe README and docs/ of the nibble sources; 'nibble help COMMAND'.\n")
file(WRITE ${OUT}.inc "${_inc}")
execute_process(COMMAND ${HELP2MAN} --no-info --no-discard-stderr
                        --name "small LLMs, fast, on edge CPUs" --include ${OUT}.inc
                        --output ${OUT} ${NIBBLE}
                RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "help2man failed on ${NIBBLE}")
endif()
