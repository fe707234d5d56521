#!/usr/bin/env bash
# CI's apply of one stack (.github/workflows/up.yml, docs/ci.md).
#   scripts/ci-up.sh STACK BASE     a push: what changed between BASE and HEAD decides
#   scripts/ci-up.sh STACK --converge   the nightly (or by hand) run: a full, refreshed up
# After a push, `./kns changed` compares the stack at BASE and HEAD: only entries changed
# (added, changed, removed) -> `./kns up` of those entries; anything shared changed -> the
# full `make up`; nothing -> nothing. A full `make up` is also what runs when BASE cannot be
# compared (a new branch, a force-push, an invalid config at BASE) or the targeted up is
# refused (exit 3: something shared differs from what the last full up recorded, e.g. after
# a failed full up). --converge runs `make up` with KNS_REFRESH=true: objects changed by
# hand are read back and restored (the drift report is the step before it). Every full up
# runs `./kns restack` first: a merged change of kns:state.entryStacks moves the entries'
# state to their new stacks (state only; nothing to move is the usual case), which
# `make up` would otherwise refuse (docs/entry-stacks.md).
# KNS and MAKE name the commands (tests/test_workflows.py runs this with stand-ins).
set -euo pipefail

stack=${1:?usage: scripts/ci-up.sh STACK BASE|--converge}
base=${2:-}
kns=${KNS:-./kns}
make=${MAKE:-make}
refused=3

full() {
  echo "ci-up: full up of stack $stack: $1"
  "$kns" restack --stack "$stack"
  KNS_STACK=$stack "$make" up
}

if [ "$base" = --converge ]; then
  echo "ci-up: full up of stack $stack with refresh: converging state and cluster"
  "$kns" restack --stack "$stack"
  KNS_STACK=$stack KNS_REFRESH=true "$make" up
  exit 0
fi
if [ -z "$base" ] || [ -z "${base//0/}" ]; then
  full "no earlier commit to compare with"
  exit 0
fi
if ! plan=$("$kns" changed --stack "$stack" "$base" HEAD --format up-plan); then
  full "./kns changed could not compare $base with HEAD (above)"
  exit 0
fi
read -r -a words <<<"$plan"
case ${words[0]} in
  none)
    echo "ci-up: stack $stack did not change between $base and HEAD: nothing to apply"
    ;;
  full)
    full "${plan#full }"
    ;;
  targeted)
    echo "ci-up: targeted up of stack $stack: ${words[*]:1}"
    status=0
    "$kns" up --stack "$stack" "${words[@]:1}" || status=$?
    if [ "$status" = "$refused" ]; then
      full "the targeted up was refused (above)"
    elif [ "$status" != 0 ]; then
      exit "$status"
    fi
    ;;
  *)
    echo "ci-up: unexpected plan from ./kns changed: $plan" >&2
    exit 1
    ;;
esac
