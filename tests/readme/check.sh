#!/usr/bin/env bash
# The README's code example is examples/quickstart.c verbatim, and it prints
# what torch 1.13 prints for the same computation.
set -euo pipefail
readme=$1 example=$2 binary=$3
block=$(awk '/^```c$/{on=1; next} /^```$/{if (on) exit} on' "$readme")
if [ "$block" != "$(cat "$example")" ]; then
  echo "README.md's C example differs from $example:"
  diff <(echo "$block") "$example" || true
  exit 1
fi
expected='tensor(296.1456, grad_fn=<SumBackward0>)
tensor([[  5.4366,  22.1672],
        [ 80.3421, 272.9908]])'
out=$("$binary")
if [ "$out" != "$expected" ]; then
  echo "quickstart printed:"; echo "$out"; echo "expected (torch 1.13):"; echo "$expected"
  exit 1
fi
echo "README example: verbatim and correct"
