#!/usr/bin/env bash
# compute-sanitizer over the kernels, in up to three passes (SANITIZERS, default all three):
#   memcheck   the correctness gate's odd shapes and one whose tiles divide M and N (a split
#              kernel's main entry), every kernel, every (alpha, beta): any out-of-bounds or
#              misaligned access fails it
#   racecheck  shared-memory hazards (a missing __syncthreads or __syncwarp, a cp.async target
#              read before its wait): any hazard reported fails it, warnings included
#   synccheck  illegal barrier use (a barrier in divergent code, a bad __syncwarp mask, a
#              broken wgmma sequence): any error fails it
# racecheck and synccheck run the kernels that use shared memory (01 and 02 do not; racecheck
# also leaves out the TMA kernels, 13-18) on a few small shapes, (alpha, beta) (1.5, 0.5) and,
# for synccheck, (1, 0): ci/sanitize_plan.py picks them and says why (docs/ci.md). Each pass
# then runs the tuned kernels' medium and large builds, which those small shapes never launch,
# each on its bucket's shape (the plan's bucket lines; a pass NAME-SHAPE of its own).
# KERNELS="06 07": those kernels only.
# The worker processes are included; only the GEMM kernels (names starting sgemm_:
# SANITIZE_FILTER, compute-sanitizer's --kernel-name) are instrumented, cuBLAS and the harness
# run natively. Each pass's output also goes to $OUT/sanitizer/<pass>.log.
# MEMCHECK=auto (default): only when kernels/ or the launch path (gemm/cuda, gemm/core) changed
# since the last commit that passed all three passes here (they take longer than the rest of
# the job); 1: always; 0: never. All three passes of every kernel leave a marker,
# $VERDICTS/<machine>/memcheck/<sha> (committed with the verdicts), naming the passes; a marker
# from before racecheck and synccheck (memcheck alone) does not count.
# DRY_RUN=1: print each pass's command, run nothing, leave no marker.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if [ "${MEMCHECK:-auto}" = 0 ]; then echo "memcheck: skipped (MEMCHECK=0)"; exit 0; fi
if [ "${MEMCHECK:-auto}" = auto ]; then
  if prev=$(last_memchecked) && git diff --quiet "$prev" HEAD -- kernels gemm/cuda gemm/core; then
    echo "memcheck: skipped: no kernel or launch code changed since ${prev:0:10} (MEMCHECK=1 runs it)"
    exit 0
  fi
fi
passes=${SANITIZERS:-$SANITIZE_PASSES}
for p in $passes; do
  case " $SANITIZE_PASSES " in *" $p "*) ;; *) echo "memcheck: unknown pass '$p' (SANITIZERS: $SANITIZE_PASSES)"; exit 2 ;; esac
done
filter=${SANITIZE_FILTER:-kns=sgemm_}
sanitizer=(compute-sanitizer --target-processes all --error-exitcode 9 --kernel-name "$filter"
           --print-limit 20)
mkdir -p "$OUT/sanitizer"
status=0
run_pass() {  # run_pass NAME CMD...: run (or print) one pass, its log in $OUT/sanitizer/NAME.log
  local name=$1; shift
  if [ "${DRY_RUN:-0}" = 1 ]; then
    printf '%s:' "$name"; printf ' %q' "$@"; printf '\n'; return 0
  fi
  local t0=$SECONDS log="$OUT/sanitizer/$name.log" rc
  echo "== $name"
  set +e; "$@" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}; set -e
  # racecheck's summary counts every hazard it displayed, warnings too (intra-warp hazards are
  # warnings; on Volta and later they are races all the same): any at all fails the pass
  if [ "$rc" -eq 0 ] && grep -Eq 'RACECHECK SUMMARY: [1-9][0-9]* hazard' "$log"; then rc=9; fi
  echo "$name: exit $rc in $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] || status=1
}
k_args=(); for k in ${KERNELS:-}; do k_args+=(-k "$k"); done
# shellcheck disable=SC2086  # KERNELS: names or prefixes, one word each
plan=$(python3 ci/sanitize_plan.py --tools "$(IFS=,; echo "${passes// /,}")" --gpu "$(machine)" ${KERNELS:-}) ||
  { echo "memcheck: no plan for $passes"; exit 2; }
run_buckets() {  # run_buckets TOOL ARGS...: the tool over each bucket line of the plan
  local tool=$1 shape names ks; shift
  while read -r _ _ shape names; do
    ks=(); for k in $names; do ks+=(-k "$k"); done
    run_pass "$tool-$shape" "${sanitizer[@]}" --tool "$tool" "$@" \
      python3 -m gemm check "${ks[@]}" --shapes "$shape" ${ab_args[@]+"${ab_args[@]}"}
  done < <(grep "^$tool bucket " <<< "$plan")
}
ab_args=()
case " $passes " in
  *" memcheck "*)
    shapes="1x1x1 65x129x7 127x1x300 1x4097x3 4095x63x129 1000x832x504 129x131x67 129x257x72 256x256x260"
    # --report-api-errors no: memcheck is here for the kernels' device memory accesses; the host
    # API errors it would otherwise count are cuda.bindings resolving driver entry points (the
    # first cuTensorMapEncodeTiled probes cuGetProcAddress for versions the driver lacks, by
    # design), and the harness checks every CUDA call's result itself. (Only memcheck reports
    # API errors: racecheck and synccheck need no such option.)
    # shellcheck disable=SC2086  # shapes: one word each
    run_pass memcheck "${sanitizer[@]}" --tool memcheck --report-api-errors no \
      python3 -m gemm check "${k_args[@]}" --shapes $shapes
    run_buckets memcheck --report-api-errors no ;;
esac
tools=(); for p in $passes; do [ "$p" = memcheck ] || tools+=("$p"); done
if [ ${#tools[@]} -gt 0 ]; then
  for tool in "${tools[@]}"; do
    grep "^$tool skip " <<< "$plan" | sed "s/^$tool skip /$tool: leaves out /" || true
    kernels=$(sed -n "s/^$tool kernels *//p" <<< "$plan")
    shapes=$(sed -n "s/^$tool shapes *//p" <<< "$plan")
    ab_args=(); for pair in $(sed -n "s/^$tool alpha-beta *//p" <<< "$plan"); do ab_args+=(--alpha-beta "$pair"); done
    if [ -z "$kernels" ]; then echo "$tool: no kernel to run"; continue; fi
    ks=(); for k in $kernels; do ks+=(-k "$k"); done
    extra=()
    # analysis (the default): one line per race, naming both accesses' source lines
    [ "$tool" = racecheck ] && extra=(--racecheck-report analysis)
    # shellcheck disable=SC2086  # shapes: one word each
    run_pass "$tool" "${sanitizer[@]}" --tool "$tool" "${extra[@]}" \
      python3 -m gemm check "${ks[@]}" --shapes $shapes "${ab_args[@]}"
    run_buckets "$tool" "${extra[@]}"
  done
fi
[ "${DRY_RUN:-0}" = 1 ] && exit 0
# every kernel through every pass: mark the commit
all=1; for p in $SANITIZE_PASSES; do case " $passes " in *" $p "*) ;; *) all=0 ;; esac; done
if [ $status -eq 0 ] && [ -z "${KERNELS:-}" ] && [ $all = 1 ]; then
  marker="$VERDICTS/$(machine)/memcheck/$(git rev-parse HEAD)"
  mkdir -p "$(dirname "$marker")" && { git rev-parse HEAD; echo "# passes: $SANITIZE_PASSES"; } > "$marker"
fi
exit $status
