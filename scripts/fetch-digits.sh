#!/usr/bin/env bash
# Write scikit-learn's digits data set (1797 8x8 images, pixel values 0..16,
# then the label; 65 comma-separated numbers per row) as a plain CSV file.
# The data comes from Debian's python3-sklearn package, installed with the
# package manager when missing.
#   scripts/fetch-digits.sh OUT.csv
set -euo pipefail
out=${1:?usage: scripts/fetch-digits.sh OUT.csv}
here=$(cd "$(dirname "$0")" && pwd)
"$here/install-deps.sh" python3-sklearn
src=$(dpkg -L python3-sklearn | grep '/sklearn/datasets/data/digits.csv.gz$' | head -n 1)
if [ -z "$src" ]; then
  echo "error: python3-sklearn does not ship sklearn/datasets/data/digits.csv.gz" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
gzip -dc "$src" > "$out.tmp"
mv "$out.tmp" "$out"
echo "digits: $(wc -l < "$out") rows -> $out"
