#!/usr/bin/env bash
# scripts/install-deps.sh when another process holds apt's locks: it says
# that it waits, naming the lock and the process, waits until the lock is
# free, then runs apt-get update and install with apt's own lock timeout.
# apt-get, dpkg-query and id are stand-ins on PATH (nothing is installed);
# the lock is a flock(1) held for 2 seconds by a background process.
# Usage: check.sh <scripts/install-deps.sh>
set -uo pipefail
script=$1
command -v flock > /dev/null || { echo "skipped: flock (util-linux) not found"; exit 77; }
[ -r /proc/locks ] || { echo "skipped: no /proc/locks"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
cat > "$tmp/bin/dpkg-query" <<'EOS'
#!/bin/sh
exit 1
EOS
cat > "$tmp/bin/id" <<'EOS'
#!/bin/sh
echo 0
EOS
# apt-get: logs its arguments and whether the lock was free when it ran
cat > "$tmp/bin/apt-get" <<EOS
#!/bin/sh
if flock -n "$tmp/lists.lock" true; then state=free; else state=held; fi
echo "apt-get \$* [lock \$state]" >> "$tmp/apt.log"
EOS
chmod +x "$tmp/bin/"*
touch "$tmp/lists.lock"
flock "$tmp/lists.lock" sleep 2 &
holder=$!
sleep 0.5 # the lock is taken
out=$(PATH="$tmp/bin:$PATH" KILN_APT_LOCKS="$tmp/other.lock $tmp/lists.lock" \
      KILN_APT_LOCK_TIMEOUT=60 "$script" kiln-test-pkg 2>&1)
rc=$?
wait "$holder"
fail=0
expect() { # expect WHAT TEXT PATTERN
  if ! grep -qF -- "$3" <<< "$2"; then echo "FAIL: $1: expected '$3' in:"; echo "$2"; fail=1; fi
}
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; fail=1; }
log=$(cat "$tmp/apt.log" 2>/dev/null)
expect "message" "$out" "installing Debian packages: kiln-test-pkg"
expect "message" "$out" "waiting for $tmp/lists.lock, held by process "
expect "message" "$out" "another apt or dpkg is running (up to 60s)"
[ "$(grep -c 'waiting for' <<< "$out")" -eq 1 ] || { echo "FAIL: said more than once:"; echo "$out"; fail=1; }
expect "apt-get update" "$log" "apt-get -o DPkg::Lock::Timeout=60 update -qq [lock free]"
expect "apt-get install" "$log" \
  "apt-get -o DPkg::Lock::Timeout=60 install -y -qq --no-install-recommends kiln-test-pkg [lock free]"
[ "$(wc -l <<< "$log")" -eq 2 ] || { echo "FAIL: apt-get ran other than twice:"; echo "$log"; fail=1; }
# nothing held: no message, no wait
rm -f "$tmp/apt.log"
out=$(PATH="$tmp/bin:$PATH" KILN_APT_LOCKS="$tmp/lists.lock" "$script" kiln-test-pkg 2>&1)
[ "$(grep -c 'waiting for' <<< "$out")" -eq 0 ] || { echo "FAIL: waited on a free lock:"; echo "$out"; fail=1; }
expect "default timeout" "$(cat "$tmp/apt.log")" "apt-get -o DPkg::Lock::Timeout=600 update -qq [lock free]"
[ $fail -eq 0 ] && echo "install-deps waits for a held lock: ok"
exit $fail
