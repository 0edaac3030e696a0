#!/usr/bin/env bash
# scripts/bench-summary.sh on canned bench output: goals of both directions,
# strict and not, met and missed, a value exactly at its goal, lines without
# a goal, a goal with words after it, a value that is not a number; then a
# run that meets every goal, one with no goal lines, and an unreadable file.
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

cat > "$tmp/mixed.log" <<'IN'
== bench_aot
BENCH aot_compile_ms 3.10 (goal <= 5)
BENCH aot_compile_mincut_ms 7.25 (goal <= 5)
RATIO saved_bytes_mincut_vs_default_mlp 1.000 (4096 / 4096 bytes; goal <= 1.0)
RATIO saved_bytes_mincut_vs_default_chain 1.000 (4096 / 4096 bytes; goal < 1.0)
== bench_inductor
BENCH example_fn_inductor_us 412.0
RATIO example_fn_inductor_vs_fused_loop 0.90 (goal >= 0.9)
RATIO softmax_inductor_vs_eager 1.52 (goal >= 2)
RATIO transcendental_chain_inductor_vs_eager 3.10 (no goal)
BENCH_INFO vector_isa avx2 (goal >= 9 is not a goal line)
BENCH call_overhead_ns 1e3 (goal <= 1.5e3)
RATIO strict_above 2.00 (goal > 2)
RATIO strict_above_met 2.01 (goal > 2)
== bench_digits
RATIO digits_cnn_step_vs_torch 0.412 (goal >= 1.5 once the code generator lands)
RATIO unary_exp_vs_scalar nan (goal >= 1)
IN
cat > "$tmp/mixed.want" <<'OUT'
goals checked: 11
goals missed: 6
  bench_aot: BENCH aot_compile_mincut_ms 7.25 (goal <= 5)
  bench_aot: RATIO saved_bytes_mincut_vs_default_chain 1.000 (4096 / 4096 bytes; goal < 1.0)
  bench_inductor: RATIO softmax_inductor_vs_eager 1.52 (goal >= 2)
  bench_inductor: RATIO strict_above 2.00 (goal > 2)
  bench_digits: RATIO digits_cnn_step_vs_torch 0.412 (goal >= 1.5 once the code generator lands)
  bench_digits: RATIO unary_exp_vs_scalar nan (goal >= 1)  [value not a number]
OUT
expect mixed 0 "$tmp/mixed.want" "$script" "$tmp/mixed.log"
# the same from standard input
expect mixed_stdin 0 "$tmp/mixed.want" sh -c '"$1" < "$2"' sh "$script" "$tmp/mixed.log"

printf '%s\n' '== bench_eager' 'BENCH dispatch_overhead_ns 120 ns (goal <= 150)' \
  'RATIO unary_exp_vs_scalar 1.00 (goal >= 1)' > "$tmp/met.log"
printf '%s\n' 'goals checked: 2' 'all goals met' > "$tmp/met.want"
expect all_met 0 "$tmp/met.want" "$script" "$tmp/met.log"

printf '%s\n' '== bench_graph' 'BENCH graph_build_us 12.0' > "$tmp/none.log"
printf '%s\n' 'goals checked: 0' 'no goal lines found' > "$tmp/none.want"
expect no_goals 0 "$tmp/none.want" "$script" "$tmp/none.log"

: > "$tmp/empty.want"
expect unreadable 2 "$tmp/empty.want" "$script" "$tmp/does-not-exist.log"
grep -q "cannot read '$tmp/does-not-exist.log'" "$tmp/err" \
  || { echo "FAIL unreadable: no message naming the file"; fail=1; }

[ "$fail" -eq 0 ] && echo "bench-summary: all cases pass"
exit "$fail"
