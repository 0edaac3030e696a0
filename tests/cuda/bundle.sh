#!/usr/bin/env bash
# Carry kiln's GPU test programs to a GPU machine that lacks kiln's Debian
# libraries (only glibc, a C compiler and the NVIDIA stack are assumed).
#   bash tests/cuda/bundle.sh <build-dir> <out-dir>
# Copies the GPU programs built under <build-dir>/tests (the list run_gpu.sh
# runs), run_gpu.sh and torch_baseline.py into <out-dir>, and every library
# the programs load that glibc does not provide (as ldd resolves them here)
# into <out-dir>/lib; the programs lose their debug info and libraries over
# 1 MB are gzip'd (run_gpu.sh unpacks them): about 33 MB in all. Prints what
# it packed and the bundle's size. There:
#   bash <out-dir>/run_gpu.sh <out-dir> [program ...]
set -euo pipefail
BUILD=${1:?usage: bundle.sh <build-dir> <out-dir>}
OUT=${2:?usage: bundle.sh <build-dir> <out-dir>}
HERE=$(cd "$(dirname "$0")" && pwd)
PROGRAMS=$(sed -n '/^PROGRAMS="$/,/^"$/p' "$HERE/run_gpu.sh" | grep -v '"')
[ -n "$PROGRAMS" ] || { echo "bundle.sh: no program list in run_gpu.sh" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT/lib"
cp "$HERE/run_gpu.sh" "$HERE/torch_baseline.py" "$OUT/"
for p in $PROGRAMS; do
  exe="$BUILD/tests/$p"
  [ -x "$exe" ] || { echo "bundle.sh: $exe is not built (cmake --build $BUILD)" >&2; exit 1; }
  cp "$exe" "$OUT/"
  strip --strip-debug "$OUT/$p" # debug info would put the bundle past a 64 MiB carry
  # every resolved library except glibc's own and the loader
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -nL "$lib" "$OUT/lib/"; done
done
for f in "$OUT"/lib/*; do
  [ "$(stat -c %s "$f")" -gt 1048576 ] && gzip -9 "$f"
done
echo "bundle.sh: $(echo $PROGRAMS | wc -w) programs, $(ls "$OUT/lib" | wc -l) libraries:"
ls "$OUT/lib" | tr '\n' ' '
echo
du -sh "$OUT"
