#!/usr/bin/env bash
# Backfill: record older commits, each measured with its own code from a git worktree, into
# $RESULTS/<machine>/ (like a per-commit record, without the gate). One shard of the list:
# commit i (oldest first, counting only the commits to record) belongs to shard i % SHARDS, so
# the runners of one GPU model (the workflow's backfill matrix) or the GPUs of one host
# (ci/device-lanes.sh) split a range without a scheduler; every shard's commits span the range.
#   bash ci/backfill.sh [--shard I] [--shards N] [--all] A..B | SHA...
# Resumable: a commit that $RESULTS/<machine>/ already holds a run of is skipped, so a shard
# stopped half way (a timeout, a lost runner) is run again with the same arguments. A recorded
# run is never lost: `gemm record` stages asv's output and moves only a complete result file
# into $RESULTS (a failed or interrupted commit leaves the history as it was), each commit is
# recorded on its own, and PUSH=1 pushes after each commit (ci/push-results.sh: rebase and
# retry; the results stay in $RESULTS for the next push where one fails).
# Commits that change nothing but recorded data (results/, verdicts/, calibration/: the
# per-commit job's own "Record ... results" commits) are left out unless --all.
# MACHINE: the asv machine name (default: the GPU's, `gemm machine`). Logs: $OUT/backfill*.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
if [ -n "${GEMM_CMD:-}" ]; then gemm() { $GEMM_CMD "$@"; }; fi   # tests: a stub gemm
shard=0 shards=1 all=0 specs=()
while [ $# -gt 0 ]; do
  case $1 in
    --shard) shard=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --all) all=1; shift ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) specs+=("$1"); shift ;;
  esac
done
case "$shard$shards" in *[!0-9]*) echo "backfill: --shard and --shards are numbers" >&2; exit 2 ;; esac
if [ "$shards" -lt 1 ] || [ "$shard" -ge "$shards" ]; then
  echo "backfill: shard $shard of $shards: needs 0 <= shard < shards" >&2; exit 2
fi
[ ${#specs[@]} -gt 0 ] || { echo "backfill: no commits (a range A..B or commit hashes)" >&2; exit 2; }

commits=()   # oldest first, each once
declare -A seen=()
for spec in "${specs[@]}"; do
  if [[ $spec == *..* ]]; then
    list=$(git rev-list --reverse "$spec") || { echo "backfill: not a range: $spec" >&2; exit 2; }
  else
    list=$(git rev-parse --verify -q "$spec^{commit}") || { echo "backfill: not a commit: $spec" >&2; exit 2; }
  fi
  for sha in $list; do
    [ -n "${seen[$sha]:-}" ] && continue
    seen[$sha]=1
    if [ "$all" = 0 ]; then
      files=$(git diff-tree --no-commit-id --name-only -r "$sha")
      if [ -n "$files" ] && ! grep -qvE '^(results|verdicts|calibration)/' <<< "$files"; then
        echo "backfill ${sha:0:10}: left out (changes recorded data only)" >> "$OUT/backfill.log"
        continue
      fi
    fi
    commits+=("$sha")
  done
done
m=$(machine) || { echo "backfill: no machine name (set MACHINE, or run where a GPU answers)" >&2; exit 2; }
mine=()
for i in "${!commits[@]}"; do
  [ $((i % shards)) -eq "$shard" ] && mine+=("${commits[$i]}")
done
echo "backfill: ${#commits[@]} commits, shard $shard of $shards: ${#mine[@]} on $m"

recorded() {  # recorded SHA: $RESULTS/$m holds a run of SHA (asv names it <sha[:8]>-<env>.json)
  compgen -G "$RESULTS/$m/${1:0:8}-*.json" > /dev/null
}
rc=0 n_rec=0 n_skip=0 n_fail=0
for sha in "${mine[@]}"; do
  if recorded "$sha"; then
    echo "backfill ${sha:0:10}: skipped (already recorded on $m)" | tee -a "$OUT/backfill.log"
    n_skip=$((n_skip + 1)); continue
  fi
  wt="${BACKFILL_WT:-${TMPDIR:-/tmp}}/gemm-backfill-s$shard-g${CUDA_VISIBLE_DEVICES:-all}-${sha:0:12}"
  rm -rf "$wt"; git worktree prune
  if ! git worktree add -f --detach "$wt" "$sha" > "$OUT/backfill-${sha:0:10}.log" 2>&1; then
    echo "backfill ${sha:0:10}: FAILED (no worktree)" | tee -a "$OUT/backfill.log"
    rc=1; n_fail=$((n_fail + 1)); continue
  fi
  t0=$SECONDS
  gemm record --repo "$wt" --results "$RESULTS" --machine "$m" --commit "$sha" \
    >> "$OUT/backfill-${sha:0:10}.log" 2>&1
  brc=$?
  git worktree remove --force "$wt" > /dev/null 2>&1 || rm -rf "$wt"
  if [ $brc -ne 0 ] || ! recorded "$sha"; then
    echo "backfill ${sha:0:10}: FAILED (gemm record exit $brc; log backfill-${sha:0:10}.log)" | tee -a "$OUT/backfill.log"
    rc=1; n_fail=$((n_fail + 1)); continue
  fi
  echo "backfill ${sha:0:10}: recorded in $((SECONDS - t0)) s" | tee -a "$OUT/backfill.log"
  n_rec=$((n_rec + 1))
  if [ "${PUSH:-0}" = 1 ]; then
    bash ci/push-results.sh -m "Backfill $m results for ${sha:0:7} [skip ci]" "$RESULTS/$m" \
      >> "$OUT/backfill-push.log" 2>&1 ||
      { echo "backfill ${sha:0:10}: push failed (kept in $RESULTS; the next push takes it)" | tee -a "$OUT/backfill.log"; rc=1; }
  fi
done
echo "backfill: shard $shard of $shards on $m: $n_rec recorded, $n_skip already recorded, $n_fail failed" | tee -a "$OUT/backfill.log"
exit $rc
