# Test helpers. Only GPU tests may skip: a test labelled `gpu` exits 77 when no GPU is present,
# which ctest reports as "Skipped", never as passed. Any other test that exits 77 fails, so a
# missing fixture can never pass as a skip.
set(PK_SKIP_CODE 77)

# Sets the skip code on test name when labels holds `gpu`.
function(pk_gpu_skip name labels)
  if("gpu" IN_LIST labels)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${PK_SKIP_CODE})
  endif()
endfunction()

# pk_add_cmocka_test(NAME SOURCES... LIBS lib... [LABELS l...])
function(pk_add_cmocka_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  pk_strict(${name})
  target_link_libraries(${name} PRIVATE ${T_LIBS} pk::cmocka)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${T_LABELS}")
  pk_gpu_skip(${name} "${T_LABELS}")
endfunction()

# pk_add_script_test(NAME COMMAND... [LABELS l...] [TIMEOUT s])
function(pk_add_script_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "COMMAND;LABELS;ENV" ${ARGN})
  add_test(NAME ${name} COMMAND ${T_COMMAND})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "PKGYM=$<TARGET_FILE:pkgym>;PK_SOURCE_DIR=${PROJECT_SOURCE_DIR};PK_BUILD_DIR=${PROJECT_BINARY_DIR};${T_ENV}")
  pk_gpu_skip(${name} "${T_LABELS}")
endfunction()
