#!/usr/bin/env bash
# Every ```c block of README.md and docs/*.md compiles as shown:
#   - a block that defines main() is a whole program: compiled, linked
#     against kiln and run (it must exit 0);
#   - a block whose first line is "/* fragment */" is a sequence of
#     statements: compiled and linked as the body of a function, in a file
#     that includes <kiln/kiln.h>, <kiln/compile.h>, <kiln/log.h>, <stdio.h>
#     and <stdlib.h>;
#   - any other block is an error (mark it, or make it a program).
# Usage: check_snippets.sh SOURCE_DIR INCLUDE_DIR LIBKILN_SO
set -euo pipefail
src=$1 inc=$2 lib=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cflags=(-std=c17 -O1 -g -fno-optimize-sibling-calls -Wall -Wextra -Werror
        -Wno-unused-variable -Wno-unused-but-set-variable -I"$inc")
ldflags=("$lib" -Wl,-rpath,"$(dirname "$lib")")
count=0 fail=0
for md in "$src/README.md" "$src"/docs/*.md; do
  rel=${md#"$src"/}
  # one file per block: NAME_N.c, and NAME_N.line with the block's first line number
  awk -v dir="$tmp" -v base="$(echo "$rel" | tr '/.' '__')" '
    /^```c[[:space:]]*$/ { on = 1; n++; f = dir "/" base "_" n ".c"; printf "" > f;
                           print NR + 1 > (dir "/" base "_" n ".line"); next }
    /^```/ { if (on) { on = 0; close(f) } next }
    on { print >> f }' "$md"
  for c in "$tmp/$(echo "$rel" | tr '/.' '__')"_*.c; do
    [ -e "$c" ] || continue
    count=$((count + 1))
    line=$(cat "${c%.c}.line")
    where="$rel:$line"
    if [ "$(head -1 "$c")" = "/* fragment */" ]; then
      { printf '#include <kiln/kiln.h>\n#include <kiln/compile.h>\n#include <kiln/log.h>\n'
        printf '#include <stdio.h>\n#include <stdlib.h>\n'
        printf 'void kn_doc_fragment(void);\nvoid kn_doc_fragment(void) {\n#line %d "%s"\n' \
          "$line" "$rel"
        cat "$c"
        printf '}\nint main(void) { return 0; }\n'; } > "$c.wrapped.c"
      if ! gcc "${cflags[@]}" "$c.wrapped.c" "${ldflags[@]}" -o "$c.bin" 2> "$c.err"; then
        echo "FAIL $where: the fragment does not compile:"; cat "$c.err"; fail=$((fail + 1))
      fi
    elif grep -q 'int main(' "$c"; then
      { printf '#line 1 "%s:%d"\n' "$rel" "$line"; cat "$c"; } > "$c.prog.c"
      if ! gcc "${cflags[@]}" "$c.prog.c" "${ldflags[@]}" -o "$c.bin" 2> "$c.err"; then
        echo "FAIL $where: the program does not compile:"; cat "$c.err"; fail=$((fail + 1))
      elif ! (cd "$tmp" && env -u KILN_LOGS -u KILN_TRACE timeout 120 "$c.bin" > "$c.out" 2>&1); then
        echo "FAIL $where: the program exits with an error:"; cat "$c.out"; fail=$((fail + 1))
      fi
    else
      echo "FAIL $where: neither a program (no main) nor marked /* fragment */"
      fail=$((fail + 1))
    fi
  done
done
echo "$count C blocks checked, $fail failed"
[ "$fail" -eq 0 ] && [ "$count" -gt 0 ]
