#!/usr/bin/env bash
# The gate's detection test with a real slowdown in kernel code (ci/probes/spin.py: a busy-wait
# every few K steps in 05, 07, 09; PICKS = KERNEL=SPIN:EVERY ..., sized to about 1 % from a
# first run), its true size measured independently (gemm bench of each slowed kernel against
# its _nospin twin, the parent's code, in one process); HEAD's and the throwaway's runs of those
# kernels recorded into a scratch history; then TRIALS runs of gemm regress on the throwaway
# (each a fresh A/B against HEAD), while under DEADLINE_S.
# For ci/device-run.sh: EXTRAS=probe PROBE_CMD="bash ci/probes/spin_trial.sh"
set -uo pipefail
cd "$(dirname "$0")/../.."
d=${OUT:?}; t0=$SECONDS
base=$(git rev-parse HEAD); wt=/tmp/wt-spin; h=/tmp/spinhist
KS="05_2d_blocktiling 07_bank_conflict_free 09_cp_async_pipeline"
SIZES=${SIZES:-2048 4096 8192}; TRIAL_SIZES=${TRIAL_SIZES:-2048 4096}
in_wt() { (cd "$wt" && PYTHONPATH="$wt${PYTHONPATH:+:$PYTHONPATH}" "$@"); }
rm -rf "$wt"; git worktree add -f --detach "$wt" "$base" >/dev/null 2>&1 || { echo "no worktree"; exit 2; }
picks=${PICKS:-05_2d_blocktiling=32:8 07_bank_conflict_free=16:16 09_cp_async_pipeline=16:3}
python3 ci/probes/spin.py set "$wt" $picks || exit 2
git -C "$wt" -c user.name=spin -c user.email=spin@test commit -qam "throwaway: a spin every few K steps ($picks)"
echo "spin (SPIN:EVERY): $picks"
spin=$(git -C "$wt" rev-parse HEAD)
true_size() {  # the slowed kernels against their _nospin twins, one process
  local ks=(); for k in $KS; do ks+=(-k "$k" -k "${k}_nospin"); done
  in_wt python3 -m gemm bench "${ks[@]}" --sizes $SIZES --json "$d/true$1.json" > "$d/true$1.log" 2>&1
  python3 - "$d/true$1.json" <<'PY'
import json, sys
recs = [r for r in json.load(open(sys.argv[1]))["records"] if r.get("status") == "ok"]
med = lambda r: sorted(r["kernel_time"]["samples_s"])[len(r["kernel_time"]["samples_s"]) // 2]
t = {(r["kernel"], r["size"]): med(r) for r in recs}
for (k, s), v in sorted(t.items()):
    if k.endswith("_nospin"):
        slow = t.get((k[:-7], s))
        if slow:
            print(f"true size: {k[:-7]} at {s}: {100 * (v / slow - 1):+.2f} % TFLOPS")
PY
}
true_size 1
rm -rf "$h"; mkdir -p "$h"; cp -r results "$h/results"
RX='Kernel_(05_2d|07_bank|09_cp)'
python3 -m gemm record --repo . --results "$h/results" --machine h200 --commit "$base" -b "$RX" \
  > "$d/record-base.log" 2>&1; echo "record HEAD: exit $? ($((SECONDS - t0)) s)"
in_wt python3 -m gemm record --repo "$wt" --results "$h/results" --machine h200 --commit "$spin" \
  -b "$RX" > "$d/record-spin.log" 2>&1; echo "record throwaway: exit $? ($((SECONDS - t0)) s)"
for t in $(seq 1 "${TRIALS:-5}"); do
  if [ $((SECONDS - t0)) -ge "${DEADLINE_S:-400}" ]; then echo "trial $t: not run (deadline)"; continue; fi
  python3 -m gemm regress --repo . --results "$h/results" --verdicts "$h/verdicts" --machine h200 \
    --commit "$spin" --kernels $KS --sizes $TRIAL_SIZES --anchor "$base" --budget "${BUDGET:-120}" \
    --overtime 30 --json "$d/trial$t.json" > "$d/trial$t.log" 2>&1
  echo "trial $t: gate exit $? ($((SECONDS - t0)) s)"
  python3 - "$d/trial$t.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["rows"]:
    e = (r.get("effects") or [{}])[0]
    print(f"  {r['kernel'][:2]} {r['size']:>5} {r['metric']:<14} {r['verdict']:<10} "
          f"screen {100 * (r.get('change') or 0):+.2f} %  A/B {100 * (e.get('change') or 0):+.2f} % "
          f"[{100 * (e.get('lo') or 0):+.2f}, {100 * (e.get('hi') or 0):+.2f}] n={e.get('n_new')}")
PY
done
true_size 2
echo "spin trial: $((SECONDS - t0)) s"
