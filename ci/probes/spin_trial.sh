#!/usr/bin/env bash
# The gate's detection test with a real slowdown in kernel code (ci/probes/tailspin.py: each
# block of 05, 07, 09, and each tile of 14, waits a share of its own time at its end), sized to
# about TARGET_PCT (default 1) % from a first measurement, its true size measured independently
# (gemm bench of each slowed kernel against its _nospin twin, the parent's code, in one process)
# before the trials and after them. The throwaway's run is recorded into a scratch copy of the
# history (the runs recorded in earlier sessions, on other GPUs); then up to TRIALS (default 5) runs of gemm
# regress on it at SIZES (each a fresh A/B against the newest recorded commit, no anchor; BUDGET
# and OVERTIME its seconds, default 150 and 30),
# while under DEADLINE_S. KSTEP=1: the wait in every K step of 05 and 07 instead (tailspin.py
# --kstep), KS the kernels slowed (default: the four above; with KSTEP=1, 05 and 07). WORK=1:
# more FFMAs in every K step of 05 and 07 (tailspin.py --work; 07 also a tail wait: 07=FMAS+PPM, so
# that 8192, where its FFMAs cost nothing, slows too), 09's and 14's tail waits (KS: default those
# three, 09 on request).
# BASE=REV: the throwaway's parent (default HEAD), e.g. the newest commit whose measured code
# is the newest recorded run's.
# HISTORY_UPTO=REV keeps in the scratch history only the runs of REV and its ancestors (e.g.
# those recorded on other GPUs than this call's). SIZE_ONLY=1 stops after the sizing (PICKS=
# the printed picks then start a later call there).
# SIZED=1 with PICKS: the picks are final, no sizing (a series sized in an earlier session: its
# state does not outlive a checkout; series A's and B2's picks are in docs/evidence.md).
# Resumable over calls: its state (the picks, the throwaway's run, each trial's report) lives in
# .probe/spin (git-ignored); the throwaway commit is dated a minute after the base, so the same
# base and picks give the same commit again. EXPLAIN=1 runs ci/explain.sh on the newest trial with a DROP.
# TRUE_MODE=sustained times the true size after 2 s of back-to-back launches of each function
# (14's twin and its A/B disagreed at 8192 in the default hot mode: docs/evidence.md).
# STATE=DIR (default .probe/spin) keeps a second series of trials beside the first: e.g. 07 at 8192
# with its own change (07's cost per size follows no single change: docs/evidence.md), KS and
# SIZES narrowed to it.
# For ci/device-run.sh: EXTRAS=probe PROBE_CMD="bash ci/probes/spin_trial.sh"
set -uo pipefail
cd "$(dirname "$0")/../.."
d=${OUT:?}; t0=$SECONDS
state=${STATE:-.probe/spin}; mkdir -p "$state/runs"
base=$(git rev-parse "${BASE:-HEAD}"); wt=/tmp/wt-tailspin; h=/tmp/tailspin-hist
if [ "${KSTEP:-0}" = 1 ]; then mode=--kstep; KS=${KS:-"05_2d_blocktiling 07_bank_conflict_free"}
elif [ "${WORK:-0}" = 1 ]; then mode=--work; KS=${KS:-"05_2d_blocktiling 07_bank_conflict_free 14_bf16_wgmma_tma"}
else mode=""; KS=${KS:-"05_2d_blocktiling 07_bank_conflict_free 09_cp_async_pipeline 14_bf16_wgmma_tma"}; fi
SIZES=${SIZES:-2048 4096 8192}
in_wt() { (cd "$wt" && PYTHONPATH="$wt${PYTHONPATH:+:$PYTHONPATH}" "$@"); }
[ -f "$state/base" ] && [ "$(cat "$state/base")" != "$base$mode" ] && { echo "state is for another base; clearing"; rm -rf "$state"; mkdir -p "$state/runs"; }
echo "$base$mode" > "$state/base"
make_spin() {  # make_spin PICKS: the throwaway commit in $wt, the same for the same picks
  rm -rf "$wt"; git worktree prune; git worktree add -f --detach "$wt" "$base" >/dev/null 2>&1 || return 2
  python3 ci/probes/tailspin.py set "$wt" $mode $1 || return 2
  # a minute after the base (the scratch history, outside git, orders runs by commit date)
  local when="$(( $(git show -s --format=%ct "$base") + 60 )) +0000"
  git -C "$wt" add -A kernels
  GIT_AUTHOR_DATE="$when" GIT_COMMITTER_DATE="$when" \
    git -C "$wt" -c user.name=spin -c user.email=spin@test commit -qm "throwaway: a ${mode:-tail} wait in $KS ($1)"
  git -C "$wt" rev-parse HEAD
}
true_size() {  # true_size TAG [SIZES]: the slowed kernels against their _nospin twins, one process
  local ks=(); for k in $KS; do ks+=(-k "$k" -k "${k}_nospin"); done
  # CONFIRM (5 operand placements): one SUITE process read noise as the size at 2026-12-02
  in_wt python3 -m gemm bench "${ks[@]}" --sizes ${2:-${TRUE_SIZES:-$SIZES}} --policy "${TRUE_POLICY:-confirm}" ${TRUE_MODE:+--mode "$TRUE_MODE"} \
    --json "$d/true-$1.json" > "$d/true-$1.log" 2>&1
  python3 ci/probes/tailspin.py show "$d/true-$1.json" "$1"
}
# the true size is measured once per GPU a series runs on (its marker names the GPU)
gpu=$(nvidia-smi -i "${CUDA_VISIBLE_DEVICES:-0}" --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -1)
measured="$state/true-before.${gpu:-unknown}.done"
if [ ! -f "$state/picks" ] && [ "${SIZED:-0}" = 1 ] && [ -n "${PICKS:-}" ]; then
  echo "$PICKS" > "$state/picks"
