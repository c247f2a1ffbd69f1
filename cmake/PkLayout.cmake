# The installed layout (FHS, GNUInstallDirs; `cmake --install build --prefix P` picks P):
#   P/bin/pkgym
#   P/libexec/pkgym/{pk-runner, pk_summarizer_hook_host}
#   P/lib/pkgym/modules/pkprob_*.so          the compiled problem modules
#   P/lib/pkgym/plugins/libpk_summarizer_*.so example summarizer plugins
#   P/share/pkgym/{problems, templates, include/candidate, examples}
#   P/lib/libpkgym_client.so*, P/include/pkgym/*.h, P/lib/pkgconfig/pkgym-client.pc
# An installed pkgym finds the rest relative to its own executable (common/src/install.c), so
# these are relative to CMAKE_INSTALL_BINDIR and the prefix may change at install time.
include(GNUInstallDirs)
set(PK_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/pkgym)
set(PK_INSTALL_LIBEXECDIR ${CMAKE_INSTALL_LIBEXECDIR}/pkgym)
set(PK_INSTALL_MODULEDIR ${CMAKE_INSTALL_LIBDIR}/pkgym/modules)
set(PK_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/pkgym/plugins)
set(PK_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/pkgym)

# pk_rel_from_bindir(<var> <dir>): dir as seen from the installed bin directory.
function(pk_rel_from_bindir var dir)
  if(IS_ABSOLUTE "${dir}")
    set(${var} "${dir}" PARENT_SCOPE)
  else()
    file(RELATIVE_PATH rel "/pk-prefix/${CMAKE_INSTALL_BINDIR}" "/pk-prefix/${dir}")
    set(${var} "${rel}" PARENT_SCOPE)
  endif()
endfunction()
pk_rel_from_bindir(PK_INSTALL_REL_DATA ${PK_INSTALL_DATADIR})
pk_rel_from_bindir(PK_INSTALL_REL_LIBEXEC ${PK_INSTALL_LIBEXECDIR})
pk_rel_from_bindir(PK_INSTALL_REL_MODULES ${PK_INSTALL_MODULEDIR})

# Installed binaries keep the RPATH of the libraries they link outside the system directories
# (CUDA, NCCL), so the runner and the modules load without LD_LIBRARY_PATH.
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
