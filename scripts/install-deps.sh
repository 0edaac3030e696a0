#!/usr/bin/env bash
# Install the named Debian packages that are not installed yet. Needs root
# (apt-get) only when something is missing; prints nothing when all are there.
#
# When another apt or dpkg process holds the package-list or dpkg locks (a
# fresh cloud machine running unattended upgrades), it says so, with the
# process holding them, and waits for them (up to KILN_APT_LOCK_TIMEOUT
# seconds, default 600) instead of failing: it watches the locks itself
# (/proc/locks), and passes apt's own DPkg::Lock::Timeout to apt-get for a
# lock taken in between. KILN_APT_LOCKS replaces the list of lock files
# (tests).
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "error: packages missing (${missing[*]}) and not running as root;" \
       "install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive

timeout=${KILN_APT_LOCK_TIMEOUT:-600}
read -r -a locks <<< "${KILN_APT_LOCKS:-/var/lib/apt/lists/lock /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock}"
apt_opts=(-o "DPkg::Lock::Timeout=$timeout")

# lock_holder FILE: the pid of a process holding a lock on FILE (the kernel's
# table of file locks, /proc/locks, keyed by device and inode), or nothing.
lock_holder() {
  local f=$1 dev key
  [ -e "$f" ] && [ -r /proc/locks ] || return 0
  dev=$(stat -c %d "$f")
  key=$(printf '%02x:%02x:%s' $(((dev >> 8) & 0xfff)) $(((dev & 0xff) | ((dev >> 12) & 0xfff00))) \
        "$(stat -c %i "$f")")
  # fields: id, type, ADVISORY/MANDATORY, READ/WRITE, pid, maj:min:inode, ...;
  # "->" lines are processes waiting for a lock, not holding one
  awk -v key="$key" '$2 != "->" && $6 == key { print $5; exit }' /proc/locks
}

# wait_for_locks DEADLINE: returns when no lock is held, saying once per lock
# (on stderr) which process holds it; at DEADLINE (in $SECONDS) it returns anyway and
# apt-get reports the lock.
wait_for_locks() {
  local deadline=$1 f pid told=" "
  while [ "$SECONDS" -lt "$deadline" ]; do
    pid=""
    for f in "${locks[@]}"; do
      pid=$(lock_holder "$f")
      [ -n "$pid" ] && break
    done
    [ -z "$pid" ] && return 0
    if [[ "$told" != *" $f "* ]]; then
      echo "waiting for $f, held by process $pid ($(cat "/proc/$pid/comm" 2>/dev/null || echo "?")):" \
           "another apt or dpkg is running (up to ${timeout}s)" >&2
      told+="$f "
    fi
    sleep 1
  done
}

# apt_get ARGS...: apt-get ARGS once the locks are free; if it fails while a
# lock is held again (taken in between) and time is left, wait and retry.
apt_get() {
  local deadline=$((SECONDS + timeout)) rc f
  while :; do
    wait_for_locks "$deadline"
    rc=0
    apt-get "${apt_opts[@]}" "$@" || rc=$?
    [ $rc -eq 0 ] && return 0
    for f in "${locks[@]}"; do
      if [ -n "$(lock_holder "$f")" ] && [ "$SECONDS" -lt "$deadline" ]; then continue 2; fi
    done
    return $rc
  done
}

apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
