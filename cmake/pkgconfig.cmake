# pkgconfig.cmake — run when installing (install(CODE) in CMakeLists.txt):
# writes SL_PC_OUT from sluice.pc.in for the prefix being installed to,
# CMAKE_INSTALL_PREFIX, which is then `cmake --install --prefix`'s when
# one is given (DESTDIR is not part of it). The paths are literal, as
# distributions' .pc files are: prefix=/usr, libdir=${prefix}/LIBDIR for a
# relative LIBDIR (lib, lib/x86_64-linux-gnu), or the absolute LIBDIR; the
# same for includedir. A staged install (DESTDIR) is used through
# PKG_CONFIG_SYSROOT_DIR=$DESTDIR.
set(SL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(dir LIBDIR INCLUDEDIR)
  if(NOT IS_ABSOLUTE "${SL_PC_${dir}}")
    set(SL_PC_${dir} "\${prefix}/${SL_PC_${dir}}")
  endif()
endforeach()
configure_file("${SL_PC_IN}" "${SL_PC_OUT}" @ONLY)
