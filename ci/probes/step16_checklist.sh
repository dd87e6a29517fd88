#!/usr/bin/env bash
# Step 16's first-launch checklist (docs/drafts/README.md), each under a timeout, in order of
# what it tells: smoke, odd shapes, one bench of 14 and 16 against the same cuBLASLt baseline,
# memcheck and synccheck where the TMA store runs (alpha 1, beta 0), then the full check while
# under DEADLINE_S (default 420). Logs to $OUT/s16-*.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
d=${OUT:?}; t0=$SECONDS
step() {  # step NAME LIMIT CMD...
  local name=$1 lim=$2; shift 2
  local left=$(( ${DEADLINE_S:-420} - (SECONDS - t0) ))
  [ "$left" -lt 20 ] && { echo "$name: not run (deadline)"; return; }
  [ "$lim" -gt "$left" ] && lim=$left
  timeout -k 10 "$lim" "$@" > "$d/s16-$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s (limit $lim)"; tail -3 "$d/s16-$name.log" | sed 's/^/  /'
}
san=(compute-sanitizer --kernel-name kns=sgemm_ --error-exitcode 9)
step smoke 120 python3 -m gemm check -k 16 --shapes 256 1024 4096x4096x64 2048x2048x192
step odd 200 python3 -m gemm check -k 16 --shapes 1000x832x504 1000x836x504 130x132x40 3001x2996x3003 8192 64x256x64 130x4x40
step bench 200 python3 -m gemm bench -k 14 -k 16 --sizes 2048 4096 8192 3001x2999x3003
grep -A6 "^1[46]_" "$d/s16-bench.log" | head -24
step memcheck 150 "${san[@]}" --tool memcheck --report-api-errors no python3 -m gemm check -k 16 --alpha-beta 1,0 \
  --shapes 1x1x1 130x132x40 256x256x260 1000x832x504 2048x2048x72
step synccheck 150 "${san[@]}" --tool synccheck python3 -m gemm check -k 16 --alpha-beta 1,0 --shapes 136x264x584 2048x2048x72
step full 300 python3 -m gemm check -k 16
echo "step16 checklist: $((SECONDS - t0)) s"
