#!/usr/bin/env bash
# The examples built without debug info (-g0) run like the ones built with it:
# same output, exit 0; graph breaks are logged at "<unknown>"; KILN_LOGS=help
# prints the help once and the program goes on.
# Usage: check.sh <examples build dir>
set -uo pipefail
dir=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for exe in "$dir"/*_nodebug "$dir"/graph_break_nodebug_O0; do
  name=$(basename "$exe")
  ref="$dir/${name%%_nodebug*}"
  args=()
  [ "${name%%_nodebug*}" = mlp_train ] && args=("$tmp/trace_$name")
  [ "${name%%_nodebug*}" = char_transformer ] && args=(20) # a short run (tests/CMakeLists.txt)
  if ! "$exe" "${args[@]}" > "$tmp/out" 2> "$tmp/err"; then
    bad "$name exited with $?: $(tail -5 "$tmp/err")"
    continue
  fi
  # mlp_train prints timings and explain prints source lines (which only
  # debug info gives); compare the programs whose output is exact
  case "$name" in mlp_train* | explain*) continue ;; esac
  "$ref" "${args[@]}" > "$tmp/ref" 2> /dev/null || bad "$ref failed"
  cmp -s "$tmp/out" "$tmp/ref" || bad "$name printed $(cat "$tmp/out") instead of $(cat "$tmp/ref")"
done

for exe in "$dir/graph_break_nodebug" "$dir/graph_break_nodebug_O0"; do
  KILN_LOGS=graph_breaks "$exe" > /dev/null 2> "$tmp/err" || bad "$exe with graph_breaks logs failed"
  grep -q "Graph break in user code at <unknown>" "$tmp/err" ||
    bad "$exe: no '<unknown>' break site in: $(head -5 "$tmp/err")"
done

for spec in help +help; do
  KILN_LOGS=$spec "$dir/graph_break_nodebug" > "$tmp/out" 2> "$tmp/err" ||
    bad "KILN_LOGS=$spec: exit $?"
  n=$(grep -c "^KILN_LOGS Info" "$tmp/err")
  [ "$n" = 1 ] || bad "KILN_LOGS=$spec printed the help $n times"
  cmp -s "$tmp/out" <("$dir/graph_break") || bad "KILN_LOGS=$spec changed the output"
done
[ $fail = 0 ] && echo "examples without debug info: OK"
exit $fail
