#!/usr/bin/env bash
# The layering of libkiln's sources, by their #include lines: a file of
# src/F/ may include headers of its own folder, the public ones (kiln/...)
# and those of folders of a LOWER layer; never a header of a higher layer,
# of another folder of the same layer, or another folder's private header
# (a name ending in _int.h), except the includes listed with their reason
# in layers.txt as `allow-include F DIR/HEADER`.
# Usage: includes.sh <layers.txt> <src dir>
#        includes.sh --selftest <layers.txt>
set -uo pipefail

# check LAYERS SRC: prints violations, exit 1 when there are any.
check() {
  local layers=$1 src=$2
  (cd "$src" && grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' -r --include='*.c' \
     --include='*.h' --include='*.def' .) |
  awk -v layers="$layers" '
    BEGIN {
      while ((getline line < layers) > 0) {
        split(line, f, /[ \t]+/)
        if (f[1] == "layer") rank[f[3]] = f[2]
        else if (f[1] == "allow-include") allow[f[2] " " f[3]] = 1
      }
    }
    {
      # ./F/file.c:LINE:#include "DIR/HEADER"
      split($0, p, ":"); file = substr(p[1], 3); line = p[2]
      from = file; sub(/\/.*/, "", from)
      inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
      if (inc !~ /\//) next
      to = inc; sub(/\/.*/, "", to)
      if (to == "kiln" || to == from) next
      if (!(from in rank) || !(to in rank)) {
        printf "src/%s:%s includes %s: folder without a layer in layers.txt\n", file, line, inc
        bad = 1; next
      }
      why = ""
      if (inc ~ /_int\.h$/) why = "the private header of src/" to "/"
      else if (rank[to] >= rank[from])
        why = "a header of src/" to "/ (layer " rank[to] ") from layer " rank[from]
      if (why == "") next
      if ((from " " inc) in allow) { used[from " " inc] = 1; next }
      printf "layering violation: src/%s:%s includes %s, %s\n", file, line, inc, why
      bad = 1
    }
    END {
      for (a in allow) if (!(a in used)) { printf "stale exception in layers.txt: allow-include %s\n", a; bad = 1 }
      exit bad
    }'
}

selftest() {
  local layers=$1 tmp rc
  tmp=$(mktemp -d)
  mkdir -p "$tmp/src/core" "$tmp/src/graph" "$tmp/src/dynamo"
  printf 'layer 0 core\nlayer 7 graph\nlayer 8 dynamo\n' > "$tmp/layers"
  printf '#include "core/error.h"\n#include "kiln/kiln.h"\n#include "graph/graph.h"\n' > "$tmp/src/dynamo/d.c"
  printf '#include "graph/graph_int.h"\n' > "$tmp/src/graph/g.c"
  check "$tmp/layers" "$tmp/src" > "$tmp/out" || { echo "FAIL: downward includes refused"; cat "$tmp/out"; exit 1; }
  printf '#include "graph/graph.h"\n' > "$tmp/src/core/c.c"
  printf '#include "graph/graph_int.h"\n' >> "$tmp/src/dynamo/d.c"
  check "$tmp/layers" "$tmp/src" > "$tmp/out"; rc=$?
  for want in "layering violation: src/core/c.c:1 includes graph/graph.h, a header of src/graph/ (layer 7) from layer 0" \
              "layering violation: src/dynamo/d.c:4 includes graph/graph_int.h, the private header of src/graph/"; do
    if [ $rc = 0 ] || ! grep -qxF "$want" "$tmp/out"; then
      echo "FAIL: expected '$want', got:"; cat "$tmp/out"; exit 1
    fi
  done
  printf 'allow-include core graph/graph.h\nallow-include dynamo graph/graph_int.h\nallow-include dynamo graph/gone.h\n' >> "$tmp/layers"
  check "$tmp/layers" "$tmp/src" > "$tmp/out"; rc=$?
  if [ $rc = 0 ] || [ "$(cat "$tmp/out")" != "stale exception in layers.txt: allow-include dynamo graph/gone.h" ]; then
    echo "FAIL: allowed includes or the stale exception:"; cat "$tmp/out"; exit 1
  fi
  rm -rf "$tmp"
  # and the real layers file parses: every folder of it has a rank
  grep -q '^layer ' "$layers" || { echo "FAIL: no layer lines in $layers"; exit 1; }
  echo "includes selftest passed"
}

if [ "${1:-}" = --selftest ]; then selftest "$2"; exit $?; fi
check "$1" "$2"
