# What `pkgym --version` prints: the version and how this binary was built. The configuration
# is fixed at configure time (pk_build_config.h); the commit is refreshed at every build.
set(PK_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
file(READ ${NCCL_INCLUDE_DIR}/nccl.h pk_nccl_h LIMIT 4096)
string(REGEX MATCH "NCCL_MAJOR ([0-9]+)" _ "${pk_nccl_h}")
set(pk_nccl_version ${CMAKE_MATCH_1})
string(REGEX MATCH "NCCL_MINOR ([0-9]+)" _ "${pk_nccl_h}")
string(APPEND pk_nccl_version .${CMAKE_MATCH_1})
string(REGEX MATCH "NCCL_PATCH ([0-9]+)" _ "${pk_nccl_h}")
string(APPEND pk_nccl_version .${CMAKE_MATCH_1})
if(PK_SANITIZE)
  set(pk_sanitizers "address,undefined")
else()
  set(pk_sanitizers "none")
endif()
file(CONFIGURE OUTPUT ${PK_GENERATED_DIR}/pk_build_config.h CONTENT [=[
#define PK_BUILD_TYPE "@CMAKE_BUILD_TYPE@"
#define PK_BUILD_COMPILER "@CMAKE_C_COMPILER_ID@ @CMAKE_C_COMPILER_VERSION@"
#define PK_BUILD_SANITIZERS "@pk_sanitizers@"
#define PK_BUILD_CUDA "@CUDAToolkit_VERSION@"
#define PK_BUILD_CUDA_ARCHS "@CMAKE_CUDA_ARCHITECTURES@"
#define PK_BUILD_NCCL "@pk_nccl_version@"
#define PK_BUILD_SYSTEM "@CMAKE_SYSTEM_NAME@ @CMAKE_SYSTEM_PROCESSOR@"
#define PK_BUILD_INSTALL_PREFIX "@CMAKE_INSTALL_PREFIX@"
]=] @ONLY)
add_custom_target(pk_git_info
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${PK_GENERATED_DIR}/pk_git_info.h
          -P ${PROJECT_SOURCE_DIR}/cmake/PkGitInfo.cmake
  BYPRODUCTS ${PK_GENERATED_DIR}/pk_git_info.h
  COMMENT "pkgym: recording the git commit" VERBATIM)
