#!/usr/bin/env bash
# KN_COMPILE rejects signatures it cannot call at compile time, with a static
# assertion naming the accepted forms; the accepted forms compile cleanly.
# Usage: check.sh <C compiler> <include dir>
set -uo pipefail
cc=$1 inc=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
want="unsupported signature. Accepted forms: kn_value fn(const kn_value *args, int nargs, void *ud), or kn_tensor *fn(kn_tensor *a, ...) with 1 to 8 parameters, all kn_tensor * or all const kn_tensor *"
for f in "$here"/bad_*.c; do
  if "$cc" -std=c17 -fsyntax-only -I"$inc" "$f" 2> "$tmp/err"; then
    echo "FAIL: $(basename "$f") compiled"; fail=1
  elif ! grep -qF "$want" "$tmp/err"; then
    echo "FAIL: $(basename "$f"): no readable message:"; head -5 "$tmp/err"; fail=1
  fi
done
if ! "$cc" -std=c17 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$inc" "$here/good_forms.c" \
     2> "$tmp/err"; then
  echo "FAIL: good_forms.c:"; head -20 "$tmp/err"; fail=1
fi
[ $fail = 0 ] && echo "KN_COMPILE forms: OK"
exit $fail
