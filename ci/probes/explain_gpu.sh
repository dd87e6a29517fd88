#!/usr/bin/env bash
# gemm explain on the GPU (issue 26): counters (ncu --clock-control none), timed runs and the
# machine (NVML), in two comparisons, each under EXPLAIN_TIMEOUT_S (default 75 s):
#   stages   14_bf16_wgmma_tma at 4096, STAGES=4 (old) against STAGES=3 (new), the working
#            tree's code on both sides (gemm.measure.once; no git needed): a kernel change
#            without a commit
#   harness  09_cp_async_pipeline at 2048 between HARNESS_OLD (default: the newest commit
#            before HEAD with HEAD's kernels/ and no gemm/measure/once.py, so that side runs
#            through its own `gemm bench`; else HEAD) and HEAD: the kernels are the same, so
#            the summary should say "identical SASS and launch: the harness or the machine"
#            (needs the git history: not run, with a line, where HEAD cannot be read)
# Writes $OUT/explain-gpu/{env.txt, NAME.txt (the table), NAME.json (gemm.explain/1),
# NAME.log (stderr), ncu.txt (each ncu command and its raw output)}: 8 files; prints each
# summary line and what each side reported. About 50 s on an H200 (this helper's trial).
# Usage on the GPU machine (after `source .devkit/env.sh`): bash ci/probes/explain_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
d=${OUT:?set OUT}/explain-gpu
mkdir -p "$d"
: > "$d/ncu.txt"
t0=$SECONDS
limit=${EXPLAIN_TIMEOUT_S:-75}
git config --global --add safe.directory '*' 2>/dev/null
{
  echo "git: $(git rev-parse --short HEAD 2>&1) ($(git branch --show-current 2>&1))"
  nvidia-smi -L 2>&1
  echo "ncu: $(command -v ncu || echo 'not on the PATH') $(ncu --version 2>/dev/null | tail -n 1)"
  python3 -c 'import pynvml, pycuda; print("pynvml and pycuda import")' 2>&1 | tail -n 1
} > "$d/env.txt"
cat "$d/env.txt"
harness_old=${HARNESS_OLD:-}
githead=1
git rev-parse -q --verify HEAD > /dev/null 2>&1 || githead=0
if [ -z "$harness_old" ] && [ $githead = 1 ]; then
  for c in $(git rev-list --max-count 40 HEAD~1 2>/dev/null); do
    if git diff --quiet "$c" HEAD -- kernels/ && ! git cat-file -e "$c:gemm/measure/once.py" 2>/dev/null; then
      harness_old=$c; break
    fi
  done
fi
harness_old=${harness_old:-HEAD}
if [ $githead = 1 ]; then
  stat=$(git diff --stat "$harness_old" HEAD -- kernels/ | tail -n 1)
  echo "harness: old side ${harness_old:0:10} against HEAD (${stat:-kernels/: no difference})"
fi
explain() {  # explain NAME ARGS...: gemm explain with counters, its files under $d
  local name=$1; shift
  timeout "$limit" python3 -m gemm explain "$@" --json "$d/$name.json" > "$d/$name.txt" 2> "$d/$name.log"
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - t0)) s$([ $rc -eq 124 ] && echo " (over $limit s)")"
  grep '^summary: ' "$d/$name.txt" || tail -n 3 "$d/$name.log"
}
explain stages 14_bf16_wgmma_tma --size 4096 --new . --old-define STAGES=4 --new-define STAGES=3 \
  --ncu-output "$d/ncu.txt"
if [ $githead = 1 ]; then
  explain harness 09_cp_async_pipeline --size 2048 --old "$harness_old" --new HEAD --ncu-output "$d/ncu.txt"
else
  echo "harness: not run: git cannot read HEAD here (ci/device-run.sh restores the history from .gitcarry/repo.bundle)"
fi
python3 - "$d" <<'PY'
import json, os, sys
for name in ("stages", "harness"):
    try:
        doc = json.load(open(os.path.join(sys.argv[1], f"{name}.json")))
    except (OSError, ValueError) as exc:
        print(f"{name}: no JSON ({exc})")
        continue
    g = doc.get("gpu") or {}
    print(f"{name}: mode {doc.get('mode')}, ncu {g.get('ncu') or '-'}, {g.get('why') or g.get('counters_why') or ''}")
    for side in ("old", "new"):
        s = g.get(side) or {}
        c = s.get("counters") or {}
        print(f"  {side}: {s.get('launcher')}, {s.get('time_ms')} ms, error {s.get('error')!r}, "
              f"counters error {c.get('error')!r}, missing {c.get('missing')}")
PY
echo "explain_gpu: done in $((SECONDS - t0)) s"