elif [ ! -f "$state/picks" ]; then
  first=${PICKS:-$(for k in $KS; do case "$mode$k" in --work05*) printf '%s=60 ' "$k";; --work07*) printf '%s=18+7000 ' "$k";; *) printf '%s=10000 ' "$k";; esac; done)}
  make_spin "$first" >/dev/null || { echo "no throwaway"; exit 2; }
  true_size first
  picks=$(python3 ci/probes/tailspin.py size "$d/true-first.json" "${TARGET_PCT:-1}" $mode $first) &&
    [ -n "$picks" ] || { echo "no true size measured (log: $d/true-first.log)"; tail -5 "$d/true-first.log"; exit 2; }
  echo "$picks" > "$state/picks"; echo "sized: $first -> $picks ($((SECONDS - t0)) s)"
  [ "$picks" = "$first" ] && { cp "$d/true-first.json" "$d/true-before.json"; touch "$measured"; }
fi
picks=$(cat "$state/picks")
[ "${SIZE_ONLY:-0}" = 1 ] && { echo "picks: $picks (SIZE_ONLY: no trials)"; exit 0; }
spin=$(make_spin "$picks") || { echo "no throwaway"; exit 2; }
echo "throwaway ${spin:0:10}: $picks"
[ -f "$measured" ] || { true_size before; touch "$measured"; }
# the scratch history: the recorded runs (HEAD's own, which the per-commit job may have just
# made here, left out) and the throwaway's run made here
rm -rf "$h"; mkdir -p "$h"; cp -r results "$h/results"; rm -f "$h/results/h200/${base:0:8}"-*.json
if [ -n "${HISTORY_UPTO:-}" ]; then   # only runs of HISTORY_UPTO and its ancestors (e.g. those made on other GPUs)
  for f in "$h"/results/h200/*-*.json; do
    c=$(git rev-parse -q --verify "$(basename "$f" | cut -c1-8)^{commit}" 2>/dev/null)
    [ -n "$c" ] && git merge-base --is-ancestor "$c" "$HISTORY_UPTO" || rm -f "$f"
  done
fi
cp "$state"/runs/*.json "$h/results/h200/" 2>/dev/null
bflags=(); for k in $KS; do bflags+=(-b "$k"); done
if ! ls "$h/results/h200/${spin:0:8}"-*.json >/dev/null 2>&1; then
  in_wt python3 -m gemm record --repo "$wt" --results "$h/results" --machine h200 --commit "$spin" \
    "${bflags[@]}" > "$d/record-spin.log" 2>&1; echo "record throwaway: exit $? ($((SECONDS - t0)) s)"
  cp "$h/results/h200/${spin:0:8}"-*.json "$state/runs/"
fi
last=""
for t in $(seq 1 "${TRIALS:-5}"); do
  if [ -f "$state/trial$t.json" ]; then last=$t; continue; fi
  if [ $((SECONDS - t0)) -ge "${DEADLINE_S:-400}" ]; then echo "trial $t: not run (deadline)"; continue; fi
  python3 -m gemm regress --repo . --results "$h/results" --verdicts "$h/verdicts" --machine h200 \
    --commit "$spin" --kernels $KS --sizes $SIZES --no-anchor --budget "${BUDGET:-150}" --overtime "${OVERTIME:-30}" \
    --json "$d/trial$t.json" > "$d/trial$t.log" 2>&1
  echo "trial $t: gate exit $? ($((SECONDS - t0)) s)"
  cp "$d/trial$t.json" "$d/trial$t.log" "$state/" 2>/dev/null; last=$t
  python3 - "$d/trial$t.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["rows"]:
    e = (r.get("effects") or [{}])[0]
    print(f"  {r['kernel'][:2]} {r['size']:>5} {r['metric']:<14} {r['verdict']:<10} "
          f"min effect {100 * (r.get('min_effect') or 0):.1f} %  screen {100 * (r.get('change') or 0):+.2f} %  "
          f"A/B {100 * (e.get('change') or 0):+.2f} % [{100 * (e.get('lo') or 0):+.2f}, "
          f"{100 * (e.get('hi') or 0):+.2f}] n={e.get('n_new')}")
PY
done
if [ -n "$last" ] && [ "${AFTER:-1}" = 1 ] && [ $((SECONDS - t0)) -lt "${DEADLINE_S:-400}" ]; then true_size after; fi
dropped=$(grep -l '"verdict": "DROP"' "$state"/trial*.json 2>/dev/null | sort -V | tail -n 1)
if [ -n "$dropped" ] && [ "${EXPLAIN:-0}" = 1 ]; then   # the newest trial with a DROP
  mkdir -p "$d/x"; cp "$dropped" "$d/x/regress.json"
  OUT="$d/x" COMMIT="$spin" RESULTS="$h/results" VERDICTS="$h/verdicts" bash ci/explain.sh
  cp "$h/verdicts/h200/$spin.json" "$d/x/kept-verdicts.json" 2>/dev/null
  python3 -m gemm show "$d/x/regress.json" > "$d/x/show.txt" 2>&1; grep -i -A3 "explain\|why" "$d/x/show.txt" | head -20
fi
echo "spin trial: $((SECONDS - t0)) s"
