# `cmake --install BUILD [--prefix P]`: the layout of cmake/PkLayout.cmake. tests/install
# checks it by installing into a temporary prefix and running pkgym from there.

install(TARGETS pkgym RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS pk-runner pk_summarizer_hook_host RUNTIME DESTINATION ${PK_INSTALL_LIBEXECDIR})
if(TARGET pk-cupti-trace) # the profile stage looks for it next to pk-runner
  install(TARGETS pk-cupti-trace LIBRARY DESTINATION ${PK_INSTALL_LIBEXECDIR})
endif()

# Problems: one module per <suite>/<id>/problem.cu (problems/CMakeLists.txt), and the suites'
# definitions (meta.json, prompt.md, reference solutions) with hardware.json.
file(GLOB pk_problem_sources ${PROJECT_SOURCE_DIR}/problems/*/*/problem.cu)
set(pk_suites "")
foreach(src ${pk_problem_sources})
  get_filename_component(dir ${src} DIRECTORY)
  get_filename_component(id ${dir} NAME)
  get_filename_component(suite_dir ${dir} DIRECTORY)
  get_filename_component(suite ${suite_dir} NAME)
  if(TARGET pkprob_${suite}_${id}) # PK_GPU_MODULES=OFF builds no GPU module
    install(TARGETS pkprob_${suite}_${id} LIBRARY DESTINATION ${PK_INSTALL_MODULEDIR})
  endif()
  list(APPEND pk_suites ${suite})
endforeach()
list(REMOVE_DUPLICATES pk_suites)
foreach(suite ${pk_suites})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/problems/${suite}
          DESTINATION ${PK_INSTALL_DATADIR}/problems)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/problems/hardware.json
        DESTINATION ${PK_INSTALL_DATADIR}/problems)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/problems/include/candidate
        DESTINATION ${PK_INSTALL_DATADIR}/include)

# Feedback templates and the example summarizer hooks.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/summarizer_hooks/templates DESTINATION ${PK_INSTALL_DATADIR})
install(TARGETS pk_summarizer_terse pk_summarizer_verbose
        LIBRARY DESTINATION ${PK_INSTALL_PLUGINDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/summarizer_hooks/examples/history_cmd.py
        DESTINATION ${PK_INSTALL_DATADIR}/examples)

# The C client: a shared library (every object of pk_client, whatever its sources), its
# headers and a relocatable pkg-config file.
# (CMake 3.25 wants one source of the library's own.)
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/pkgym_client_version.c CONTENT
     "const char *pkgym_client_version(void) { return \"@PROJECT_VERSION@\"; }\n" @ONLY)
add_library(pkgym_client SHARED ${PROJECT_BINARY_DIR}/generated/pkgym_client_version.c)
target_link_libraries(pkgym_client PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,pk_client>")
if(NOT PK_SANITIZE) # sanitizer runtimes come with the executable, not with a shared library
  target_link_options(pkgym_client PRIVATE -Wl,--no-undefined)
endif()
set_target_properties(pkgym_client PROPERTIES VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR} LINKER_LANGUAGE C)
install(TARGETS pkgym_client LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/rollout/include/pk_client.h
              ${PROJECT_SOURCE_DIR}/rollout/include/pk_curve.h
              ${PROJECT_SOURCE_DIR}/common/include/pk_common.h
              ${PROJECT_SOURCE_DIR}/common/include/pk_status.h
        DESTINATION ${PK_INSTALL_INCLUDEDIR})
set(pk_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH pk_pc_to_prefix "/pk-prefix/${pk_pc_dir}" "/pk-prefix")
string(REGEX REPLACE "/$" "" pk_pc_to_prefix "${pk_pc_to_prefix}")
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/pkgym-client.pc CONTENT [=[
prefix=${pcfiledir}/@pk_pc_to_prefix@
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@PK_INSTALL_INCLUDEDIR@

Name: pkgym-client
Description: C client for the pkgym environment server (protocol v1 over ZeroMQ + msgpack)
Version: @PROJECT_VERSION@
Requires: jansson msgpack
Requires.private: libzmq
Libs: -L${libdir} -lpkgym_client
Cflags: -I${includedir}
]=] @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pkgym-client.pc DESTINATION ${pk_pc_dir})

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
