#!/usr/bin/env bash
# CI's apply of one stack (.github/workflows/up.yml, docs/ci.md).
#   scripts/ci-up.sh STACK              everything merged since the stack's last complete apply
#   scripts/ci-up.sh STACK --converge   a full, refreshed up (started by hand: objects changed
#                                       on the cluster are put back; the drift check finds them)
# What a run applies starts from the commit the stack records as applied (`./kns applied`, a
# stack tag), never from the push's "before": a run cancelled by a newer merge, or one that
# failed, records nothing, so the next run applies its changes too. `./kns changed` compares
# the stack at the recorded commit and HEAD: only entries changed (added, changed, removed)
# -> `./kns up` of those entries; anything shared changed -> the full `make up`; nothing ->
# nothing. The full `make up` also runs when there is no record yet, or the recorded commit
# is not an ancestor of HEAD (history rewritten), or cannot be compared (an invalid config
# there), or the targeted up is refused (exit 3: something shared differs from what the
# last full up recorded, e.g. after a failed full up). A HEAD that the record already
# contains (a re-run of an older run) applies nothing: it never rolls back. Once everything
# applied, HEAD is recorded. Every full up runs `./kns restack` first: a merged change of
# kns:state.entryStacks moves the entries' state to their new stacks (state only), which
# `make up` would otherwise refuse (docs/entry-stacks.md).
# KNS and MAKE name the commands (tests run this with stand-ins and with the real ones).
set -euo pipefail

stack=${1:?usage: scripts/ci-up.sh STACK [--converge]}
mode=${2:-}
kns=${KNS:-./kns}
make=${MAKE:-make}
refused=3
head=$(git rev-parse --verify HEAD)

recorded() {
  "$kns" applied --stack "$stack" --record "$head"
}

full() {
  echo "ci-up: full up of stack $stack: $1"
  "$kns" restack --stack "$stack"
  KNS_STACK=$stack "$make" up
  recorded
}

if [ "$mode" = --converge ]; then
  echo "ci-up: full up of stack $stack with refresh: converging state and cluster"
  "$kns" restack --stack "$stack"
  KNS_STACK=$stack KNS_REFRESH=true "$make" up
  recorded
  exit 0
elif [ -n "$mode" ]; then
  echo "usage: scripts/ci-up.sh STACK [--converge]" >&2
  exit 2
fi

applied=$("$kns" applied --stack "$stack")
if [ -z "$applied" ]; then
  full "no complete apply of it is recorded"
  exit 0
fi
if [ "$applied" = "$head" ]; then
  echo "ci-up: stack $stack has applied $head already: nothing to apply"
  exit 0
fi
if ! git cat-file -e "$applied^{commit}" 2>/dev/null; then
  full "its last applied commit $applied is not in this clone (history rewritten?)"
  exit 0
fi
if git merge-base --is-ancestor "$head" "$applied"; then
  echo "ci-up: stack $stack has applied $applied, which contains $head: nothing to apply (an older run never rolls back)"
  exit 0
fi
if ! git merge-base --is-ancestor "$applied" "$head"; then
  full "its last applied commit $applied is not an ancestor of $head (history rewritten)"
  exit 0
fi
if ! plan=$("$kns" changed --stack "$stack" "$applied" "$head" --format up-plan); then
  full "./kns changed could not compare $applied with $head (above)"
  exit 0
fi
read -r -a words <<<"$plan"
case ${words[0]} in
  none)
    echo "ci-up: stack $stack did not change between $applied and $head: nothing to apply"
    recorded
    ;;
  full)
    full "${plan#full }"
    ;;
  targeted)
    echo "ci-up: targeted up of stack $stack since $applied: ${words[*]:1}"
    status=0
    "$kns" up --stack "$stack" "${words[@]:1}" || status=$?
    if [ "$status" = "$refused" ]; then
      full "the targeted up was refused (above)"
    elif [ "$status" != 0 ]; then
      echo "ci-up: the targeted up failed: nothing recorded, so the next run applies these entries again" >&2
      exit "$status"
    else
      recorded
    fi
    ;;
  *)
    echo "ci-up: unexpected plan from ./kns changed: $plan" >&2
    exit 1
    ;;
esac
