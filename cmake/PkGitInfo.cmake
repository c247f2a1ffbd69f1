# Run at every build (cmake -P): writes OUT with the source tree's commit, rewriting it only when
# the commit changes, so `pkgym --version` names the commit it was built from.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown (not built from a git checkout)")
endif()
file(CONFIGURE OUTPUT "${OUT}" CONTENT "#define PK_GIT_COMMIT \"${commit}\"\n" @ONLY)
