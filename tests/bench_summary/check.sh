#!/usr/bin/env bash
# scripts/bench-summary.sh on canned bench output and goals files: goals of
# both directions, strict and not, met and missed, a value exactly at its
# goal, patterns, the first matching goal winning, lines without a goal,
# lines saying their goal does not apply on this machine,
# printed goals that differ from the file's or that it does not name, a
# value that is not a number, goals no line measured; then a run that meets
# every goal, a Markdown table of a run (--markdown), one with no goal lines,
# the page bench-doc.sh writes from a log, the project's own bench/goals.txt, a
# malformed goals file and an unreadable log.
# Usage: check.sh <path to bench-summary.sh>
set -uo pipefail
script=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

expect() { # name, expected rc, expected output file, command...
  local name=$1 rc_want=$2 want=$3; shift 3
  "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$rc_want" ]; then
    echo "FAIL $name: exit status $rc, expected $rc_want"; cat "$tmp/err"; fail=1
  fi
  if ! diff -u "$want" "$tmp/out"; then echo "FAIL $name: output differs (above)"; fail=1; fi
}

cat > "$tmp/goals.txt" <<'IN'
# name                               op  goal  source
aot_compile_ms                       <=  5     a comment after the goal
aot_compile_mincut_ms                <=  5
saved_bytes_mincut_vs_default_*      <=  1.0
saved_bytes_mincut_vs_default_chain  <   1.0   (not reached: the pattern above matches first)
example_fn_inductor_vs_fused_loop    >=  0.9
softmax_inductor_vs_eager            >=  2
call_overhead_ns                     <=  1.5e3
strict_above*                        >   2
digits_cnn_step_vs_torch             >=  1.5
unary_*_vs_scalar                    >=  1
never_printed_[a]                    >=  1     brackets are literal, not a class
IN
cat > "$tmp/mixed.log" <<'IN'
== bench_aot
BENCH aot_compile_ms 3.10 (goal <= 5)
BENCH aot_compile_mincut_ms 7.25
RATIO saved_bytes_mincut_vs_default_mlp 1.000 (4096 / 4096 bytes; goal <= 1.0)
RATIO saved_bytes_mincut_vs_default_chain 1.000 (4096 / 4096 bytes; goal < 1.0)
== bench_inductor
BENCH example_fn_inductor_us 412.0
RATIO example_fn_inductor_vs_fused_loop 0.90 (goal >= 0.8)
RATIO softmax_inductor_vs_eager 1.52 (goal >= 2)
RATIO transcendental_chain_inductor_vs_eager 3.10 (no goal)
BENCH_INFO vector_isa avx2 (goal >= 9 is not a goal line)
BENCH call_overhead_ns 1e3
RATIO strict_above 2.00
RATIO strict_above_met 2.01
RATIO printed_only 0.5 (goal >= 0.75 once it lands)
== bench_digits
RATIO digits_cnn_step_vs_torch 0.412 (goal >= 1.5 once the code generator lands)
RATIO unary_exp_vs_scalar nan
IN
cat > "$tmp/mixed.want" <<'OUT'
goals checked: 12 (GOALS)
missed goals: 6
  program         name                            value  goal
  bench_aot       aot_compile_mincut_ms            7.25  <= 5
  bench_inductor  softmax_inductor_vs_eager        1.52  >= 2
  bench_inductor  strict_above                     2.00  > 2
  bench_inductor  printed_only                      0.5  >= 0.75
  bench_digits    digits_cnn_step_vs_torch        0.412  >= 1.5
  bench_digits    unary_exp_vs_scalar               nan  >= 1  [not a number]
goals not measured in this run: 2
  saved_bytes_mincut_vs_default_chain < 1.0
  never_printed_[a] >= 1
goals to reconcile with GOALS: 3
  saved_bytes_mincut_vs_default_chain: prints goal < 1.0, GOALS says <= 1.0
  example_fn_inductor_vs_fused_loop: prints goal >= 0.8, GOALS says >= 0.9
  printed_only: prints goal >= 0.75, which GOALS does not name
OUT
sed -i "s|GOALS|$tmp/goals.txt|g" "$tmp/mixed.want"
expect mixed 0 "$tmp/mixed.want" "$script" --goals "$tmp/goals.txt" "$tmp/mixed.log"
# the same from standard input
expect mixed_stdin 0 "$tmp/mixed.want" sh -c '"$1" --goals "$2" < "$3"' sh "$script" \
  "$tmp/goals.txt" "$tmp/mixed.log"

printf '%s\n' 'dispatch_overhead_ns <= 150' 'unary_*_vs_scalar >= 1' > "$tmp/met.goals"
printf '%s\n' '== bench_eager' 'BENCH dispatch_overhead_ns 120 ns' \
  'RATIO unary_exp_vs_scalar 1.00' 'RATIO unary_log_vs_scalar 1.5' > "$tmp/met.log"
printf '%s\n' "goals checked: 3 ($tmp/met.goals)" 'missed goals: none' > "$tmp/met.want"
expect all_met 0 "$tmp/met.want" "$script" --goals "$tmp/met.goals" "$tmp/met.log"

# a line whose goal does not apply here is listed apart, not checked
printf '%s\n' '== bench_autocast' 'RATIO unary_exp_vs_scalar 0.2 (goal n/a on this CPU, without AVX2: its goal is >= 1)' \
  'BENCH dispatch_overhead_ns 100' > "$tmp/na.log"
