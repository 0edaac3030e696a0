#!/usr/bin/env bash
# Summarise the goals of a `make bench` run: reads the benchmarks' output
# (the files named, or standard input) and prints the goals it missed.
#
# A goal line is a "BENCH <name> <value> ..." or "RATIO <name> <value> ..."
# line whose text holds "goal <op> <number>" with <op> one of <=, >=, <, >
# (what follows the number, such as "once the code generator lands", is
# not read). The value is the field after the name, as printed. A "== <program>"
# line (the header `make bench` prints before each program) names the
# program of the lines after it.
#
# Prints "goals checked: N", then "goals missed: M" and each missed line
# (prefixed with its program), or "all goals met". A line that names a
# goal this script cannot read (no number after the operator, or a value
# that is not a number, such as nan) counts as missed, with the reason.
# Exits 0 whatever was missed (a missed goal is information, not a
# failure); 2 when an input cannot be read.
set -euo pipefail
for f in "$@"; do
  if [ ! -r "$f" ]; then
    echo "bench-summary: cannot read '$f' (expected the output of the bench programs)" >&2
    exit 2
  fi
done
awk '
function isnum(s) { return s ~ /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/ }
function miss(line, why) {
  missed[++nmissed] = (prog == "" ? "" : prog ": ") line (why == "" ? "" : "  [" why "]")
}
/^== / { prog = $2; next }
!/^(BENCH|RATIO) / { next }
!/goal[ ]*[<>]/ { next }
{
  checked++
  match($0, /goal[ ]*[<>]=?[ ]*/)
  op = substr($0, RSTART, RLENGTH)
  gsub(/goal|[ ]/, "", op)
  goal = substr($0, RSTART + RLENGTH)
  sub(/[^-+.0-9eE].*$/, "", goal)
  if (!isnum(goal)) { miss($0, "goal not a number"); next }
  if (!isnum($3)) { miss($0, "value not a number"); next }
  v = $3 + 0; g = goal + 0
  ok = (op == "<=") ? v <= g : (op == ">=") ? v >= g : (op == "<") ? v < g : v > g
  if (!ok) miss($0, "")
}
END {
  printf "goals checked: %d\n", checked
  if (checked == 0) { print "no goal lines found"; exit 0 }
  if (nmissed == 0) { print "all goals met"; exit 0 }
  printf "goals missed: %d\n", nmissed
  for (i = 1; i <= nmissed; i++) print "  " missed[i]
}
' "$@"
