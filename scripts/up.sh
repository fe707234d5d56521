#!/usr/bin/env bash
# The main job: run a stack (default `dev`) through the real Pulumi engine, offline.
#   scripts/up.sh up       pulumi up --yes, then say where the manifests are
#   scripts/up.sh preview  pulumi preview --diff
#   scripts/up.sh outputs  pulumi stack output --json (make outputs, ./kns outputs)
# A stack with kns:state.entryStacks (docs/entry-stacks.md) is several Pulumi stacks: the
# stack (its platform) first, then the entry stacks side by side (KNS_PARALLEL_STACKS),
# those unchanged since their last update skipped (KNS_FULL=true runs them all), with the
# stack's config; outputs are theirs merged. Entries the config puts in another stack stop it before anything runs
# (./kns restack moves them).
# up and preview print the per-entry summary (kns_cli/engine_run.py, docs/cli.md "What
# `make up` and `make preview` print"); the engine's own output goes to build/logs/, and
# VERBOSE=1 (or `scripts/up.sh up|preview --diff`) shows it on the terminal too.
# Both run the policy pack of policy/ (docs/policy.md); KNS_POLICY_CONFIG names a
# --policy-pack-config file. KNS_REFRESH=true refreshes first: objects changed or deleted
# by hand show as drift (preview) and are restored (up) (docs/operations.md).
# The engine runs with the settings of scripts/lib/engine.sh (each one overridable).
# Overridable: KNS_STACK, PULUMI_BACKEND_URL (default: a file:// backend in .pulumi-state),
# PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE (the dev passphrase for the dev
# stack only; any other stack stops, before anything runs, until one is set: kns_cli/passphrase.py),
# KNS_PROJECT_DIR (default: this checkout): the Pulumi project run, its Pulumi.yaml, stack
# files and default backend (./kns outputs --project-dir); the scripts and kns_cli are this checkout's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "${KNS_PROJECT_DIR:-$root}"

action=${1:-up}
stack=${KNS_STACK:-dev}
py=${KNS_PYTHON:-$root/.venv/bin/python}
# kns_cli from this checkout, whichever project is run.
kns_py() { PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$py" "$@"; }
verbose=()
if [ "${VERBOSE:-}" = 1 ] || [ "${2:-}" = --diff ]; then
  verbose=(--verbose)
fi

# The passphrase rule first: a stack that needs one stops here, before the toolchain is built
# or a stack created.
dev_passphrase=$(kns_py -m kns_cli.passphrase "$stack" --as up) || exit 2
if [ -n "$dev_passphrase" ]; then
  export PULUMI_CONFIG_PASSPHRASE=$dev_passphrase
fi
# Hints name the stack unless it is dev (`KNS_STACK=site make outputs`).
hint() { kns_py -m kns_cli.hint "$stack" "$@"; }

export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
bin=$(bash "$root/scripts/toolchain.sh")
export PATH="$bin:$PATH"
# shellcheck source=lib/engine.sh
. "$root/scripts/lib/engine.sh"

if [ -z "${PULUMI_BACKEND_URL:-}" ]; then
  mkdir -p .pulumi-state
  export PULUMI_BACKEND_URL="file://$PWD/.pulumi-state"
fi

# A new stack is created by kns_cli/fullrun.py once its config passes the checks (nothing is
# created for a config that cannot run); any other failure to select (a backend a killed run
# left unreadable) is shown as it is, with the command that repairs it, never answered with
# an init that would fail on the stack's lock.
if ! selected=$(pulumi stack select "$stack" --non-interactive 2>&1 >/dev/null); then
  if [[ $selected != *"no stack named"* ]] || [ "$action" = outputs ]; then
    echo "$selected" >&2
    echo "up: cannot select stack $stack on $PULUMI_BACKEND_URL (after an interrupted run: $(hint make recover), docs/operations.md)" >&2
    exit 1
  fi
fi

refresh=()
if [ "${KNS_REFRESH:-false}" = true ]; then
  refresh=(--refresh)
fi
policy=(--policy-pack policy)
if [ -n "${KNS_POLICY_CONFIG:-}" ]; then
  policy+=(--policy-pack-config "$KNS_POLICY_CONFIG")
fi

case "$action" in
  up)
    # Entries where the config says, the stack, then its entry stacks side by side (created
    # when new), unchanged ones skipped: kns_cli/fullrun.py, in one process.
    kns_py -m kns_cli.fullrun up --stack "$stack" ${verbose[@]+"${verbose[@]}"} -- --yes --non-interactive --diff \
      ${refresh[@]+"${refresh[@]}"} "${policy[@]}"
    render_dir=$(pulumi config get --stack "$stack" --path kns:cluster.renderDir 2>/dev/null || true)
    if [ -n "$render_dir" ] && [ -d "$render_dir" ]; then
      echo "Manifests: $(find "$render_dir" -name '*.yaml' | wc -l) objects in $render_dir"
    else
      echo "Stack $stack applied to its cluster."
    fi
    echo "Outputs: $(hint make outputs) (namespaces, schedules, packingSchedulerName, nodePools; the backend and passphrase of make up)"
    ;;
  outputs)
    kns_py -m kns_cli.layout outputs "$stack"
    ;;
  preview)
    kns_py -m kns_cli.fullrun preview --stack "$stack" ${verbose[@]+"${verbose[@]}"} -- --diff --non-interactive \
      ${refresh[@]+"${refresh[@]}"} "${policy[@]}"
    ;;
  *)
    echo "usage: scripts/up.sh up|preview [--diff] | outputs" >&2
    exit 2
    ;;
esac
