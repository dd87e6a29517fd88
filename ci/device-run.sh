#!/usr/bin/env bash
# For the lent GPU machine of this workplace (the `device` tool): the whole per-commit job
# (ci/per-commit.sh) plus optional extras, everything bundled into $OUT/bundle.tgz (the tool
# returns at most 8 files). EXTRAS: space-separated from
#   bench       gemm bench, every kernel at the tracked sizes (the seed's table)
#   crosscheck  ci/crosscheck.py: seed kernel spread over 3 processes; cuBLAS vs torch.mm
#   rerun       RERUNS more record + regress passes of the same commit (noise check)
#   backfill    record the commits in $BACKFILL (hashes or a range A..B; their own code, from git
#               worktrees) first: ci/backfill.sh, shard $SHARD of $SHARDS (ci/device-lanes.sh
#               gives each lane one), skipping commits already recorded
#   throwaway   record branch $THROWAWAY in a worktree with a copy of the history, then run
#               the gate there (expected to fail: the branch slows a kernel on purpose)
#   judge       gemm regress --commit SHA --record-verdicts for each SHA in $JUDGE (recorded
#               commits, judged against the history before each; A/B where flagged), while
#               the run is under DEADLINE_S seconds (default 480)
#   check       gemm check: every kernel over the odd shapes and (alpha, beta) pairs
#   cold        gemm bench --mode cold (L2 flushed before each launch), kernels $COLD_K
#   quick       the pytest-benchmark A/B path (autosave, then compare)
#   memcheck    ci/memcheck.sh alone (MEMCHECK=1: every kernel, memcheck, racecheck and synccheck;
#               its marker lands in verdicts/)
#   calibrate   gemm calibrate $CAL_ARGS (A/A noise, injected-delay detection), on a copy of
#               calibration/ that comes back in the bundle as calibration/
#   falsealarm  the gate's false-alarm test: FA_RUNS throwaway commits on HEAD that change no
#               code (a line in a scratch text file), each recorded in full and gated like a
#               per-commit run into a scratch copy of the history; every alarm is counted
#               (FA_REGRESS_ARGS: more gemm regress arguments, e.g. a lower --screen to send
#               many series of unchanged code to the A/B at once)
#   policystudy candidate measurement policies (POLICY_CANDIDATES: ';'-separated, each
#               "field=value,..." of gemm/core/policy.py's Policy, or "today"), each on a
#               throwaway commit (ci/policy_candidate.py): the A/A noise of PS_ARGS (default:
#               10 processes of 05, 07, 09 at 1024-8192; PS_TIMEOUT_S) and gemm bench's sweep
#               time under it (PS_BENCH_TIMEOUT_S); put "today" first as the control. The A/A
#               goes through the A/B's path, so it measures the tree's CONFIRM, which sets
#               its own stop rule and operand sets: a candidate of those fields shows in the
#               bench time only
#   probe       bash -c "$PROBE_CMD" (a ci/probes/ script; its files go to $OUT, which is
#               the bundle's directory), log in probe.log
#   drift       the gate's drift test: DRIFT_STEPS throwaway commits on HEAD, each adding
#               DRIFT_SHARE to kernel DRIFT_K's injected delay (registry inject_delay), each
#               recorded (-b) into a scratch copy of the history and gated with HEAD as the
#               anchor; HEAD's own run of that kernel is re-recorded first on this GPU
# PER_COMMIT=0 skips the per-commit job (e.g. a call that only reruns); PRISTINE=1 first resets
# the working tree that travelled to HEAD (uncommitted edits would make the record refuse);
# NO_RESTORE=1 skips both git steps (ci/device-lanes.sh does them once for its lanes).
# Usage there: source .devkit/env.sh && EXTRAS="bench crosscheck" bash ci/device-run.sh
# The kit has no ruptures (change points in gemm regress); to have them there, add its wheel to
# the kit here first: pip download ruptures --no-deps --only-binary=:all: --python-version 3.12
#   --platform manylinux2014_x86_64 -d .devkit/wheels
set -uo pipefail
final=${OUT:?set OUT}
work=$(mktemp -d)
export OUT=$work
source "$(dirname "$0")/lib.sh"
t0=$SECONDS
pack() { tar czf "$work/results.tgz" results verdicts calibration 2>/dev/null; tar czf "$final/bundle.tgz" -C "$work" . 2>/dev/null; }
# a lane's time limit (ci/device-lanes.sh: timeout signals the whole process group) still brings
# back the logs so far: the extras' own logs live under $work and are packed only here
trap 'echo "device-run: stopped by a signal after $((SECONDS - t0)) s; packing what there is"; pack; exit 124' TERM INT
summary() { gemm show "$@" 2>&1 | tail -n 12; }   # the verdict line of a gemm.regress/1 report
git config --global --add safe.directory '*' 2>/dev/null
if [ -f .gitcarry/repo.bundle ] && [ -z "${NO_RESTORE:-}" ]; then
  # the device tool's copy of .git can be a skeleton or stale: take history, branches and HEAD
  # from the carried bundle (made here by: git bundle create .gitcarry/repo.bundle --all;
  # .gitcarry is git-excluded), then point the index at HEAD (the working tree is HEAD's)
  git fetch -q --update-head-ok .gitcarry/repo.bundle '+refs/heads/*:refs/heads/*' &&
    git symbolic-ref HEAD refs/heads/main && git reset -q &&
    echo "git: history restored from .gitcarry/repo.bundle"
