# find_package(sluice) from an installed tree: the targets sluice::sluice
# (libsluice.so) and sluice::static (libsluice.a, which needs pthread).
# Either one replaces malloc in the program it is linked into.
include("${CMAKE_CURRENT_LIST_DIR}/sluiceTargets.cmake")
