# Every dependency is found with find_path/find_library (or CMake's own modules),
# which honour CMAKE_PREFIX_PATH: on the GPU machine the Debian -dev packages are
# unpacked into a private prefix (see docs/CONTRIBUTING.md).
include(GNUInstallDirs)
set(PK_MULTIARCH_SUFFIXES lib/x86_64-linux-gnu lib64 lib)

function(pk_find_lib name header libname)
  find_path(${name}_INCLUDE_DIR ${header} PATH_SUFFIXES include)
  find_library(${name}_LIBRARY NAMES ${libname} PATH_SUFFIXES ${PK_MULTIARCH_SUFFIXES})
  if(NOT ${name}_INCLUDE_DIR OR NOT ${name}_LIBRARY)
    message(FATAL_ERROR "pkgym: ${name} not found (${header}, lib${libname}). Run scripts/setup, "
                        "or point CMAKE_PREFIX_PATH at a prefix that holds it.")
  endif()
  add_library(pk::${name} UNKNOWN IMPORTED GLOBAL)
  set_target_properties(pk::${name} PROPERTIES IMPORTED_LOCATION "${${name}_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${${name}_INCLUDE_DIR}")
  message(STATUS "pkgym: ${name}: ${${name}_LIBRARY}")
endfunction()

pk_find_lib(zmq zmq.h zmq)
pk_find_lib(msgpack msgpack.h msgpackc)
pk_find_lib(jansson jansson.h jansson)
pk_find_lib(sqlite3 sqlite3.h sqlite3)
pk_find_lib(seccomp seccomp.h seccomp)
pk_find_lib(elf libelf.h elf)
pk_find_lib(cmocka cmocka.h cmocka)

find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)

# CUDA toolkit and NCCL. NCCL sits under /usr/local/cuda on the CPU machines
# and under /usr on the GPU machine.
find_package(CUDAToolkit REQUIRED)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
find_library(NCCL_LIBRARY NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES ${PK_MULTIARCH_SUFFIXES})
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(FATAL_ERROR "pkgym: NCCL not found (nccl.h, libnccl)")
endif()
add_library(pk::nccl UNKNOWN IMPORTED GLOBAL)
set_target_properties(pk::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
message(STATUS "pkgym: nccl: ${NCCL_LIBRARY}")

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90a)
endif()
if(NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
endif()
enable_language(CUDA)

find_package(Python3 COMPONENTS Interpreter)
