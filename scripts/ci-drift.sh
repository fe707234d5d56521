#!/usr/bin/env bash
# CI's drift check of one stack (.github/workflows/drift.yml, docs/ci.md): a refreshed
# preview of the stack and its entry stacks (docs/entry-stacks.md) that fails when the
# cluster no longer matches the state, an object changed or deleted by hand. It changes
# nothing (a preview writes no state); putting the objects back is a deliberate act, the
# up workflow started by hand with `converge`.
#   scripts/ci-drift.sh STACK    run in the project directory; exit 0 no drift, 1 drift or
#                                a failed preview (kns_cli/drift.py says which); the per-entry
#                                summary is build/drift-STACK.md
set -euo pipefail

stack=${1:?usage: scripts/ci-drift.sh STACK}
root=$(cd "$(dirname "$0")/.." && pwd)
py=${KNS_PYTHON:-$root/.venv/bin/python}
# The passphrase rule of every door (kns_cli/passphrase.py), before anything runs.
dev_passphrase=$(PYTHONPATH=$root "$py" -m kns_cli.passphrase "$stack" --as ci-drift) || exit 2
if [ -n "$dev_passphrase" ]; then
  export PULUMI_CONFIG_PASSPHRASE=$dev_passphrase
fi
out=build/drift-$stack
rm -rf "$out"
mkdir -p "$out"

failed=0
for each in $(PYTHONPATH=$root "$py" -m kns_cli.layout stacks "$stack"); do
  # shellcheck disable=SC2046  # an entry stack's --config-file, or nothing
  pulumi preview --stack "$each" $(PYTHONPATH=$root "$py" -m kns_cli.layout config "$each") --refresh \
    --json --show-sames --non-interactive --policy-pack "$root/policy" >"$out/$each.json" 2>"$out/$each.log" || failed=1
done
# Drift is a step that changes an object; a change of the stack's outputs alone is not (the
# platform digest covers the kubeconfig read, and this check reads with its own identity).
status=0
PYTHONPATH=$root "$py" -m kns_cli.drift "$out"/*.json || status=$?
if [ "$failed" = 1 ] && [ "$status" = 0 ]; then
  status=2
fi

{
  echo "## Drift of stack \`$stack\` (objects changed on the cluster since the last up)"
  echo
  "$py" "$root/scripts/preview-summary.py" "$out"/*.json --stack "$stack" || echo "(no summary: a preview produced no result)"
} >"build/drift-$stack.md"
cat "build/drift-$stack.md"
if [ "$status" = 1 ]; then
  echo "ci-drift: stack $stack has drifted: objects on the cluster differ from the state (above)." >&2
  echo "ci-drift: to put the objects back, run the up workflow by hand with converge (docs/ci.md)" >&2
  exit 1
elif [ "$status" != 0 ]; then
  echo "ci-drift: stack $stack could not be previewed (the engine's messages: $out/*.log)" >&2
  exit 1
fi
echo "ci-drift: stack $stack: no drift"
