#!/usr/bin/env bash
# The tests need nothing outside the repository: fails when a file under
# tests/, a CMake file (CMakeLists.txt, *.cmake) or the Makefile refers to a
# folder beside the source tree - the `shared` folder next to it (or the
# macro that named it), or a path built from the project's root and `/..`. A user's clone has nothing
# beside it, so such a test cannot pass there.
# Usage: check.sh <source root>
#        check.sh --selftest
set -uo pipefail
self=$(realpath "$0")

# The patterns (extended regular expressions), spelled so that this file
# does not match them itself.
up='\.\.'
patterns=(
  "$up/shared"
  "(PROJECT|CMAKE)_SOURCE_DIR\}/$up"
  "KN_SOURCE_DIR \"/$up"
  "KN_SHARED""_DIR"
)

# check ROOT: prints every offending line as file:line: text; exit 1 if any.
check() {
  local root=${1%/} bad=0 p args=()
  for p in "${patterns[@]}"; do args+=(-e "$p"); done
  [ -d "$root/tests" ] || { echo "check.sh: expected a source tree at '$root', found no tests/ folder"; return 2; }
  # every candidate file but this script, searched by one grep
  find "$root" \( -name '.git' -o -path "$root/build*" \) -prune -o -type f \
       \( -path "$root/tests/*" -o -name CMakeLists.txt -o -name '*.cmake' \
          -o -name '*.cmake.in' -o -path "$root/Makefile" \) ! -samefile "$self" -print0 |
    xargs -0 -r grep -nHIE "${args[@]}" -- | sed "s|^$root/||" | grep . && bad=1
  if [ $bad -ne 0 ]; then
    echo "the lines above refer to a folder outside the repository; commit what the tests need under tests/fixtures/"
  fi
  return $bad
}

# --selftest: a clean tree passes, each pattern in a test source, a CMake
# file and the Makefile fails.
selftest() {
  local tmp rc=0
  tmp=$(mktemp -d)
  mkdir -p "$tmp/tests/sub" "$tmp/tests/support" "$tmp/cmake"
  echo 'set(X ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/a.log)' > "$tmp/CMakeLists.txt"
  echo '#define FIX KN_FIXTURE_DIR "/traces/"' > "$tmp/tests/test_a.c"
  check "$tmp" >/dev/null || { echo "selftest: a clean tree failed"; rc=1; }
  local cases=(
    'tests/sub/test_b.c|#define FIX KN_SHARED_DIR "/../shared/x"'
    'tests/CMakeLists.txt|set(T ${PROJECT_SOURCE_DIR}/../shared/t/*.log)'
    'cmake/deps.cmake|include(${CMAKE_SOURCE_DIR}/../other/x.cmake)'
    'tests/test_c.c|static const char *p = KN_SOURCE_DIR "/../seeds";'
    'tests/support/x.h|#define FIX KN_SHARED_DIR "/traces/"'
    'Makefile|SEEDS = ../shared/seeds'
  )
  for c in "${cases[@]}"; do
    local file=${c%%|*} line=${c#*|}
    echo "$line" > "$tmp/$file"
    check "$tmp" >/dev/null && { echo "selftest: '$line' in $file passed"; rc=1; }
    rm "$tmp/$file"
  done
  check "$tmp" >/dev/null || { echo "selftest: the tree failed after its cleanup"; rc=1; }
  rm -rf "$tmp"
  [ $rc -eq 0 ] && echo "selftest passed"
  return $rc
}

if [ "${1:-}" = "--selftest" ]; then selftest; exit $?; fi
[ $# -eq 1 ] || { echo "usage: check.sh <source root> | --selftest"; exit 2; }
check "$1"
