#!/usr/bin/env bash
# Converts every ONNX backend node test to each opset given (default 13 and 17) with the check
# on one random input, and counts the outcomes: ok (converted, outputs equal), no (a node has no
# equivalent at the target), MISMATCH (the check refused a wrong result), ERR (anything else,
# e.g. the original model cannot run on random inputs).
#   benches/convert_node_tests.sh [OPSET...]   (after cargo build --release)
set -u
cd "$(dirname "$0")/.."
shared="${ONNX_OPT_SHARED:-../shared}"
targets=("${@:-13 17}")
out=$(mktemp -d)
for d in "$shared"/onnx-backend/node/*/; do
  m="$d/model.onnx"; [ -f "$m" ] || continue
  for t in ${targets[@]}; do
    r=$(timeout 60 ./target/release/onnx-opt convert "$m" --opset "$t" -o "$out/c.onnx" --check 1 2>&1)
    if grep -q 'check: outputs equal' <<<"$r"; then s=ok
    elif grep -q 'cannot express' <<<"$r"; then s=no
    elif grep -q 'check failed' <<<"$r"; then s=MISMATCH
    else s=ERR; fi
    echo "$(basename "$d") $t $s"
  done
done | tee "$out/results.txt" | awk '{print $2, $3}' | sort | uniq -c
rm -rf "$out"
