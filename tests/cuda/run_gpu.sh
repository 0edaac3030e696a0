#!/usr/bin/env bash
# Run kiln's GPU test programs on a machine with an NVIDIA GPU.
#   bash tests/cuda/run_gpu.sh <dir> [program ...]
# <dir>: a build directory (programs under <dir>/tests/) or a folder the
# programs were carried to (programs directly in <dir>; the libraries they
# need in <dir> or <dir>/lib). Prints the environment, then each program's
# "CUDA-CHECK <name> ok|FAIL ..." lines and a summary; exits non-zero when
# any program failed (a program that skips, 77, counts as failed here: this
# script is meant for a machine that has a GPU).
set -uo pipefail
DIR=${1:?usage: run_gpu.sh <build-or-bundle-dir> [program ...]}
DIR=$(cd "$DIR" && pwd)
shift

# The programs, in order (one per line; the CUDA code generator's programs
# are appended to this list).
PROGRAMS="
gpu_runtime
gpu_sweep
gpu_bench
gpu_graphs
gpu_train
"
[ $# -gt 0 ] && PROGRAMS="$*" # the programs named, in that order

# Libraries gzip'd by bundle.sh are unpacked first.
for gz in "$DIR"/lib/*.gz; do [ -e "$gz" ] && gunzip -f "$gz"; done

for d in "$DIR/lib" "$DIR"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

# NVRTC and cuBLAS: the environment's own (KILN_CUDA_NVRTC/KILN_CUDA_CUBLAS)
# when set, else the newest found anywhere (a Python environment's NVIDIA
# wheels keep them under site-packages/nvidia/.../lib). Their folders go on
# LD_LIBRARY_PATH too, for what they load beside them (libnvrtc-builtins,
# libcublasLt).
find_lib() { # newest soname of $1 (libnvrtc or libcublas) on this machine
  local f
  for v in 13 12; do
    f=$(find / -path /proc -prune -o -path /sys -prune -o -name "$1.so.$v" -print 2>/dev/null |
        sort | head -1)
    [ -n "$f" ] && { echo "$f"; return; }
  done
}
[ -n "${KILN_CUDA_NVRTC:-}" ] || KILN_CUDA_NVRTC=$(find_lib libnvrtc)
[ -n "${KILN_CUDA_CUBLAS:-}" ] || KILN_CUDA_CUBLAS=$(find_lib libcublas)
export KILN_CUDA_NVRTC KILN_CUDA_CUBLAS
for l in "$KILN_CUDA_NVRTC" "$KILN_CUDA_CUBLAS"; do
  [ -n "$l" ] && export LD_LIBRARY_PATH="$(dirname "$l"):$LD_LIBRARY_PATH"
done

echo "== environment"
nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>&1 || true
echo "libcuda: ${KILN_CUDA_DRIVER:-$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')}"
echo "KILN_CUDA_NVRTC=${KILN_CUDA_NVRTC:-(not found)}"
echo "KILN_CUDA_CUBLAS=${KILN_CUDA_CUBLAS:-(not found)}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
uname -srm

failed=0
for p in $PROGRAMS; do
  exe=
  for c in "$DIR/tests/$p" "$DIR/$p"; do [ -x "$c" ] && { exe=$c; break; }; done
  echo "== $p"
  if [ -z "$exe" ]; then
    echo "CUDA-CHECK $p FAIL program not found under $DIR"
    failed=$((failed + 1))
    continue
  fi
  start=$(date +%s.%N)
  KILN_LOGS=${KILN_LOGS:-cuda} timeout 300 "$exe"
  rc=$?
  echo "== $p: exit $rc, $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
  [ $rc -eq 0 ] || failed=$((failed + 1))
done
echo "== run_gpu.sh: $failed program(s) failed"
[ $failed -eq 0 ]
