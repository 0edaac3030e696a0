#!/usr/bin/env bash
# Installs kiln from the build tree into a scratch prefix, then builds and
# runs a consumer three times: with CMake's find_package, with pkg-config,
# and with pkg-config --static and libkiln.a. Each must run as built, with
# no LD_LIBRARY_PATH (CMake's build rpath; kiln.pc's rpath), and take the
# OpenBLAS kernels kiln chooses for an Intel CPU (src/ompenv/ompenv.c:
# libkiln_ompenv must start before OpenBLAS, so link after it).
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
expected=$'kiln 0.1.0\ntensor([[1., 1.],\n        [1., 1.]])'
# The core OpenBLAS should report (OPENBLAS_VERBOSE=2), from /proc/cpuinfo;
# empty: a CPU kiln leaves to OpenBLAS.
want=
if grep -q -m1 GenuineIntel /proc/cpuinfo; then
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { for f; do [[ $flags == *" $f "* ]] || return 1; done; }
  if has avx512f avx512cd avx512bw avx512dq avx512vl; then want=SkylakeX
  elif has avx2 fma; then want=Haswell; fi
fi
check_core() { # program, how it was linked
  local core
  core=$(env -u LD_LIBRARY_PATH -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 "$1" 2>&1 >/dev/null |
         sed -n 's/^Core: //p' | head -1)
  [ -z "$want" ] || [ "$core" = "$want" ] ||
    { echo "$2 consumer: OpenBLAS took the $core kernels, expected $want"; exit 1; }
}
cmake -S "$src" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" > /dev/null
cmake --build "$tmp/cm" > /dev/null
out=$(env -u LD_LIBRARY_PATH "$tmp/cm/consumer")
[ "$out" = "$expected" ] || { echo "find_package consumer printed: $out"; exit 1; }
check_core "$tmp/cm/consumer" find_package
libdir=$(ls -d "$tmp/prefix"/lib*/pkgconfig | head -1)
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs kiln)
gcc -std=c17 "$src/consumer.c" $flags -o "$tmp/pc_consumer"
out=$(env -u LD_LIBRARY_PATH "$tmp/pc_consumer")
[ "$out" = "$expected" ] || { echo "pkg-config consumer printed: $out"; exit 1; }
check_core "$tmp/pc_consumer" pkg-config
static=$(ls "$tmp/prefix"/lib*/libkiln.a | head -1)
sflags=$(PKG_CONFIG_PATH="$libdir" pkg-config --static --libs kiln | sed 's/\(^\| \)-lkiln / /')
gcc -std=c17 "$src/consumer.c" $(PKG_CONFIG_PATH="$libdir" pkg-config --cflags kiln) "$static" \
  $sflags -o "$tmp/pc_static_consumer"
out=$(env -u LD_LIBRARY_PATH "$tmp/pc_static_consumer")
[ "$out" = "$expected" ] || { echo "pkg-config --static consumer printed: $out"; exit 1; }
check_core "$tmp/pc_static_consumer" "pkg-config --static"
echo "install: find_package, pkg-config and pkg-config --static consumers OK${want:+ (OpenBLAS $want)}"
