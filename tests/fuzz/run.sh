#!/usr/bin/env sh
# Run a libFuzzer target for a bounded time from a fresh corpus seeded with
# the given files (fixed seed, so a run is repeatable).
#   run.sh BIN NAME SECONDS MAX_LEN SEED_FILE...
# The corpus is ./NAME_corpus; the target's temporary files go to ./NAME_tmp
# (removed afterwards), so a target that writes files writes them here.
set -u
bin=$1 name=$2 seconds=$3 max_len=$4
shift 4
rm -rf "${name}_corpus" "${name}_tmp"
mkdir "${name}_corpus" "${name}_tmp" || exit 1
cp "$@" "${name}_corpus/" || exit 1
TMPDIR="$PWD/${name}_tmp" "$bin" -seed=1 -max_len="$max_len" -rss_limit_mb=2048 \
  -max_total_time="$seconds" -close_fd_mask=2 -print_final_stats=1 "${name}_corpus"
rc=$?
rm -rf "${name}_tmp"
exit $rc
