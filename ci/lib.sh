# Shared plumbing for the ci/*.sh scripts (sourced): the repository root as the working
# directory, $OUT for logs and reports, and the asv machine name.
#   OUT       where logs and JSON reports go (default: out/)
#   MACHINE   asv machine name, one per GPU model (default: from the GPU, e.g. h200)
#   RESULTS   the history to record into and judge (default: results/)
#   VERDICTS  where the gate keeps its A/B verdicts (default: verdicts/)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${VIRTUAL_ENV:-}" ] && [ -x .venv/bin/python3 ]; then export VIRTUAL_ENV=$PWD/.venv PATH=$PWD/.venv/bin:$PATH; fi   # ci/setup.sh's (ci/venv.sh)
export OUT=${OUT:-$PWD/out} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
RESULTS=${RESULTS:-results}
VERDICTS=${VERDICTS:-verdicts}
gemm() { python3 -m gemm "$@"; }
machine() {  # the machine name: $MACHINE, else the GPU's (writes asv's machine file)
  if [ -n "${MACHINE:-}" ]; then echo "$MACHINE"; else gemm machine; fi
}
SANITIZE_PASSES="memcheck racecheck synccheck"   # ci/memcheck.sh's passes, in order
newest_ancestor() {  # newest_ancestor REV TEST: the newest ancestor of REV (REV excluded, every
  # parent's line) for which `TEST SHA` succeeds
  local sha
  for sha in $(git rev-list --max-count=500 "$1^@" 2>/dev/null); do
    if "$2" "$sha"; then echo "$sha"; return 0; fi
  done
  return 1
}
last_recorded() {  # last_recorded [REV]: the newest ancestor of REV (default HEAD) with a run
  # recorded here
  local m; m=$(machine)
  _has_run() { ls "$RESULTS/$m/${1:0:8}"-*.json >/dev/null 2>&1; }
  newest_ancestor "${1:-HEAD}" _has_run
}
measured_change() {  # measured_change [REV]: why REV (default HEAD) counts as a change of measured
  # code (gemm.track.codeid.MEASURED_BY) since its newest recorded ancestor; nothing (exit 1) if
  # it does not
  local rev=${1:-HEAD} paths prev
  paths=$(python3 -c 'from gemm.track import codeid; print(" ".join(codeid.MEASURED_BY))') ||
    { echo "codeid.MEASURED_BY unreadable"; return 0; }
  prev=$(last_recorded "$rev") || { echo "no recorded ancestor"; return 0; }
  git diff --quiet "$prev" "$rev" -- $paths && return 1
  echo "measured code changed since ${prev:0:10}"
}
last_memchecked() {  # the newest ancestor of HEAD that passed every pass here (its marker names
  # them: one from before racecheck and synccheck, memcheck alone, does not count)
  local m; m=$(machine)
  _passed_all() { grep -qx "# passes: $SANITIZE_PASSES" "$VERDICTS/$m/memcheck/$1" 2>/dev/null; }
  newest_ancestor HEAD _passed_all
}
