# uninstall.cmake — `make uninstall` (cmake -DMANIFEST=... -P): removes
# every file and symlink the last install listed in its manifest
# (build/install_manifest.txt), below $DESTDIR when set (the manifest names
# the final paths, without DESTDIR: give uninstall the install's), then the folders that are
# sluice's own (lib/cmake/sluice) if that left them empty; shared folders
# (lib, share/man/man3) stay even when empty. A file already gone is
# reported and skipped.
if(NOT MANIFEST OR NOT EXISTS "${MANIFEST}")
  message(FATAL_ERROR "uninstall: no install manifest ${MANIFEST}: nothing was installed from this build tree")
endif()
file(STRINGS "${MANIFEST}" files)
set(own_dirs "")
foreach(f IN LISTS files)
  set(f "$ENV{DESTDIR}${f}")
  if(IS_SYMLINK "${f}" OR EXISTS "${f}")
    message(STATUS "Removing ${f}")
    file(REMOVE "${f}")
  else()
    message(STATUS "Already gone: ${f}")
  endif()
  get_filename_component(dir "${f}" DIRECTORY)
  if(dir MATCHES "/cmake/sluice$")
    list(APPEND own_dirs "${dir}")
  endif()
endforeach()
list(REMOVE_DUPLICATES own_dirs)
foreach(dir IN LISTS own_dirs)
  file(GLOB left "${dir}/*")
  if(NOT left)
    file(REMOVE_RECURSE "${dir}")
  endif()
endforeach()