fi
git rev-parse -q --verify HEAD >/dev/null || { echo "git: no HEAD; giving up"; exit 2; }
if [ "${PRISTINE:-0}" = 1 ] && [ -z "${NO_RESTORE:-}" ]; then  # measure HEAD exactly: drop uncommitted edits that travelled
  git checkout -q -f HEAD -- . && git clean -fdq -- kernels gemm tests benchmarks ci &&
    echo "git: working tree reset to HEAD"
fi
echo "git: $(git rev-parse --short HEAD 2>&1 | head -1) on $(git branch --show-current 2>&1)"
# which GPU measured (false-alarm and calibration evidence is counted per GPU): a lane sees one
gpu=$(nvidia-smi -i "${CUDA_VISIBLE_DEVICES:-0}" --query-gpu=uuid,pci.bus_id --format=csv,noheader 2>/dev/null | head -1)
echo "gpu: ${gpu:-unknown}"
export MACHINE=${MACHINE:-h200}
worktree() {  # worktree REV [NAME]: a detached worktree of REV at /tmp/wt-NAME-gGPU (default REV;
  # the GPU suffix keeps the lanes of ci/device-lanes.sh out of each other's worktrees)
  local p="/tmp/wt-${2:-$1}-g${CUDA_VISIBLE_DEVICES:-all}"
  rm -rf "$p"; git worktree add -f --detach "$p" "$1" >/dev/null 2>&1 && echo "$p"
}
history_copy() {  # history_copy DIR: a scratch copy of results/ and verdicts/ (the recorded history stays as it is)
  rm -rf "$1/results" "$1/verdicts" && mkdir -p "$1" && cp -r results "$1/results"
  if [ -d verdicts ]; then cp -r verdicts "$1/verdicts"; fi
}
in_tree() {  # in_tree TREE CMD...: CMD in TREE with TREE's package first on the path
  local tree=$1; shift
  (cd "$tree" && PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" "$@")
}
record_in() {  # record_in TREE RESULTS SHA [ARGS]: `gemm record` with TREE's code into RESULTS
  local tree=$1 res=$2 sha=$3; shift 3
  in_tree "$tree" python3 -m gemm record --repo "$tree" --results "$res" --machine "$MACHINE" \
    --commit "$sha" "$@"
}
rc=0
if [ -n "${BACKFILL:-}" ]; then   # ci/backfill.sh: this lane's shard (SHARD of SHARDS; default all)
  # shellcheck disable=SC2086  # BACKFILL: commit hashes and ranges, one word each
  bash ci/backfill.sh --shard "${SHARD:-0}" --shards "${SHARDS:-1}" ${BACKFILL_ARGS:-} $BACKFILL \
    > "$work/backfill-run.log" 2>&1 || rc=1
  tail -n 1 "$work/backfill-run.log"
fi
if [ "${PER_COMMIT:-1}" = 1 ]; then bash ci/per-commit.sh > "$work/per-commit.log" 2>&1 || rc=1; fi
pack
for extra in ${EXTRAS:-}; do
  case $extra in
    throwaway)
      wt=$(worktree "${THROWAWAY:?}") || { echo "no worktree for $THROWAWAY"; rc=1; continue; }
      history_copy "$wt"
      mkdir -p "$work/throwaway"
      (export OUT="$work/throwaway"
       in_tree "$wt" bash ci/record.sh > "$work/throwaway/record.log" 2>&1 &&
       in_tree "$wt" bash ci/regress.sh --commit "$(git -C "$wt" rev-parse HEAD)" \
         > "$work/throwaway/regress.log" 2>&1)
      echo "throwaway $THROWAWAY: gate exit $? (expected 1)" | tee "$work/throwaway.log"
      summary "$work/throwaway/regress.json" >> "$work/throwaway.log"
      pack ;;
    judge)
      for sha in ${JUDGE:?}; do
        if [ $((SECONDS - t0)) -ge "${DEADLINE_S:-480}" ]; then
          echo "judge $sha: not run (over DEADLINE_S)" | tee -a "$work/judge.log"; continue
        fi
        OUT="$work/judge-$sha" bash ci/regress.sh --commit "$sha" > "$work/judge-$sha.log" 2>&1
        echo "judge $sha: exit $?" | tee -a "$work/judge.log"
        summary "$work/judge-$sha/regress.json" >> "$work/judge.log"
        pack
      done ;;
    memcheck) t1=$SECONDS; MEMCHECK=1 bash ci/memcheck.sh > "$work/memcheck.log" 2>&1
      echo "memcheck: exit $? in $((SECONDS - t1)) s" >> "$work/memcheck.log"; pack ;;
    bench) gemm bench --json "$work/bench.json" > "$work/bench.log" 2>&1 || rc=1 ;;
    check) gemm check > "$work/check.log" 2>&1 || rc=1 ;;
    cold) gemm bench --mode cold $(for k in ${COLD_K:-04 05}; do echo -k "$k"; done) \
            --sizes 1024 4096 8192 > "$work/cold.log" 2>&1 || rc=1 ;;
    crosscheck) python3 ci/crosscheck.py "$work" > "$work/crosscheck.log" 2>&1 || rc=1 ;;
    rerun)  # into a scratch copy of the history: the per-commit record above stays as recorded
      for i in $(seq 1 "${RERUNS:-3}"); do
        d="$work/rerun$i"; mkdir -p "$d"
        rm -rf "$work/scratch" && mkdir -p "$work/scratch" && cp -r results "$work/scratch/results"
        [ -d verdicts ] && cp -r verdicts "$work/scratch/verdicts"
        RESULTS="$work/scratch/results" VERDICTS="$work/scratch/verdicts" OUT=$d \
          bash -c 'bash ci/record.sh > "$OUT/record.log" 2>&1 && bash ci/regress.sh > "$OUT/regress.log" 2>&1'
        echo "rerun $i: exit $?" | tee -a "$work/reruns.log"
        summary "$d/regress.json" >> "$work/reruns.log"
        pack
      done ;;
    probe) t1=$SECONDS; bash -c "${PROBE_CMD:?PROBE_CMD names the probe}" > "$work/probe.log" 2>&1
      echo "probe: exit $? in $((SECONDS - t1)) s" >> "$work/probe.log"; pack ;;
    calibrate)
      t1=$SECONDS
      # on a copy beside the logs (bundle: calibration/), not the tracked file: a per-commit
      # job in another lane refuses to record over a modified working tree
      mkdir -p "$work/calibration" && cp calibration/*.json "$work/calibration/" 2>/dev/null
      # CAL_TIMEOUT_S: stop it (SIGINT) in time for the bundle to come back; the file keeps
      # the trials finished before
      timeout -s INT -k 30 "${CAL_TIMEOUT_S:-86400}" \
        python3 -m gemm calibrate --machine "$MACHINE" --out "$work/calibration" ${CAL_ARGS:-} \
        > "$work/calibrate.log" 2>&1
      echo "calibrate: exit $? in $((SECONDS - t1)) s" >> "$work/calibrate.log"; pack ;;
    drift)
      k=${DRIFT_K:-09}; base=$(git rev-parse HEAD); d="$work/drift"
      history_copy "$d"; rm -rf "$d/verdicts"
      wt=$(worktree "$base" drift) || { echo "drift: no worktree"; rc=1; continue; }
      rec() { record_in "$wt" "$d/results" "$1" -b "$k" --allow-fault-injection >> "$d/record.log" 2>&1; }
      t1=$SECONDS; rec "$base"; echo "drift: base ${base:0:10} re-recorded ($k): exit $? in $((SECONDS - t1)) s" | tee -a "$work/drift.log"
      for i in $(seq 1 "${DRIFT_STEPS:-4}"); do
        t1=$SECONDS
        python3 - "$wt/kernels/kernels.toml" "$k" "$(python3 -c "print(round($i * ${DRIFT_SHARE:-0.005}, 6))")" <<'PY'
import re, sys
path, k, share = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(path).read()
s = re.sub(r"\ninject_delay = [0-9.e-]+", "", s)
s = re.sub(r'(\nname = "' + k + r'[^"]*"\n)', r"\1inject_delay = " + share + "\n", s, count=1)
open(path, "w").write(s)
PY
        git -C "$wt" -c user.name=drift -c user.email=drift@test commit -qam "drift step $i: $k +${DRIFT_SHARE:-0.005} (throwaway)"
        sha=$(git -C "$wt" rev-parse HEAD)
        rec "$sha"; rrc=$?
        gemm regress --repo . --results "$d/results" --verdicts "$d/verdicts" --machine "$MACHINE" \
          --commit "$sha" --kernels "$k" --sizes ${DRIFT_SIZES:-2048 4096 8192} --anchor "$base" \
          --record-verdicts --json "$d/step$i.json" > "$d/step$i.log" 2>&1
        grc=$?
        echo "drift step $i (${sha:0:10}, cumulative $(python3 -c "print(round(100 * $i * ${DRIFT_SHARE:-0.005}, 3))") %): record exit $rrc, gate exit $grc in $((SECONDS - t1)) s" | tee -a "$work/drift.log"
        summary "$d/step$i.json" >> "$work/drift.log"; pack
      done ;;
    policystudy)
      # candidate measurement policies, each a throwaway commit in its own worktree (its own
      # policy fingerprint; nothing is recorded): the A/A noise of PS_ARGS (gemm calibrate
      # --trials 0, the candidate's own code, into a scratch calibration dir; first, so that
      # an argument error costs seconds), then the kernels' sweep time under it (gemm bench);
      # "today" measures the policy as it is, for a same-GPU, same-session control
      d="$work/policystudy"; mkdir -p "$d"; i=0
      IFS=';' read -ra cands <<< "${POLICY_CANDIDATES:-today}"
      for c in "${cands[@]}"; do
        c="${c#"${c%%[![:space:]]*}"}"; c="${c%"${c##*[![:space:]]}"}"    # trimmed
        [ -n "$c" ] || continue
        i=$((i + 1))
        wt=$(worktree HEAD "ps$i") || { echo "policystudy: no worktree"; rc=1; continue; }
        if [ "$c" != today ]; then
          if ! python3 ci/policy_candidate.py "$wt" "$c" > "$d/policy$i.json" 2> "$d/policy$i.log" ||
             ! git -C "$wt" -c user.name=ps -c user.email=ps@test commit -qam "policy candidate: $c (throwaway)" \
               >> "$d/policy$i.log" 2>&1; then
            echo "policy candidate $i ($c): refused: $(tail -n 1 "$d/policy$i.log")" | tee -a "$work/policystudy.log"
            rc=1; continue
          fi
        fi
        t1=$SECONDS; mkdir -p "$d/cal$i"
        in_tree "$wt" timeout -s INT -k 30 "${PS_TIMEOUT_S:-86400}" \
          python3 -m gemm calibrate --repo "$wt" --machine "$MACHINE" --out "$d/cal$i" --trials 0 \
          ${PS_ARGS:---processes 10 -k 05 -k 07 -k 09 --sizes 1024 2048 4096 8192} > "$d/cal$i.log" 2>&1
        crc=$?; t2=$SECONDS; pack
        in_tree "$wt" timeout -k 15 "${PS_BENCH_TIMEOUT_S:-86400}" \
          python3 -m gemm bench --json "$d/bench$i.json" > "$d/bench$i.log" 2>&1
        brc=$?
        { [ $crc -eq 0 ] && [ $brc -eq 0 ]; } || rc=1
        echo "policy candidate $i ($c): A/A exit $crc in $((t2 - t1)) s, bench exit $brc in $((SECONDS - t2)) s" | tee -a "$work/policystudy.log"
        gemm show "$d/bench$i.json" 2>&1 | grep -m 1 "measurements in" >> "$work/policystudy.log"
        sed -n '/^A\/A noise/,/^calibration written/p' "$d/cal$i.log" >> "$work/policystudy.log"; pack
      done ;;
    falsealarm)
      d="$work/falsealarm"; history_copy "$d"
      wt=$(worktree HEAD fa) || { echo "falsealarm: no worktree"; rc=1; continue; }
      for i in $(seq 1 "${FA_RUNS:-3}"); do
        t1=$SECONDS
        echo "false-alarm run $i" >> "$wt/.falsealarm"
        git -C "$wt" add -f .falsealarm
        git -C "$wt" -c user.name=fa -c user.email=fa@test commit -qm "false-alarm run $i (no code change; throwaway)"
        sha=$(git -C "$wt" rev-parse HEAD)
        echo "false-alarm run $i (${sha:0:10}): recording" >> "$work/falsealarm.log"
        record_in "$wt" "$d/results" "$sha" > "$d/record$i.log" 2>&1
        rrc=$?; t2=$SECONDS
        echo "false-alarm run $i: record exit $rrc in $((t2 - t1)) s; gating" >> "$work/falsealarm.log"; pack
        gemm regress --repo . --results "$d/results" --verdicts "$d/verdicts" --machine "$MACHINE" \
          --commit "$sha" --record-verdicts --json "$d/run$i.json" ${FA_REGRESS_ARGS:-} > "$d/run$i.log" 2>&1
        grc=$?
        echo "false-alarm run $i (${sha:0:10}, ${gpu:-unknown GPU}): record exit $rrc in $((t2 - t1)) s, gate exit $grc in $((SECONDS - t2)) s" | tee -a "$work/falsealarm.log"
        summary "$d/run$i.json" >> "$work/falsealarm.log"; pack
      done ;;
    quick)  # the pytest-benchmark A/B path: save a run, then compare a second one with it
      (python3 -m pytest benchmarks/ -q -p no:cacheprovider -k "${QUICK_K:-1024}" --benchmark-autosave &&
       python3 -m pytest benchmarks/ -q -p no:cacheprovider -k "${QUICK_K:-1024}" --benchmark-compare \
         --benchmark-compare-fail=median:5%) > "$work/quick.log" 2>&1
      echo "quick A/B: exit $?; saved under $(ls -d .benchmarks/*/ 2>/dev/null)" >> "$work/quick.log" ;;
  esac
done
pack
echo "device-run: $((SECONDS - t0)) s, exit $rc"
[ -f "$work/per-commit.log" ] && tail -n 40 "$work/per-commit.log"
for f in memcheck.log probe.log backfill.log judge.log bench.log check.log cold.log crosscheck.log reruns.log throwaway.log quick.log calibrate.log policystudy.log drift.log falsealarm.log; do
  [ -f "$work/$f" ] && { echo "== $f"; tail -n 45 "$work/$f"; }
done
exit $rc
