#!/usr/bin/env bash
# Candidate slowdowns of one kernel, each measured against its _nospin twin (the parent's code)
# in one CONFIRM process, for spin_trial.sh's picks where its one-step sizing cannot find one
# (07 under --work: a tail wait beside its FFMAs made it 3-5 % faster, not slower).
#   KERNEL=07_bank_conflict_free MODE=--work VARIANTS="26 36+10500 44+10500" bash ci/probes/spin_variants.sh
# TRUE_MODE=sustained: timed after 2 s of back-to-back launches (gemm bench --mode).
# Prints each variant's true size at SIZES (default 2048 4096 8192) and the one nearest TARGET_PCT
# (default 1) % at every size, none if no variant is slower by 0.6-3 times that at all of them; with
# PICKS_TEMPLATE (the other kernels' picks, "@" where this kernel's goes) and that variant found,
# writes the picks for BASE (default HEAD) into STATE (default .probe/spin), so spin_trial.sh
# starts at its trials.
set -uo pipefail
cd "$(dirname "$0")/../.."
d=${OUT:?}; k=${KERNEL:?}; base=$(git rev-parse "${BASE:-HEAD}")
SIZES=${SIZES:-2048 4096 8192}
measured=()
for v in ${VARIANTS:?}; do
  wt=/tmp/wt-variant-$v; rm -rf "$wt"; git worktree prune
  git worktree add -f --detach "$wt" "$base" >/dev/null 2>&1 || { echo "$v: no worktree"; continue; }
  python3 ci/probes/tailspin.py set "$wt" ${MODE:-} "$k=$v" >/dev/null || { echo "$v: not set"; continue; }
  (cd "$wt" && PYTHONPATH="$wt${PYTHONPATH:+:$PYTHONPATH}" python3 -m gemm bench -k "$k" -k "${k}_nospin" \
    --sizes $SIZES --policy confirm ${TRUE_MODE:+--mode "$TRUE_MODE"} --json "$d/variant-$v.json" > "$d/variant-$v.log" 2>&1)
  measured+=("$v=$d/variant-$v.json")
  rm -rf "$wt"; git worktree prune
done
best=$(python3 ci/probes/tailspin.py nearest "${TARGET_PCT:-1}" "$SIZES" ${measured[@]+"${measured[@]}"}) ||
  { echo "no variant slower by 0.6-3 times ${TARGET_PCT:-1} % at every size"; exit 1; }
echo "$k=$best"
if [ -n "${PICKS_TEMPLATE:-}" ]; then
  st=${STATE:-.probe/spin}
  case $st in .probe/?*) ;; *) echo "STATE must be a folder under .probe/, got $st"; exit 2;; esac
  rm -rf "$st"; mkdir -p "$st/runs"
  echo "$base${MODE:-}" > "$st/base"; echo "${PICKS_TEMPLATE//@/$best}" > "$st/picks"
  echo "picks: $(cat "$st/picks")"
fi
