#!/usr/bin/env bash
# Write the Markdown page of one `make bench` run (docs/BENCH.md) from its
# log: where and when it ran (the "# make bench" line `make bench` writes
# first, and the load average before each program from its "== <program>"
# lines), the kernels and ISAs the programs chose (their BENCH_INFO lines, one
# of each), every line that has a goal with its value and whether it met the
# goal (bench-summary.sh --markdown), then the goals missed.
#
# usage: bench-doc.sh BENCH_LOG > docs/BENCH.md
set -euo pipefail
log=${1:-}
if [ -z "$log" ] || [ ! -r "$log" ]; then
  echo "bench-doc: cannot read '${log}' (expected the bench.log of a make bench run)" >&2
  exit 2
fi
here=$(dirname "$0")
run=$(grep -m1 '^# make bench ' "$log" | sed 's/^# make bench //' || true)
[ -n "$run" ] || run="(no '# make bench' line: a log not written by make bench)"
cat <<HEAD
# Benchmark figures

The figures of one \`make bench\` run: every line with a goal in
[bench/goals.txt](../bench/goals.txt), as printed. Made with
\`scripts/bench-doc.sh build/bench.log > docs/BENCH.md\` after \`make bench\`;
pages that quote a current figure point here. On another machine, or the
same one under load, run it again: figures move 10-20 % from run to run on a
quiet 2-core VM and 2-10x on a busy one, so a goal met or missed by one run
is one sample. Where a ratio compares kiln with a baseline (a copy floor,
numpy, torch, one rank), bench_rows, bench_inductor (its softmax floor),
bench_unary, bench_digits, bench_transformer and bench_ddp (one rank against
two) time the two in alternating turns of a few runs each, so both see the same
moments of a shared VM whose speed moves from second to second (timed one
block after the other, the same ratio moved 0.8-1.6x between quiet runs,
2026-11-28); torch runs with libgomp's default wait policy and with
OMP_WAIT_POLICY=passive, and the faster counts.

- Run: $run
- Load average before each program (1 minute):
  $(grep '^== bench_' "$log" | sed -n 's/^== \(bench_[a-z_0-9]*\).*load \([0-9.]*\).*/\1 \2/p' | paste -sd, - | sed 's/,/, /g')

## Kernels and ISAs chosen

\`\`\`text
$(grep -h '^BENCH_INFO ' "$log" | grep -v -e 'gemm_choice' -e 'load average' | sort -u)
\`\`\`

## Every goal line

HEAD
"$here/bench-summary.sh" --markdown "$log"
printf '\n## Goals missed\n\n```text\n'
"$here/bench-summary.sh" "$log"
printf '```\n'
