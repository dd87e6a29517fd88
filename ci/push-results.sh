#!/usr/bin/env bash
# Commit this job's recorded files and push them to main without losing anyone else's:
#   bash ci/push-results.sh [-m MESSAGE] PATH...     (e.g. results/h200 verdicts/h200)
# The GPU jobs of a fleet (one per GPU model, and backfill shards) push to one branch at once.
# Each job writes only its own paths (results/<machine>/, verdicts/<machine>/: one directory
# per machine, one file per commit), so a rebase onto what another job pushed first cannot
# conflict there. Two files are shared and derived: results/benchmarks.json (the suite's
# definitions, which asv rewrites in every run) and README.md (the results table). A rebase
# that stops on them takes the branch's version, and after every rebase both are written
# again from the merged tree: benchmarks.json from the suite (asv_runner's discovery of
# benchmarks/, the same definitions asv writes; gemm.record.migrate.discovered_benchmarks)
# and the README's table by `gemm readme` from the merged results/. Both are functions of the
# tree, so two jobs write the same bytes and neither undoes the other. A conflict anywhere
# else aborts (exit 3): it would mean two jobs wrote the same file.
# Loop: fetch, rebase, regenerate, push (never forced); a rejected push (someone pushed in
# between) waits PUSH_BACKOFF_S (default 3) x 2^(attempt-1) s plus jitter and tries again, up
# to PUSH_ATTEMPTS (default 6). PUSH_REMOTE (origin), PUSH_BRANCH (main); PUSH_REGEN=0 skips
# the regeneration. Exit 0 when pushed or nothing to push, 1 when every attempt failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
msg="Record results [skip ci]"
if [ "${1:-}" = -m ]; then msg=$2; shift 2; fi
[ $# -gt 0 ] || { echo "push: which paths? (e.g. results/h200 verdicts/h200)" >&2; exit 2; }
remote=${PUSH_REMOTE:-origin} branch=${PUSH_BRANCH:-main}
attempts=${PUSH_ATTEMPTS:-6} backoff=${PUSH_BACKOFF_S:-3}
SHARED=(results/benchmarks.json README.md)
git config user.name > /dev/null || git config user.name "gemm-bot"
git config user.email > /dev/null || git config user.email "gemm-bot@users.noreply.github.com"

shared() { for f in "${SHARED[@]}"; do [ -e "$f" ] && echo "$f"; done; }
is_shared() { local f; for f in "${SHARED[@]}"; do [ "$1" = "$f" ] && return 0; done; return 1; }
regenerate() {  # the shared files from the merged tree (the same bytes in every job)
  [ "${PUSH_REGEN:-1}" = 1 ] || return 0
  if [ -d benchmarks ] && [ -f results/benchmarks.json ]; then
    python3 - <<'PY' || echo "push: results/benchmarks.json not regenerated (kept as merged)"
import json, os
from pathlib import Path
from gemm.record.migrate import discovered_benchmarks
p = Path("results/benchmarks.json")
new = json.dumps(discovered_benchmarks(Path("benchmarks")), indent=1)
if p.read_text() != new:
    tmp = p.with_name(p.name + ".regen.tmp")
    tmp.write_text(new)
    os.replace(tmp, p)
PY
  fi
  if [ -f README.md ] && grep -q '<!-- results:begin -->' README.md && [ -d results ]; then
    python3 -m gemm readme --results results > /dev/null 2>&1 ||
      echo "push: README.md's table not regenerated (gemm readme failed)"
  fi
}
resolve() {  # a stopped rebase: shared files take the branch's version; anything else aborts
  local f n=0
  while [ -d "$(git rev-parse --git-path rebase-merge)" ] || [ -d "$(git rev-parse --git-path rebase-apply)" ]; do
    n=$((n + 1))
    [ $n -le 100 ] || { echo "push: the rebase does not end; giving up" >&2; git rebase --abort; return 3; }
    for f in $(git diff --name-only --diff-filter=U); do
      if ! is_shared "$f"; then
        echo "push: $f conflicts with what another job pushed; not a shared file: giving up" >&2
        git rebase --abort; return 3
      fi
      git checkout --ours -- "$f" 2>/dev/null || git checkout "$up" -- "$f"
      git add -- "$f"
      echo "push: $f: took the branch's version (written again below)"
    done
    if ! GIT_EDITOR=true git rebase --continue > /dev/null 2>&1 &&
       [ -z "$(git diff --name-only --diff-filter=U)" ]; then
      git rebase --skip > /dev/null 2>&1   # the commit holds nothing the branch lacks
    fi
  done
}

git add -A -- "$@"
mapfile -t sh < <(shared)
[ ${#sh[@]} -gt 0 ] && git add -- "${sh[@]}"
git diff --cached --quiet || git commit -q -m "$msg"
for attempt in $(seq 1 "$attempts"); do
  if git fetch -q "$remote" "$branch"; then
    up=$(git rev-parse FETCH_HEAD)
    if ! git rebase -q --autostash "$up" > /dev/null 2>&1; then
      resolve || exit $?
    fi
    regenerate
    [ ${#sh[@]} -gt 0 ] && git add -- "${sh[@]}"
    if ! git diff --cached --quiet; then
      if [ "$(git rev-parse HEAD)" = "$up" ]; then git commit -q -m "$msg"; else git commit -q --amend --no-edit; fi
    fi
    if [ "$(git rev-parse HEAD)" = "$up" ]; then
      echo "push: nothing to push ($branch already has it)"; exit 0
    fi
    if git push -q "$remote" "HEAD:refs/heads/$branch"; then
      echo "push: $(git log -1 --format=%h) on $remote/$branch (attempt $attempt)"; exit 0
    fi
  fi
  wait_s=$(( backoff * (1 << (attempt - 1)) + RANDOM % (backoff + 1) ))
  echo "push: attempt $attempt of $attempts rejected; again in $wait_s s"
  [ "$attempt" -lt "$attempts" ] && sleep "$wait_s"
done
echo "push: gave up after $attempts attempts; the results are still committed here ($(git log -1 --format=%h))" >&2
exit 1
