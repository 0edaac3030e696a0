#!/usr/bin/env bash
# Runs dist_check MODE on 2 ranks with Open MPI's mpirun and checks that each
# expected rank printed "rank N: ok MODE" and no rank printed FAIL.
# Usage: run.sh <dist_check> <mode> [<mpirun> [<kiln tool>]]
# Exit 77 (skipped) when mpirun is missing. As root, Open MPI needs its
# allow-run-as-root settings; --oversubscribe lets 2 ranks share fewer cores.
# skip/kill: rank 1 leaves on purpose; only rank 0's report is checked
# (mpirun's own exit status then reports the lost rank).
set -uo pipefail
prog=$1 mode=$2 mpirun=${3:-$(command -v mpirun || true)} kiln=${4:-}
if [ -z "$mpirun" ] || [ ! -x "$mpirun" ]; then
  echo "skipped: mpirun not found (install Debian's openmpi-bin)"; exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# shared-memory transport: no network needed (the sandbox may have none)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
extra=()
case $mode in
  # the collectives without kiln's progress thread (MPI moves them in kiln's calls only)
  collectives_none) export KILN_DIST_PROGRESS=none; mode=collectives
       want="rank 0: ok $mode
rank 1: ok $mode" ;;
  # the user's choice of Open MPI's non-blocking all-reduce (ring) is kept
  ddp) export OMPI_MCA_coll_libnbc_iallreduce_algorithm=1
       want="rank 0: ok $mode
rank 1: ok $mode" ;;
  skip|kill) export KILN_DIST_TIMEOUT=2; want="rank 0: ok $mode"
             [ "$mode" = kill ] && extra=(--enable-recovery) ;;
  *) want="rank 0: ok $mode
rank 1: ok $mode" ;;
esac
out=$(timeout 120 "$mpirun" -np 2 --oversubscribe "${extra[@]}" "$prog" "$mode" "$tmp" 2>&1)
rc=$?
echo "$out"
fail=0
while IFS= read -r line; do
  grep -qxF -- "$line" <<< "$out" || { echo "FAIL: expected the line '$line'"; fail=1; }
done <<< "$want"
grep -q "FAIL" <<< "$out" && fail=1
case $mode in skip|kill) ;; *) [ $rc -eq 0 ] || { echo "FAIL: mpirun exited with $rc"; fail=1; } ;; esac
if [ "$mode" = logs ]; then
  # every log line of a rank starts with [rankN]: (seed test_distributed_rank_logging)
  for r in 0 1; do
    grep -q "^\[rank$r\]:I.*" <<< "$out" || { echo "FAIL: no log line starting with [rank$r]:"; fail=1; }
    f=$(ls "$tmp"/dedicated_log_kiln_trace_rank_${r}_*.log 2>/dev/null | head -n 1)
    if [ -z "$f" ]; then echo "FAIL: no trace file of rank $r in $tmp"; ls "$tmp"; fail=1; continue; fi
    grep -q "\"rank\": $r," "$f" || { echo "FAIL: $f has no record with \"rank\": $r"; fail=1; }
    if grep -v "^	" "$f" | grep -q "\"rank\": [^$r]"; then echo "FAIL: $f has another rank's record"; fail=1; fi
  done
  # the cross-rank report: one report per rank, [0/0]'s graph differs
  if [ -n "$kiln" ] && [ -x "$kiln" ]; then
    "$kiln" report --all-ranks-html --strict -o "$tmp/report" "$tmp" > "$tmp/report.txt" 2>&1 \
      || { echo "FAIL: kiln report:"; cat "$tmp/report.txt"; fail=1; }
    idx=$(cat "$tmp/report/index.html" 2>/dev/null)
    for r in 0 1; do
      grep -qF "<a href=\"rank_$r/index.html\">rank $r</a>" <<< "$idx" \
        || { echo "FAIL: the report's landing page does not link rank $r"; fail=1; }
    done
    grep -qF "<tr><td>[0/0]</td><td></td><td>yes</td>" <<< "$idx" \
      || { echo "FAIL: the landing page does not show [0/0]'s graph differing"; fail=1; }
  fi
fi
[ $rc -eq 124 ] && { echo "FAIL: mpirun did not finish within 120 s"; fail=1; }
exit $fail
