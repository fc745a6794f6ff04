# Man pages and shell completion, generated at build time by the built gpuman from its own
# CLI definitions (`gpuman __man DIR`, `gpuman completion bash|zsh`), so they cannot drift
# from the options. Pages land in ${CMAKE_BINARY_DIR}/man/, completion scripts in
# ${CMAKE_BINARY_DIR}/completion/; both are installed. Needs nothing beyond gpuman itself.
include(GNUInstallDirs)

set(GPUMAN_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(GPUMAN_COMPLETION_DIR ${CMAKE_BINARY_DIR}/completion)

# One command writes them all: the set of pages follows the set of commands, which CMake
# cannot know at configure time, so gpuman.1 stands for the directory. Removing the
# directory first drops pages of commands that no longer exist.
add_custom_command(
  OUTPUT ${GPUMAN_MAN_DIR}/gpuman.1 ${GPUMAN_COMPLETION_DIR}/gpuman ${GPUMAN_COMPLETION_DIR}/_gpuman
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${GPUMAN_MAN_DIR}
  COMMAND $<TARGET_FILE:gpuman> __man ${GPUMAN_MAN_DIR}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GPUMAN_COMPLETION_DIR}
  COMMAND sh -c "\"$1\" completion bash > \"$2/gpuman\" && \"$1\" completion zsh > \"$2/_gpuman\""
          sh $<TARGET_FILE:gpuman> ${GPUMAN_COMPLETION_DIR}
  DEPENDS gpuman
  COMMENT "Generating man pages and shell completion from gpuman's command definitions"
  VERBATIM)
add_custom_target(gpuman_man ALL
  DEPENDS ${GPUMAN_MAN_DIR}/gpuman.1 ${GPUMAN_COMPLETION_DIR}/gpuman ${GPUMAN_COMPLETION_DIR}/_gpuman)

# Tests read build/man/ and build/completion/.
foreach(t cli_test e2e_test)
  if(TARGET ${t})
    add_dependencies(${t} gpuman_man)
  endif()
endforeach()

# The installed pages are written again at install time, naming the documents' installed
# directory (PREFIX/share/doc/gpuman, from the prefix actually used: `cmake --install
# --prefix P`, cpack's /usr) where build/man/'s name the build tree's docs/ link.
install(CODE "set(gpuman_exe \"$<TARGET_FILE:gpuman>\")\nset(gpuman_mandir \"${CMAKE_INSTALL_MANDIR}\")")
install(CODE [[
  set(gpuman_man1 "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${gpuman_mandir}/man1")
  message(STATUS "Installing: ${gpuman_man1}/gpuman*.1")
  execute_process(COMMAND "${gpuman_exe}" __man "${gpuman_man1}" "${CMAKE_INSTALL_PREFIX}/share/doc/gpuman"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gpuman __man ${gpuman_man1} failed")
  endif()
  file(GLOB gpuman_pages "${gpuman_man1}/gpuman*.1")
  file(CHMOD ${gpuman_pages} PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)  # not the umask's
]])
install(FILES ${GPUMAN_COMPLETION_DIR}/gpuman
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${GPUMAN_COMPLETION_DIR}/_gpuman
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
