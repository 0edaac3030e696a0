#!/bin/sh
# A code cache written on one CPU is not loaded on another: the probe
# compiles and runs natively (the cache gets an entry for this CPU), then
# under qemu-x86_64 -cpu Nehalem (no AVX) with the same cache, compiler
# and flags. The compiler is a wrapper that runs the compiler driver under
# the same emulated CPU, so -march=native resolves to that CPU as it would
# on such a machine. The emulated run must compute right (a cache entry of
# this CPU's, loaded there, dies of SIGILL) and leave a second entry.
#   run.sh PROBE
set -u
probe=$1
if [ "$(uname -m)" != x86_64 ]; then echo "skipped: the qemu CPU test runs on x86-64 hosts"; exit 77; fi
qemu=$(command -v qemu-x86_64) || { echo "skipped: qemu-x86_64 (Debian qemu-user) not found"; exit 77; }
cc=$(command -v cc) || { echo "skipped: no cc"; exit 77; }
cpu=Nehalem
dir=$(mktemp -d /tmp/kiln-cache-cpu-XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
cat > "$dir/cc" <<WRAP
#!/bin/sh
if [ -n "\${KN_PROBE_CPU:-}" ]; then exec "$qemu" -cpu "\$KN_PROBE_CPU" "$cc" "\$@"; fi
exec "$cc" "\$@"
WRAP
chmod 0700 "$dir/cc"
export KILN_CACHE_DIR="$dir/cache" KILN_CC="$dir/cc"
native=$("$probe") || { echo "FAIL: the probe fails natively"; exit 1; }
echo "native:   $native"
emulated=$(KN_PROBE_CPU=$cpu "$qemu" -cpu $cpu "$probe")
rc=$?
echo "$cpu: $emulated (exit status $rc)"
[ $rc -eq 0 ] || { echo "FAIL: under qemu -cpu $cpu the probe failed (status $rc; 132 is SIGILL: code for another CPU was loaded)"; exit 1; }
[ "${native% ok}" != "${emulated% ok}" ] || { echo "FAIL: both CPUs have the same target"; exit 1; }
n=$(ls "$dir/cache/inductor" | grep -c '\.so$')
[ "$n" -eq 2 ] || { echo "FAIL: expected one cache entry per CPU, found $n .so files"; exit 1; }
echo "ok: one entry per CPU"
