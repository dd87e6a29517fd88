#!/usr/bin/env bash
# For the lent GPU machine of this workplace (the `device` tool): the whole per-commit job
# (ci/per-commit.sh) plus optional extras, everything bundled into $OUT/bundle.tgz (the tool
# returns at most 8 files). EXTRAS: space-separated from
#   bench       gemm bench, all kernels, 512..8192 (the seed's table)
#   crosscheck  ci/crosscheck.py: seed kernel spread over 3 processes; cuBLAS vs torch.mm
#   rerun       RERUNS more record + regress passes of the same commit (noise check)
#   backfill    record the commits in $BACKFILL (their own code, from git worktrees) first
#   throwaway   record branch $THROWAWAY in a worktree with a copy of the history, then run
#               the gate there (expected to fail: the branch slows a kernel on purpose)
#   judge       gemm regress --commit SHA --record-verdicts for each SHA in $JUDGE (recorded
#               commits, judged against the history before each; A/B where flagged), while
#               the run is under DEADLINE_S seconds (default 480)
#   check       gemm check: every kernel over the odd shapes and (alpha, beta) pairs
#   cold        gemm bench --mode cold (L2 flushed before each launch), kernels 04-05
#   quick       the pytest-benchmark A/B path (autosave, then compare)
# PER_COMMIT=0 skips the per-commit job (e.g. a call that only reruns).
# Usage there: source .devkit/env.sh && EXTRAS="bench crosscheck" bash ci/device-run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:?set OUT}
work=$(mktemp -d)
export OUT=$work PYTHONUNBUFFERED=1
t0=$SECONDS
pack() { tar czf "$work/results.tgz" results verdicts 2>/dev/null; tar czf "$final/bundle.tgz" -C "$work" . 2>/dev/null; }
git config --global --add safe.directory '*' 2>/dev/null
if [ -f .gitcarry/repo.bundle ]; then
  # the device tool's copy of .git can be a skeleton or stale: take history, branches and HEAD
  # from the carried bundle (made here by: git bundle create .gitcarry/repo.bundle --all;
  # .gitcarry is git-excluded), then point the index at HEAD (the working tree is HEAD's)
  git fetch -q --update-head-ok .gitcarry/repo.bundle '+refs/heads/*:refs/heads/*' &&
    git symbolic-ref HEAD refs/heads/main && git reset -q &&
    echo "git: history restored from .gitcarry/repo.bundle"
fi
git rev-parse -q --verify HEAD >/dev/null || { echo "git: no HEAD; giving up"; exit 2; }
echo "git: $(git rev-parse --short HEAD 2>&1 | head -1) on $(git branch --show-current 2>&1)"
machine=${MACHINE:-h200}
worktree() { rm -rf "/tmp/wt-$1"; git worktree add -f --detach "/tmp/wt-$1" "$1" >/dev/null 2>&1 && echo "/tmp/wt-$1"; }
for sha in ${BACKFILL:-}; do
  wt=$(worktree "$sha") || { echo "backfill: no worktree for $sha"; rc=1; continue; }
  python3 -m gemm machine --machine "$machine" >/dev/null
  GEMM_SWEEP_JSON="$work/sweep-$sha.json" python3 -m gemm.track --repo "$wt" --results results \
    --machine "$machine" --commit "$sha" > "$work/backfill-$sha.log" 2>&1
  echo "backfill $sha: exit $?" | tee -a "$work/backfill.log"
