#!/usr/bin/env bash
# bundle_check.sh: tests/cuda/bundle.sh packs a GPU bundle that runs alone.
#   bash tests/cuda/bundle_check.sh <build-dir> <fake driver .so> <fake nvrtc .so>
# Packs the build's GPU programs into a temporary folder, then checks that
# every library each program needs (other than glibc's) resolves inside the
# bundle once run_gpu.sh has unpacked it, and that run_gpu.sh runs the
# bundled gpu_runtime to its summary on the fake CUDA driver (whose timer
# and NVRTC errors differ from a GPU's: some of its checks fail there, so
# only the summary line is asked for).
set -uo pipefail
BUILD=${1:?usage: bundle_check.sh <build-dir> <fake-driver> <fake-nvrtc>}
DRV=${2:?fake driver}
NVRTC=${3:?fake nvrtc}
HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "bundle_check: $*" >&2; exit 1; }

bash "$HERE/bundle.sh" "$BUILD" "$tmp/b" > "$tmp/pack.txt" 2>&1 ||
  { cat "$tmp/pack.txt"; fail "bundle.sh failed"; }
[ -f "$tmp/b/run_gpu.sh" ] || fail "run_gpu.sh not in the bundle"
ls "$tmp/b"/lib/*.gz > /dev/null 2>&1 || fail "no library was compressed"
KILN_CUDA_DRIVER=$DRV KILN_CUDA_NVRTC=$NVRTC KILN_CUDA_CUBLAS=$DRV \
  bash "$tmp/b/run_gpu.sh" "$tmp/b" gpu_runtime > "$tmp/run.txt" 2>&1
grep -q "^CUDA-SUMMARY gpu_runtime: [0-9]* ok" "$tmp/run.txt" ||
  { cat "$tmp/run.txt"; fail "the bundled gpu_runtime did not run to its summary"; }
ls "$tmp/b"/lib/*.gz > /dev/null 2>&1 && fail "run_gpu.sh left libraries compressed"
for p in "$tmp"/b/gpu_*; do
  [ -x "$p" ] || continue
  out=$(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$tmp/b/lib" ldd "$p")
  echo "$out" | grep -q "not found" && { echo "$out"; fail "$(basename "$p") misses a library"; }
  # every library outside glibc comes from the bundle
  echo "$out" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' | grep -v "^$tmp/b/lib/" &&
    fail "$(basename "$p") loads the libraries above from outside the bundle"
done
echo "bundle_check: ok ($(tail -1 "$tmp/pack.txt" | cut -f1))"
