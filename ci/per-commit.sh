#!/usr/bin/env bash
# The whole per-commit GPU job, in order: set up, correctness gate, record the benchmarks with
# asv, regression gate, explain its confirmed drops (attached to the verdicts, so publish, gemm
# show and the summary show why), memory check, publish. Logs and reports go to $OUT (default
# out/); the table of this commit's TFLOPS and % of cuBLAS and the gate's verdict are printed
# last, and written as markdown to $OUT/summary.md (ci/summary.sh: also appended to
# $GITHUB_STEP_SUMMARY where that is set), whichever stages failed. Exit non-zero if any stage
# failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
status=0
stages=()     # --stage NAME=RESULT for the summary
stage() {  # stage NAME CMD...: run, log to $OUT/NAME.log, remember a failure
  local name=$1; shift
  local t0=$SECONDS
  echo "== $name"
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "   $name: exit $rc in $((SECONDS - t0)) s (log: $OUT/$name.log)"
  stages+=(--stage "$name=$rc")
  [ $rc -eq 0 ] || { status=1; tail -n 25 "$OUT/$name.log"; }
  return $rc
}
finish() {  # the summary of whatever ran, then the job's exit status
  bash ci/summary.sh "${stages[@]}" "$@"
  exit $status
}
rm -f "$OUT/summary.md"
# A machine that cannot run the job is told so in one sentence and exit 2 before setup (which
# would spend minutes building PyCUDA first); the summary says it too
refuse() {
  echo "per-commit: $1" >&2
  printf '## GPU job\n\nNot run: %s\n' "$1" > "$OUT/summary.md"
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$OUT/summary.md" >> "$GITHUB_STEP_SUMMARY"; fi
  exit 2
}
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' ||
  refuse "no NVIDIA GPU answers here (nvidia-smi -L lists none): this job measures on a GPU; on a machine without one, bash ci/test.sh runs the tests"
command -v nvcc >/dev/null ||
  refuse "nvcc is not on the PATH: the kernels are built with the CUDA toolkit's compiler (e.g. export PATH=/usr/local/cuda/bin:\$PATH)"
stage setup bash ci/setup.sh || finish --stage gate=skipped --stage record=skipped --stage regress=skipped
nvidia-smi ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"} --query-gpu=name,uuid,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv > "$OUT/gpu.csv" 2>&1 || true
stage gate bash ci/gate.sh
# The gate's A/B (gemm regress --budget): a commit that changes measured code (codeid.MEASURED_BY:
# kernels, baselines, the harness) since the newest recorded ancestor gets gemm regress's own
# budget (180 s, and its overtime): measuring that change is what the job is for, and the memory
# check runs then too. Otherwise (the 6-minute job of unchanged code) it gets what the job's
# deadline leaves: JOB_DEADLINE_S (default 360) less the time so far, the A/B's overtime for a
# drop on course (60 s) and 40 s for the rest of regress (worktrees, history) and publish; at
# most 180 s, at least 30 s (so a record that ends late can pass the deadline). Its rounds are
# planned to fit (gemm.track.plan). A --budget in REGRESS_ARGS wins.
# The memory check, when it runs (kernel or launch code changed), comes on top (memcheck about
# 4 minutes; racecheck and synccheck about 40 s more on the H200: docs/ci.md): a commit that
# changes a kernel takes some 11-12 minutes on the H200, one of unchanged code about 3.
if stage record bash ci/record.sh; then
  # README.md's results table follows the history it was recorded into (tests/test_readme.py)
  [ "$RESULTS" = results ] && { gemm readme --results results > "$OUT/readme.log" 2>&1 ||
    echo "   readme: the results table was not rewritten (log: $OUT/readme.log)"; }
  case " ${REGRESS_ARGS:-} " in
    *" --budget"*) budget_args=(); echo "   regress: A/B budget from REGRESS_ARGS" ;;
    *) if why=$(measured_change "${COMMIT:-HEAD}"); then
         budget_args=()
         echo "   regress: A/B budget gemm regress's own ($why)"
       else
         left=$(( ${JOB_DEADLINE_S:-360} - SECONDS - 60 - 40 ))
         budget=$(( left > 180 ? 180 : left < 30 ? 30 : left ))
         budget_args=(--budget "$budget")
         echo "   regress: A/B budget ${budget} s (no measured code changed; job deadline ${JOB_DEADLINE_S:-360} s, ${SECONDS} s spent)"
       fi ;;
  esac
  stage regress bash ci/regress.sh --all ${budget_args[@]+"${budget_args[@]}"}
  # why each confirmed DROP dropped (both builds, and the GPU's part where ncu answers), attached
  # to its rows in regress.json and the kept verdicts before publish and the summary (never fails)
  bash ci/explain.sh || true
else
  rm -f "$OUT/regress.json"; stages+=(--stage regress=skipped)
fi
if command -v compute-sanitizer >/dev/null; then stage memcheck bash ci/memcheck.sh
else stages+=(--stage memcheck=skipped); fi
stage publish bash ci/publish.sh || true
tar czf "$OUT/results.tgz" "$RESULTS" $( [ -d "$VERDICTS" ] && echo "$VERDICTS")
reports=$(ls "$OUT"/sweeps/*.json "$OUT/regress.json" 2>/dev/null)
[ -n "$reports" ] && gemm show $reports
finish