printf '%s\n' "goals checked: 1 ($tmp/met.goals)" 'missed goals: none' \
  'goals that do not apply on this machine: 1' \
  '  bench_autocast  unary_exp_vs_scalar 0.2  (on this CPU, without AVX2: its goal is >= 1)' \
  > "$tmp/na.want"
expect not_applicable 0 "$tmp/na.want" "$script" --goals "$tmp/met.goals" "$tmp/na.log"

# --markdown: every line checked, in the run's order, met or not
cat > "$tmp/md.want" <<'OUT'
| program | line | value | goal | |
|---|---|---:|---|---|
| bench_eager | `dispatch_overhead_ns` | 120 | <= 150 | met |
| bench_eager | `unary_exp_vs_scalar` | 1.00 | >= 1 | met |
| bench_eager | `unary_log_vs_scalar` | 0.5 | >= 1 | MISSED |
| bench_unary | `unary_tan_vs_scalar` | nan | >= 1 | MISSED |
| bench_unary | `unary_cos_vs_scalar` | 0.5 | on this CPU: no AVX | n/a |
OUT
printf '%s\n' '== bench_eager' 'BENCH dispatch_overhead_ns 120 ns' 'RATIO unary_exp_vs_scalar 1.00' \
  'RATIO unary_log_vs_scalar 0.5' 'BENCH graph_build_us 12.0' '== bench_unary' \
  'RATIO unary_tan_vs_scalar nan' 'RATIO unary_cos_vs_scalar 0.5 (goal n/a on this CPU: no AVX)' \
  > "$tmp/md.log"
expect markdown 0 "$tmp/md.want" "$script" --goals "$tmp/met.goals" --markdown "$tmp/md.log"

# bench-doc.sh (beside bench-summary.sh): the run line, the loads, the kernels, the table
doc=$(dirname "$script")/bench-doc.sh
printf '%s\n' '# make bench 2026-01-02 03:04 UTC, Test CPU, 2 CPUs, avx2, build (Release)' \
  '== bench_eager load 0.42' 'BENCH_INFO vector_isa avx2' 'BENCH_INFO load average 1 2 3' \
  'BENCH dispatch_overhead_ns 180 ns' '== bench_unary load 1.50' 'BENCH_INFO vector_isa avx2' \
  'RATIO unary_exp_vs_scalar 2.5' > "$tmp/doc.log"
"$doc" "$tmp/doc.log" > "$tmp/doc.md" 2> "$tmp/err" \
  && grep -qx -- '- Run: 2026-01-02 03:04 UTC, Test CPU, 2 CPUs, avx2, build (Release)' "$tmp/doc.md" \
  && grep -qx -- '  bench_eager 0.42, bench_unary 1.50' "$tmp/doc.md" \
  && [ "$(grep -c '^BENCH_INFO' "$tmp/doc.md")" -eq 1 ] \
  && grep -qx -- '| bench_eager | `dispatch_overhead_ns` | 180 | <= 150 | MISSED |' "$tmp/doc.md" \
  && grep -qx -- '| bench_unary | `unary_exp_vs_scalar` | 2.5 | >= 1 | met |' "$tmp/doc.md" \
  && grep -q 'bench_eager *dispatch_overhead_ns *180 *<= 150' "$tmp/doc.md" \
  || { echo "FAIL bench_doc:"; cat "$tmp/doc.md" "$tmp/err"; fail=1; }
: > "$tmp/nothing.want"
expect bench_doc_unreadable 2 "$tmp/nothing.want" "$doc" "$tmp/does-not-exist.log"

printf '%s\n' '== bench_graph' 'BENCH graph_build_us 12.0' > "$tmp/none.log"
printf '%s\n' "goals checked: 0 ($tmp/met.goals)" 'missed goals: none' \
  'goals not measured in this run: 2' '  dispatch_overhead_ns <= 150' '  unary_*_vs_scalar >= 1' \
  > "$tmp/none.want"
expect no_goals 0 "$tmp/none.want" "$script" --goals "$tmp/met.goals" "$tmp/none.log"

# the project's own goals file parses, and names the goals of the bench lines
printf '%s\n' '== bench_inductor' 'BENCH call_overhead_ns 1100 (goal <= 1000)' > "$tmp/own.log"
"$script" "$tmp/own.log" > "$tmp/out" 2> "$tmp/err" \
  && grep -q '^  bench_inductor  call_overhead_ns  *1100  <= 1000$' "$tmp/out" \
  && ! grep -q 'reconcile' "$tmp/out" \
  || { echo "FAIL own_goals: bench/goals.txt"; cat "$tmp/out" "$tmp/err"; fail=1; }

printf '%s\n' 'call_overhead_ns => 1000' > "$tmp/bad.goals"
: > "$tmp/empty.want"
expect bad_goals 2 "$tmp/empty.want" "$script" --goals "$tmp/bad.goals" "$tmp/own.log"
grep -q "bad.goals:1: expected" "$tmp/err" \
  || { echo "FAIL bad_goals: no message naming the line"; fail=1; }

expect unreadable 2 "$tmp/empty.want" "$script" "$tmp/does-not-exist.log"
grep -q "cannot read '$tmp/does-not-exist.log'" "$tmp/err" \
  || { echo "FAIL unreadable: no message naming the file"; fail=1; }

[ "$fail" -eq 0 ] && echo "bench-summary: all cases pass"
exit "$fail"
