# Strict warnings for our own C code; CUDA code gets them through -Xcompiler.
set(PK_C_WARNINGS -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter)
if(PK_SANITIZE)
  set(PK_SAN_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  foreach(f ${PK_SAN_FLAGS})
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${f}>)
  endforeach()
  add_link_options(-fsanitize=address,undefined)
endif()

# pk_strict(<target>): apply the project's warning set to the target's C sources.
function(pk_strict target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${PK_C_WARNINGS}>)
endfunction()
