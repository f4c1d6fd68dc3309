# cmake/nibble_cli_extras.cmake — what the CLI installs beside the program: bash
# completion (tools/nibble-completion.bash, which reads the options from nibble's own
# help) and, when help2man is found, a man page generated from `nibble --help` and every
# `nibble CMD --help` (cmake/nibble_man.cmake). Included at the end of CMakeLists.txt.
include(GNUInstallDirs)
install(FILES ${CMAKE_SOURCE_DIR}/tools/nibble-completion.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME nibble)
find_program(HELP2MAN help2man)
if(HELP2MAN AND NOT CMAKE_CROSSCOMPILING)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/nibble.1
    COMMAND ${CMAKE_COMMAND} -DNIBBLE=$<TARGET_FILE:nibble> -DHELP2MAN=${HELP2MAN}
            -DOUT=${CMAKE_BINARY_DIR}/nibble.1 -P ${CMAKE_SOURCE_DIR}/cmake/nibble_man.cmake
    DEPENDS nibble ${CMAKE_SOURCE_DIR}/cmake/nibble_man.cmake
    COMMENT "nibble.1 (help2man)" VERBATIM)
  add_custom_target(nibble_man ALL DEPENDS ${CMAKE_BINARY_DIR}/nibble.1)
  install(FILES ${CMAKE_BINARY_DIR}/nibble.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found (Debian package help2man): no man page")
endif()
