#!/usr/bin/env bash
# Installs kiln from the build tree into a scratch prefix, then builds and
# runs a consumer twice: with CMake's find_package and with pkg-config. Both
# must run as built, with no LD_LIBRARY_PATH (CMake's build rpath; kiln.pc's
# rpath).
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
expected=$'kiln 0.1.0\ntensor([[1., 1.],\n        [1., 1.]])'
cmake -S "$src" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" > /dev/null
cmake --build "$tmp/cm" > /dev/null
out=$(env -u LD_LIBRARY_PATH "$tmp/cm/consumer")
[ "$out" = "$expected" ] || { echo "find_package consumer printed: $out"; exit 1; }
libdir=$(ls -d "$tmp/prefix"/lib*/pkgconfig | head -1)
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs kiln)
gcc -std=c17 "$src/consumer.c" $flags -o "$tmp/pc_consumer"
out=$(env -u LD_LIBRARY_PATH "$tmp/pc_consumer")
[ "$out" = "$expected" ] || { echo "pkg-config consumer printed: $out"; exit 1; }
echo "install: find_package and pkg-config consumers OK"
