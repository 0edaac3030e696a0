# External dependencies (Debian packages installed by the top-level Makefile):
# OpenBLAS (cblas), jansson (JSON), libmd (MD5, SHA-256), OpenMP, libm.
find_package(PkgConfig REQUIRED)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(LIBMD REQUIRED IMPORTED_TARGET libmd)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
find_package(OpenMP REQUIRED COMPONENTS C)
find_package(Threads REQUIRED)

add_library(kn_deps INTERFACE)
target_link_libraries(kn_deps INTERFACE PkgConfig::JANSSON PkgConfig::LIBMD
  PkgConfig::OPENBLAS OpenMP::OpenMP_C Threads::Threads m ${CMAKE_DL_LIBS})
# Link flags for the pkg-config file and for static consumers.
set(KN_DEP_LIBS jansson md openblas gomp pthread m dl)
set(KN_PC_REQUIRES "jansson libmd openblas")