done
rc=0
if [ "${PER_COMMIT:-1}" = 1 ]; then bash ci/per-commit.sh > "$work/per-commit.log" 2>&1; rc=$?; fi
pack
for extra in ${EXTRAS:-}; do
  case $extra in
    throwaway)
      wt=$(worktree "${THROWAWAY:?}") || { echo "no worktree for $THROWAWAY"; rc=1; continue; }
      rm -rf "$wt/results" "$wt/verdicts" && cp -r results "$wt/results"
      [ -d verdicts ] && cp -r verdicts "$wt/verdicts"
      mkdir -p "$work/throwaway"
      (cd "$wt" && OUT="$work/throwaway" MACHINE=$machine PYTHONPATH="$wt:$PYTHONPATH" bash ci/record.sh \
         > "$work/throwaway/record.log" 2>&1 &&
       OUT="$work/throwaway" MACHINE=$machine PYTHONPATH="$wt:$PYTHONPATH" bash ci/regress.sh \
         --commit "$(git rev-parse HEAD)" > "$work/throwaway/regress.log" 2>&1)
      echo "throwaway $THROWAWAY: gate exit $? (expected 1)" | tee "$work/throwaway.log"
      cat "$work/throwaway/regress.log" >> "$work/throwaway.log"
      pack ;;
    judge)
      for sha in ${JUDGE:?}; do
        if [ $((SECONDS - t0)) -ge "${DEADLINE_S:-480}" ]; then
          echo "judge $sha: not run (over DEADLINE_S)" | tee -a "$work/judge.log"; continue
        fi
        OUT="$work/judge-$sha" bash ci/regress.sh --commit "$sha" > "$work/judge-$sha.log" 2>&1
        echo "judge $sha: exit $? $(grep -E '^[0-9]+ series' "$work/judge-$sha.log")" | tee -a "$work/judge.log"
        grep -E "drop\?|DROP|noise|FAILED" "$work/judge-$sha.log" | grep -v "^REGRESSION" >> "$work/judge.log"
        pack
      done ;;
    bench) python3 -m gemm bench --json "$work/bench.json" > "$work/bench.log" 2>&1 || rc=1 ;;
    check) python3 -m gemm check > "$work/check.log" 2>&1 || rc=1 ;;
    cold) python3 -m gemm bench --mode cold -k 04 -k 05 --sizes 1024 4096 8192 \
            > "$work/cold.log" 2>&1 || rc=1 ;;
    crosscheck) python3 ci/crosscheck.py "$work" > "$work/crosscheck.log" 2>&1 || rc=1 ;;
    rerun)  # into a scratch copy of the history: the per-commit record above stays as recorded
      for i in $(seq 1 "${RERUNS:-3}"); do
        d="$work/rerun$i"; mkdir -p "$d"
        rm -rf "$work/scratch" && mkdir -p "$work/scratch" && cp -r results "$work/scratch/results"
        [ -d verdicts ] && cp -r verdicts "$work/scratch/verdicts"
        export RESULTS="$work/scratch/results" VERDICTS="$work/scratch/verdicts"
        OUT=$d MACHINE=$machine bash ci/record.sh > "$d/record.log" 2>&1 &&
          OUT=$d MACHINE=$machine bash ci/regress.sh > "$d/regress.log" 2>&1
        echo "rerun $i: exit $? $(grep -E '^[0-9]+ series' "$d/regress.log")" | tee -a "$work/reruns.log"
        grep -E "drop\?|DROP|noise|FAILED" "$d/regress.log" >> "$work/reruns.log"
        unset RESULTS VERDICTS
        pack
      done ;;
    quick)  # the pytest-benchmark A/B path: save a run, then compare a second one with it
      (python3 -m pytest benchmarks/ -q -p no:cacheprovider -k "${QUICK_K:-1024}" --benchmark-autosave &&
       python3 -m pytest benchmarks/ -q -p no:cacheprovider -k "${QUICK_K:-1024}" --benchmark-compare \
         --benchmark-compare-fail=median:5%) > "$work/quick.log" 2>&1
      echo "quick A/B: exit $?; saved under $(ls -d .benchmarks/*/ 2>/dev/null)" >> "$work/quick.log" ;;
  esac
done
tar czf "$work/results.tgz" results verdicts 2>/dev/null
tar czf "$final/bundle.tgz" -C "$work" .
cp "$work/sweep.json" "$final/" 2>/dev/null
echo "device-run: $((SECONDS - t0)) s, exit $rc"
[ -f "$work/per-commit.log" ] && tail -n 30 "$work/per-commit.log"
for f in backfill.log judge.log bench.log check.log cold.log crosscheck.log reruns.log throwaway.log quick.log; do
  [ -f "$work/$f" ] && { echo "== $f"; tail -n 45 "$work/$f"; }
done
exit $rc
