#!/usr/bin/env bash
# CI's drift check of one stack (.github/workflows/drift.yml, docs/ci.md): a refreshed
# preview of the stack and its entry stacks (docs/entry-stacks.md) that fails when the
# cluster no longer matches the state, an object changed or deleted by hand. It changes
# nothing (a preview writes no state); putting the objects back is a deliberate act, the
# up workflow started by hand with `converge`.
#   scripts/ci-drift.sh STACK    run in the project directory; exit 0 no drift, 1 drift or
#                                a failed preview; the per-entry summary is build/drift-STACK.md
set -euo pipefail

stack=${1:?usage: scripts/ci-drift.sh STACK}
root=$(cd "$(dirname "$0")/.." && pwd)
py=${KNS_PYTHON:-$root/.venv/bin/python}
out=build/drift-$stack
rm -rf "$out"
mkdir -p "$out"

status=0
for each in $(PYTHONPATH=$root "$py" -m kns_cli.layout stacks "$stack"); do
  # shellcheck disable=SC2046  # an entry stack's --config-file, or nothing
  if ! pulumi preview --stack "$each" $(PYTHONPATH=$root "$py" -m kns_cli.layout config "$each") --refresh \
    --expect-no-changes --json --show-sames --non-interactive --policy-pack "$root/policy" \
    >"$out/$each.json" 2>"$out/$each.log"; then
    status=1
  fi
done

{
  echo "## Drift of stack \`$stack\` (objects changed on the cluster since the last up)"
  echo
  "$py" "$root/scripts/preview-summary.py" "$out"/*.json --stack "$stack"
} >"build/drift-$stack.md"
cat "build/drift-$stack.md"
if [ "$status" != 0 ]; then
  echo "ci-drift: stack $stack has drifted or could not be previewed (above; the engine's messages in $out/*.log)." >&2
  echo "ci-drift: to put the objects back, run the up workflow by hand with converge (docs/ci.md)" >&2
  exit 1
fi
echo "ci-drift: stack $stack: no drift"
