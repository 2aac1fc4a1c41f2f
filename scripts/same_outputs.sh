#!/bin/bash
# Byte-identity guard for changes that must not change output: optimizes (pipelines default and
# fast) and converts (opsets 11, 18, 21) every development model, the torch exports and the zoo
# models with two onnx-opt binaries, and lists every output or exit code that differs.
#   usage: scripts/same_outputs.sh OLD_BIN NEW_BIN [WORKDIR]
# Exit 1 when anything differs. Run from the repository root (../shared beside it).
set -u
OLD=$1; NEW=$2; WORK=${3:-$(mktemp -d)}
mkdir -p "$WORK"
models=""
for d in ../shared/models/*/; do models="$models ${d}model.onnx"; done
for f in tests/models/torch/*.onnx; do [ -f "$f" ] && models="$models $f"; done
for d in tests/models/zoo/*/ tests/models/contrib/*/; do
  f=$(ls "$d"*.onnx 2>/dev/null | head -1); [ -n "$f" ] && models="$models $f"
done
diffs=0; runs=0
run() { # tag, args...
  local tag=$1; shift
  for which in old new; do
    local bin=$OLD; [ $which = new ] && bin=$NEW
    timeout 600 "$bin" "$@" -o "$WORK/$tag.$which.onnx" --check 0 >"$WORK/$tag.$which.log" 2>&1
    echo $? >"$WORK/$tag.$which.rc"
  done
  runs=$((runs+1))
  if ! cmp -s "$WORK/$tag.old.rc" "$WORK/$tag.new.rc"; then
    echo "DIFF exit code: $tag ($(cat $WORK/$tag.old.rc) vs $(cat $WORK/$tag.new.rc))"; diffs=$((diffs+1))
  elif [ -f "$WORK/$tag.old.onnx" ] && ! cmp -s "$WORK/$tag.old.onnx" "$WORK/$tag.new.onnx"; then
    echo "DIFF output: $tag"; diffs=$((diffs+1))
  fi
}
for m in $models; do
  n=$(echo "$m" | sed 's|^\.\./||; s|/|_|g')
  run "$n.default" optimize "$m"
  run "$n.fast" optimize --pipeline fast "$m"
  for t in 11 18 21; do run "$n.to$t" convert --opset $t "$m"; done
done
echo "$runs runs, $diffs differ (outputs in $WORK)"
[ $diffs -eq 0 ]
