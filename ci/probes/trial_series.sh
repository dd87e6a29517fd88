#!/usr/bin/env bash
# Issue 24's ~1 % detection series (docs/evidence.md), by name, each resumable: SERIES (default
# "B3 B2 A") in order, each through ci/probes/spin_trial.sh with its recorded picks (SIZED=1),
# base ca051b3 against fcd20ff at the 180 s + 60 s a code change gets, its state in
# .probe/spin-NAME (a fresh checkout measures the true size on this GPU first). A series starts
# its next trial while under its own deadline, NAME_DEADLINE seconds from its start (default
# 120; A's trials take about 280 s, B2's and B3's about 60 s), up to NAME_TRIALS (default 5).
# The states come back as $OUT/state.tgz (untar it in the checkout to resume in a later call).
#   A   WORK=1: 05, 07, 09 (FFMAs or tail waits) and 14 (tail wait) at 2048, 4096, 8192
#   B2  WORK=1: 07 at 8192 alone, 38 FFMAs
#   B3  07 at 2048 alone, a tail wait of 15003 ppm (series A's FFMAs cost it under 1 %)
# For ci/device-run.sh: EXTRAS=probe PROBE_CMD="bash ci/probes/trial_series.sh"
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?}"
for name in ${SERIES:-B3 B2 A}; do
  case $name in
    A)  set -- WORK=1 KS="05_2d_blocktiling 07_bank_conflict_free 09_cp_async_pipeline 14_bf16_wgmma_tma" \
          PICKS="05_2d_blocktiling=72 07_bank_conflict_free=26 09_cp_async_pipeline=7000 14_bf16_wgmma_tma=16000" ;;
    B2) set -- WORK=1 KS=07_bank_conflict_free SIZES=8192 PICKS=07_bank_conflict_free=38 ;;
    B3) set -- KS=07_bank_conflict_free SIZES=2048 PICKS=07_bank_conflict_free=15003 ;;
    *)  echo "trial_series: no series $name (A, B2, B3)"; exit 2 ;;
  esac
  deadline=${name}_DEADLINE trials=${name}_TRIALS
  echo "== series $name"
  env "$@" BASE=ca051b3 SIZED=1 AFTER=0 BUDGET=180 OVERTIME=60 STATE=".probe/spin-$name" \
    DEADLINE_S="${!deadline:-120}" TRIALS="${!trials:-5}" bash ci/probes/spin_trial.sh
done
tar czf "$OUT/state.tgz" .probe/spin-* 2>/dev/null
