#!/usr/bin/env bash
# Does ci/memcheck.sh's racecheck pass catch a missing barrier, deterministically? A throwaway
# worktree at /tmp/wt-race-probe (RACE_PROBE_WT): HEAD with this checkout's kernels/, gemm/ and
# ci/ as they are (uncommitted edits included), less the __syncthreads() after the
# shared-memory stores of 06's K step (kernels/06_vectorized.cu: the barrier between
# load_tiles and the dot loop; the gate caught its removal in 3 of its 913 tests, all at 2048).
# Then the racecheck pass for 06 alone (SANITIZERS=racecheck KERNELS=06_vectorized MEMCHECK=1
# ci/memcheck.sh: 06's two shapes, main + edge and fallback, one (alpha, beta)) on the
# throwaway, expected to fail naming a hazard, and on this checkout, expected to pass. Prints
# both exits and the first lines of each report; exit 0 when both came out as expected, 1 when
# not, 2 when the probe could not run. Logs in $OUT/race_probe/ (default out/);
# RACE_PROBE_TIMEOUT_S (default 300) bounds each run (exit 124 past it). No marker is written
# (KERNELS is set, and VERDICTS is a scratch dir).
# For ci/device-run.sh: PER_COMMIT=0 EXTRAS=probe PROBE_CMD="bash ci/probes/race_probe.sh"
set -uo pipefail
cd "$(dirname "$0")/../.."
source ci/lib.sh            # the repository root, $OUT, the venv where ci/setup.sh made one
d="$OUT/race_probe"; mkdir -p "$d"
command -v compute-sanitizer >/dev/null || { echo "race_probe: compute-sanitizer is not on the PATH"; exit 2; }
wt=${RACE_PROBE_WT:-/tmp/wt-race-probe}; t0=$SECONDS
rm -rf "$wt"; git worktree prune
git worktree add -f --detach "$wt" HEAD >/dev/null 2>&1 || { echo "race_probe: no worktree of HEAD"; exit 2; }
for dir in kernels gemm ci; do cp -a "$dir/." "$wt/$dir/" || exit 2; done   # this checkout's code
python3 - "$wt/kernels/06_vectorized.cu" <<'PY' || exit 2
import re, sys
path = sys.argv[1]
src = open(path).read()
# the barrier right after the K step's stores: `load_tiles<...>(...);` then `__syncthreads();`
new, n = re.subn(r"(load_tiles<[^;]*;\n)[ \t]*__syncthreads\(\);\n", r"\1", src, count=1)
if n != 1:
    sys.exit("race_probe: the __syncthreads() after 06's load_tiles was not found")
open(path, "w").write(new)
PY
echo "race_probe: throwaway $wt (HEAD $(git rev-parse --short HEAD) as checked out here), the barrier removed:"
diff -U1 kernels/06_vectorized.cu "$wt/kernels/06_vectorized.cu" | sed -n '/^@@/,$p'
run() {  # run TREE NAME: the racecheck pass for 06 in TREE, its log in $d/NAME.log; echoes the exit
  local tree=$1 name=$2 rc t1=$SECONDS
  (cd "$tree" && export PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" OUT="$d/$name" \
     VERDICTS="$d/$name/verdicts" MACHINE="${MACHINE:-h200}" SANITIZERS=racecheck \
     KERNELS=06_vectorized MEMCHECK=1 &&
   timeout -k 10 "${RACE_PROBE_TIMEOUT_S:-300}" bash ci/memcheck.sh) > "$d/$name.log" 2>&1
  rc=$?
  echo "race_probe: $name: racecheck exit $rc in $((SECONDS - t1)) s (log: $d/$name.log)" >&2
  echo "$rc"
}
report() {  # the first lines of a run's report: what racecheck said, and gemm check's tally
  grep -E 'Race reported|and (Read|Write) access|hazard|RACECHECK SUMMARY|passed, [0-9]+ failed|racecheck: exit' "$1" | head -n "${2:-12}"
}
bad=$(run "$wt" throwaway)
echo "== throwaway (barrier removed): exit $bad (expected non-zero, naming a hazard)"
report "$d/throwaway.log"
good=$(run "$PWD" head)
echo "== HEAD: exit $good (expected 0)"
report "$d/head.log" 6
named=0
grep -Eq 'Race reported|hazard detected|RACECHECK SUMMARY: [1-9][0-9]* hazard' "$d/throwaway.log" && named=1
git worktree remove --force "$wt" 2>/dev/null
if [ "$bad" != 0 ] && [ $named = 1 ] && [ "$good" = 0 ]; then
  echo "race_probe: as expected: the missing barrier fails racecheck with a hazard, HEAD passes ($((SECONDS - t0)) s)"
  exit 0
fi
echo "race_probe: NOT as expected: throwaway exit $bad (hazard named: $named), HEAD exit $good ($((SECONDS - t0)) s)"
exit 1
