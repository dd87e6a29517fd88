#!/usr/bin/env bash
# For a lent machine with several GPUs (the device tool's nvidia-h200-x2): independent jobs of
# ci/device-run.sh side by side, one per GPU, so one session's device time buys several GPUs'
# worth of measuring. Each lane sees one GPU (CUDA_VISIBLE_DEVICES) and measures only on it:
# every A/B, calibration and record of this suite is made on one GPU, so lanes do not mix.
# LANE0, LANE1, ...: each a list of shell assignments for ci/device-run.sh, e.g.
#   LANE0="PER_COMMIT=1 MEMCHECK=0" LANE1="PER_COMMIT=0 EXTRAS=calibrate CAL_ARGS='--processes 0'"
# git is restored from the carried bundle (and reset to HEAD) once, before the lanes start.
# Each lane's bundle comes back as $OUT/laneN/bundle.tgz, its console as $OUT/laneN.log.
# BACKFILL="A..B" (or hashes) without LANEn: a backfill sharded over every GPU of the host, lane
# i recording shard i (ci/backfill.sh, which skips what results/ already holds), each into
# results/ (distinct commits: distinct files; benchmarks.json's update is locked).
# Lanes that record write separate trees (the per-commit job the repository's results/, the
# drift and false-alarm extras their own worktrees and scratch copies); run at most one lane
# that records into results/ at a time. Calibrate lanes each work on their own copy of
# calibration/ (join their trials afterwards: gemm calibrate --join). LANE_TIMEOUT_S stops a
# lane in time for the call's files to come back (its bundle holds what it packed before).
set -uo pipefail
final=${OUT:?set OUT}
cd "$(dirname "$0")/.."
mkdir -p "$final/restore"
OUT="$final/restore" PER_COMMIT=0 EXTRAS="" bash ci/device-run.sh > "$final/restore.log" 2>&1 ||
  { cat "$final/restore.log"; exit 2; }
head -n 3 "$final/restore.log"
n=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ -n "${BACKFILL:-}" ] && [ -z "${LANE0:-}" ]; then
  # a backfill over the host's GPUs: one lane per GPU, each ci/backfill.sh's shard i of n (the
  # workflow's backfill matrix shards the same way over the runners of a model)
  for i in $(seq 0 $((n - 1))); do export "LANE$i=PER_COMMIT=0 SHARD=$i SHARDS=$n"; done
fi
pids=()
for i in $(seq 0 7); do
  var="LANE$i"; spec=${!var:-}
  [ -n "$spec" ] || continue
  if [ "$i" -ge "$n" ]; then echo "lane $i: no GPU $i here ($n GPUs); not run"; continue; fi
  mkdir -p "$final/lane$i"
  (export CUDA_VISIBLE_DEVICES=$i NO_RESTORE=1 OUT="$final/lane$i"
   timeout -k 15 "${LANE_TIMEOUT_S:-86400}" bash -c "$spec bash ci/device-run.sh" > "$final/lane$i.log" 2>&1
   echo "lane $i ($spec): exit $?" >> "$final/lane$i.log") &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for f in "$final"/lane*.log; do echo "=== $(basename "$f")"; tail -n 30 "$f"; done
