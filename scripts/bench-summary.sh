#!/usr/bin/env bash
# Summarise the goals of a `make bench` run: reads the goals (bench/goals.txt,
# or the file given with --goals) and the benchmarks' output (the files
# named, or standard input) and prints the goals it missed.
#
# usage: bench-summary.sh [--goals FILE] [--markdown] [BENCH_LOG...]
#
# The goals file holds one goal a line: a name (a shell-style pattern, *
# matching any run of characters), an operator (<=, >=, < or >), the goal,
# then anything (where the goal comes from, not read); # starts a comment.
# A "BENCH <name> <value> ..." or "RATIO <name> <value> ..." line whose name
# matches a goal (the first that matches) is checked against it; its value
# is the field after the name, as printed. A "== <program>" line (the header
# `make bench` prints before each program) names the program of the lines
# after it.
#
# A bench line may print its goal ("goal >= 0.9"): when it differs from the
# file's, or the file names no goal for that line, the summary says so
# under "goals to reconcile" (and checks the line against the printed goal
# in the second case). A value that is not a number (nan) counts as missed.
#
# Prints "goals checked: N", then "missed goals: M" and a table of each
# missed line's program, name, value and goal (or "missed goals: none"),
# then the lines that say their goal does not apply on this machine ("goal
# n/a ...": a goal for other hardware; not checked), then the goals no line
# of the run matched ("goals not measured").
# --markdown prints instead one Markdown table of every line checked, in the
# run's order: program, name, value, goal, and "met", "MISSED" or "n/a" (the
# line's reason in the goal column) (the table
# of docs/BENCH.md). Exits 0
# whatever was missed (a missed goal is information, not a failure); 2 when
# an input or the goals file cannot be read or a goal line is malformed.
set -euo pipefail
goals="$(dirname "$0")/../bench/goals.txt"
shown=bench/goals.txt
markdown=0
while [ $# -gt 0 ]; do
  case "$1" in
    --goals)
      [ $# -ge 2 ] || { echo "bench-summary: --goals needs a file" >&2; exit 2; }
      goals=$2
      shown=$2
      shift 2 ;;
    --markdown) markdown=1; shift ;;
    *) break ;;
  esac
done
for f in "$goals" "$@"; do
  if [ ! -r "$f" ]; then
    echo "bench-summary: cannot read '$f' (expected the goals file or the output of the bench programs)" >&2
    exit 2
  fi
done
[ $# -gt 0 ] || set -- -
awk -v goalsfile="$shown" -v markdown="$markdown" '
function isnum(s) { return s ~ /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/ }
function glob_re(p,   r) {
  r = p
  gsub(/[][\\.^$+?(){}|]/, "\\\\&", r)
  gsub(/\*/, ".*", r)
  return "^" r "$"
}
function met(v, op, g) {
  return (op == "<=") ? v <= g : (op == ">=") ? v >= g : (op == "<") ? v < g : v > g
}
function miss(name, value, op, g, why) {
  n = ++nmissed
  mprog[n] = prog; mname[n] = name; mval[n] = value; mgoal[n] = op " " g
  mwhy[n] = why
}
FNR == NR {
  sub(/#.*/, "")
  if (NF == 0) next
  if (NF < 3 || $2 !~ /^[<>]=?$/ || !isnum($3)) {
    printf "bench-summary: %s:%d: expected \"<name> <op> <goal> ...\" with <op> one of <= >= < >, found \"%s\"\n", goalsfile, FNR, $0 > "/dev/stderr"
    bad = 1; exit 2
  }
  ng++; gpat[ng] = $1; gre[ng] = glob_re($1); gop[ng] = $2; gval[ng] = $3; gseen[ng] = 0
  next
}
/^== / { prog = $2; next }
!/^(BENCH|RATIO) / { next }
/goal n\/a/ {
  why = $0; sub(/^.*goal n\/a[ ]*/, "", why); sub(/\)[^)]*$/, "", why)
  na[++nna] = prog "  " $2 " " $3 "  (" why ")"
  nrow++; rprog[nrow] = prog; rname[nrow] = $2; rval[nrow] = $3; rgoal[nrow] = why
  rmet[nrow] = "n/a"
  for (i = 1; i <= ng; i++) if ($2 ~ gre[i]) { gseen[i]++; break }
  next
}
{
  name = $2; value = $3; k = 0
  for (i = 1; i <= ng; i++) if (name ~ gre[i]) { k = i; break }
  lop = ""; lval = ""
  if (match($0, /goal[ ]*[<>]=?[ ]*/)) {
    lop = substr($0, RSTART, RLENGTH); gsub(/goal|[ ]/, "", lop)
    lval = substr($0, RSTART + RLENGTH); sub(/[^-+.0-9eE].*$/, "", lval)
  }
  if (k == 0 && lop == "") next
  if (k == 0) {
    if (!isnum(lval)) { note[++nnote] = name ": prints a goal that is not a number"; next }
    note[++nnote] = name ": prints goal " lop " " lval ", which " goalsfile " does not name"
    op = lop; g = lval
  } else {
    gseen[k]++; op = gop[k]; g = gval[k]
    if (lop != "" && (lop != op || !isnum(lval) || lval + 0 != g + 0))
      note[++nnote] = name ": prints goal " lop " " lval ", " goalsfile " says " op " " g
  }
  checked++
  ok = isnum(value) && met(value + 0, op, g + 0)
  nrow++; rprog[nrow] = prog; rname[nrow] = name; rval[nrow] = value
  rgoal[nrow] = op " " g; rmet[nrow] = ok ? "met" : "MISSED"
  if (!isnum(value)) miss(name, value, op, g, "not a number")
  else if (!ok) miss(name, value, op, g, "")
}
END {
  if (bad) exit 2
  if (markdown) {
    print "| program | line | value | goal | |"
    print "|---|---|---:|---|---|"
    for (i = 1; i <= nrow; i++)
      printf "| %s | `%s` | %s | %s | %s |\n", rprog[i], rname[i], rval[i], rgoal[i], rmet[i]
    exit 0
  }
  printf "goals checked: %d (%s)\n", checked, goalsfile
  if (nmissed == 0) print "missed goals: none"
  else {
    printf "missed goals: %d\n", nmissed
    w = 4
    for (i = 1; i <= nmissed; i++) if (length(mname[i]) > w) w = length(mname[i])
    pw = 7
    for (i = 1; i <= nmissed; i++) if (length(mprog[i]) > pw) pw = length(mprog[i])
    printf "  %-" pw "s  %-" w "s  %10s  %s\n", "program", "name", "value", "goal"
    for (i = 1; i <= nmissed; i++)
      printf "  %-" pw "s  %-" w "s  %10s  %s%s\n", mprog[i], mname[i], mval[i], mgoal[i], \
        (mwhy[i] == "" ? "" : "  [" mwhy[i] "]")
  }
  if (nna > 0) {
    printf "goals that do not apply on this machine: %d\n", nna
    for (i = 1; i <= nna; i++) print "  " na[i]
  }
  nm = 0
  for (i = 1; i <= ng; i++) if (!gseen[i]) unmeasured[++nm] = gpat[i] " " gop[i] " " gval[i]
  if (nm > 0) {
    printf "goals not measured in this run: %d\n", nm
    for (i = 1; i <= nm; i++) print "  " unmeasured[i]
  }
  if (nnote > 0) {
    printf "goals to reconcile with %s: %d\n", goalsfile, nnote
    for (i = 1; i <= nnote; i++) print "  " note[i]
  }
}
' "$goals" "$@"
