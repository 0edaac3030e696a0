# External dependencies (Debian packages installed by the top-level Makefile):
# oneDNN (float32 GEMM and convolution), OpenBLAS (cblas: float64 GEMM),
# SLEEF (vector math), jansson (JSON), libmd (MD5, SHA-256), OpenMP, libm.
find_package(PkgConfig REQUIRED)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(LIBMD REQUIRED IMPORTED_TARGET libmd)
# OpenBLAS threading: we keep Debian's pthread build (libopenblas-dev) rather
# than libopenblas-openmp-dev. Measured with bench/bench_mm on the 2-core CI
# box (under load): the OpenMP build ran 512^3 sgemm at 10-21 GFLOP/s against
# 17-98 for the pthread build, and a loop alternating kiln's OpenMP kernels
# with BLAS calls was no faster (44-260 ms vs 56-265 ms). What hurt that loop
# was libgomp's spin-wait after parallel regions: OMP_WAIT_POLICY=passive cut
# it 3x with either build. So kiln never calls BLAS from inside its own
# OpenMP regions and only opens them above 64K elements. (Both -dev packages
# can be installed together; the openblas.pc alternative then prefers the
# pthread build by priority.)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
# oneDNN: Debian's libdnnl-dev ships no pkg-config file and its CMake package
# pulls in OpenCL, so the header and library are located directly. Debian
# builds it with the OpenMP runtime (DNNL_CPU_RUNTIME OMP, libgomp): it shares
# kiln's OpenMP thread pool (see docs/ARCHITECTURE.md, "Kernels and libraries").
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h REQUIRED)
find_library(DNNL_LIBRARY dnnl REQUIRED)
pkg_check_modules(SLEEF REQUIRED IMPORTED_TARGET sleef)
find_package(OpenMP REQUIRED COMPONENTS C)
find_package(Threads REQUIRED)

# oneDNN and libgomp as targets of their own: libkiln_ompenv (CMakeLists.txt)
# makes itself their dependency, so that it is linked after both.
add_library(kn_dnnl SHARED IMPORTED GLOBAL)
set_target_properties(kn_dnnl PROPERTIES IMPORTED_LOCATION ${DNNL_LIBRARY})
add_library(kn_gomp SHARED IMPORTED GLOBAL)
set_target_properties(kn_gomp PROPERTIES IMPORTED_LOCATION ${OpenMP_gomp_LIBRARY})

add_library(kn_deps INTERFACE)
target_link_libraries(kn_deps INTERFACE PkgConfig::JANSSON PkgConfig::LIBMD
  PkgConfig::OPENBLAS PkgConfig::SLEEF kn_dnnl OpenMP::OpenMP_C kn_gomp Threads::Threads m
  ${CMAKE_DL_LIBS})
target_include_directories(kn_deps INTERFACE ${DNNL_INCLUDE_DIR})
# Link flags for the pkg-config file and for static consumers.
set(KN_DEP_LIBS jansson md openblas sleef dnnl gomp pthread m dl)
set(KN_PC_REQUIRES "jansson libmd openblas sleef")
# OpenBLAS's libraries also go in kiln.pc's Libs.private before
# -lkiln_ompenv: pkg-config puts the Requires' libraries last, and
# libkiln_ompenv must be linked after OpenBLAS, whose kernels it chooses
# (src/ompenv/ompenv.c). As -Wl,-l...: pkgconf drops the first of two equal
# -l flags, which would leave only the late one.
set(KN_PC_OPENBLAS "")
foreach(f ${OPENBLAS_LDFLAGS})
  if(f MATCHES "^-l")
    string(APPEND KN_PC_OPENBLAS " -Wl,${f}")
  else()
    string(APPEND KN_PC_OPENBLAS " ${f}")
  endif()
endforeach()
string(STRIP "${KN_PC_OPENBLAS}" KN_PC_OPENBLAS)

# MPI (optional): the distributed layer (src/distributed/, kiln/distributed.h)
# runs on Open MPI (Debian's libopenmpi-dev). Without it, or with
# -DKN_WITH_MPI=OFF, libkiln still has the kn_dist_* and kn_ddp_* entry points
# but they fail with KN_EUNSUPPORTED ("kiln was built without MPI") and
# kn_dist_available() is false (src/distributed/nompi.c).
option(KN_WITH_MPI "Build the distributed layer on MPI when MPI is found" ON)
set(KN_HAVE_MPI OFF)
if(KN_WITH_MPI)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(KN_HAVE_MPI ON)
    # Only the files of src/distributed/ see mpi.h (their include path is set
    # in CMakeLists.txt); everything links libmpi.
    target_link_libraries(kn_deps INTERFACE ${MPI_C_LIBRARIES})
    list(APPEND KN_DEP_LIBS mpi)
    string(APPEND KN_PC_REQUIRES " ompi-c")
    message(STATUS "kiln: distributed layer on MPI ${MPI_C_VERSION} (mpiexec: ${MPIEXEC_EXECUTABLE})")
  else()
    message(STATUS "kiln: MPI not found, the distributed layer reports \"built without MPI\" "
      "(install libopenmpi-dev and openmpi-bin)")
  endif()
endif()
