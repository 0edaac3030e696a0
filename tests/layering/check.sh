#!/usr/bin/env bash
# The layering of libkiln: fails when an object file of a lower layer
# references a symbol defined by a higher layer (or a frontend references
# another frontend), except the references listed with their reason in
# layers.txt.
# Usage: check.sh <layers.txt> <file listing kiln_obj's objects, one per line>
#        check.sh --selftest <layers.txt> <C compiler>
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# check LAYERS OBJLIST: prints violations, exit 1 when there are any.
check() {
  local layers=$1 objs=$2 tmp
  tmp=$(mktemp -d)
  # folder of an object: the path component after the last "/src/"
  while IFS= read -r o; do
    [ -n "$o" ] || continue
    d=${o##*/src/}; d=${d%%/*}
    nm -g --defined-only "$o" | awk -v d="$d" 'NF>=3 {print $3, d}' >> "$tmp/defs"
    nm -u "$o" | awk -v d="$d" -v o="${o##*/}" '{print $2, d, o}' >> "$tmp/undefs"
  done < "$objs"
  sort -u "$tmp/defs" -o "$tmp/defs"
  sort "$tmp/undefs" -o "$tmp/undefs"
  join "$tmp/undefs" "$tmp/defs" | awk -v layers="$layers" -v defs="$tmp/defs" '
    BEGIN {
      while ((getline line < defs) > 0) { split(line, f, " "); defined[f[1]] = 1 }
      while ((getline line < layers) > 0) {
        split(line, f, /[ \t]+/)
        if (f[1] == "layer") rank[f[3]] = f[2]
        else if (f[1] == "allow") allow[f[2] " " f[3]] = 1
      }
    }
    # $1 symbol, $2 referencing folder, $3 object, $4 defining folder
    $2 != $4 {
      if (!($2 in rank) || !($4 in rank)) {
        fo = ($2 in rank) ? $4 : $2
        if (!(fo in noted)) printf "folder src/%s/ has no layer in layers.txt\n", fo
        noted[fo] = 1; bad = 1; next
      }
      if (rank[$2] > rank[$4]) next
      if (($2 " " $1) in allow) { used[$2 " " $1] = 1; next }
      printf "layering violation: src/%s/%s (layer %d) references %s from src/%s/ (layer %d)\n",
             $2, $3, rank[$2], $1, $4, rank[$4]
      bad = 1
    }
    END {
      # an exception nothing needs any more (its symbol still exists) is stale;
      # one for a symbol this build does not have is kept for other trees
      for (a in allow) {
        split(a, w, " ")
        if (!(a in used) && (w[2] in defined)) { printf "stale exception in layers.txt: allow %s\n", a; bad = 1 }
      }
      exit bad
    }'
  local rc=$?
  rm -rf "$tmp"
  return $rc
}

selftest() {
  local layers=$1 cc=$2 tmp rc
  tmp=$(mktemp -d)
  mkdir -p "$tmp/src/core" "$tmp/src/graph" "$tmp/src/dynamo"
  printf 'int kn__graph_thing(void) { return 1; }\n' > "$tmp/src/graph/g.c"
  printf 'int kn__graph_thing(void);\nint kn__core_f(void) { return kn__graph_thing(); }\n' \
    > "$tmp/src/core/c.c"
  printf 'int kn__graph_thing(void);\nint kn__dyn_f(void) { return kn__graph_thing(); }\n' \
    > "$tmp/src/dynamo/d.c"
  for f in graph/g core/c dynamo/d; do "$cc" -c "$tmp/src/$f.c" -o "$tmp/src/$f.c.o" || exit 1; done
  printf 'layer 0 core\nlayer 7 graph\nlayer 8 dynamo\n' > "$tmp/layers"
  # dynamo -> graph is downward: accepted
  printf '%s\n' "$tmp/src/graph/g.c.o" "$tmp/src/dynamo/d.c.o" > "$tmp/ok"
  check "$tmp/layers" "$tmp/ok" > "$tmp/out" || { echo "FAIL: downward reference refused"; cat "$tmp/out"; exit 1; }
  # core -> graph is upward: refused, naming object and symbol
  printf '%s\n' "$tmp/src/graph/g.c.o" "$tmp/src/core/c.c.o" > "$tmp/bad"
  check "$tmp/layers" "$tmp/bad" > "$tmp/out"; rc=$?
  want="layering violation: src/core/c.c.o (layer 0) references kn__graph_thing from src/graph/ (layer 7)"
  if [ $rc = 0 ] || ! grep -qxF "$want" "$tmp/out"; then
    echo "FAIL: upward reference not reported as expected:"; cat "$tmp/out"; exit 1
  fi
  # ... unless documented
  printf 'allow core kn__graph_thing\n' >> "$tmp/layers"
  check "$tmp/layers" "$tmp/bad" > "$tmp/out" || { echo "FAIL: documented exception refused"; cat "$tmp/out"; exit 1; }
  # an exception nothing needs any more is reported
  check "$tmp/layers" "$tmp/ok" > "$tmp/out"; rc=$?
  if [ $rc = 0 ] || ! grep -qxF "stale exception in layers.txt: allow core kn__graph_thing" "$tmp/out"; then
    echo "FAIL: stale exception not reported:"; cat "$tmp/out"; exit 1
  fi
  rm -rf "$tmp"
  echo "layering check self-test: OK"
}

if [ "${1:-}" = --selftest ]; then
  selftest "$2" "$3"
  exit 0
fi
layers=$1 objs=$2
[ -s "$objs" ] || { echo "no object list: $objs"; exit 1; }
if check "$layers" "$objs"; then
  echo "layering: OK ($(grep -c . "$objs") objects)"
else
  exit 1
fi
