#!/usr/bin/env bash
# A pull request's preview of one stack, as its merge would change it, creating nothing in
# the shared backend (docs/ci.md):
#
#   scripts/ci-preview.sh STACK BASE     BASE: the pull request's base commit
#
# A pull request is not reviewed yet, so it must not write to the state CI applies from:
# the states of the stack and its entry stacks (docs/entry-stacks.md) are read from
# PULUMI_BACKEND_URL (`pulumi stack export`, a read) and imported into a scratch file://
# backend in a temporary directory, with the same passphrase; a stack the shared backend
# does not have starts there empty, so its preview is all creates. When kns:state (the
# layout) differs between BASE and HEAD, `./kns restack` moves the entries in the scratch
# copy first, as the merge's `up` does, so the preview shows what the merge does (moves,
# no deletions) and the summary lists the moves. Then each Pulumi stack is previewed with
# the policy pack: `--diff` into build/preview-STACK.log, `--json --show-sames` into
# build/preview-STACK/<stack>.json, and build/summary-STACK.md gets the markdown summary:
# the moves, scripts/preview-summary.py, and `./kns explain` of each entry the change
# adds or changes. Exit 1 when any step failed; the summary is written anyway. The JSON
# previews hold secret inputs in plaintext (the log masks them): they are not for publishing.
set -uo pipefail

stack=${1:?usage: scripts/ci-preview.sh STACK BASE}
base=${2:?usage: scripts/ci-preview.sh STACK BASE}
: "${PULUMI_BACKEND_URL:?the shared backend, read only}"
kns=${KNS:-./kns}
python=${PYTHON:-python}
# The passphrase rule of every door (kns_cli/passphrase.py), before anything runs.
dev_passphrase=$("$python" -m kns_cli.passphrase "$stack" --as ci-preview) || exit 2
if [ -n "$dev_passphrase" ]; then
  export PULUMI_CONFIG_PASSPHRASE=$dev_passphrase
fi
here=$(dirname "$0")

log=build/preview-$stack.log
json_dir=build/preview-$stack
summary=build/summary-$stack.md
mkdir -p "$json_dir"
rm -f "$json_dir"/*.json
: > "$log"
scratch_dir=$(mktemp -d "${TMPDIR:-/tmp}/kns-preview-XXXXXX")
trap 'rm -rf "$scratch_dir"' EXIT
mkdir "$scratch_dir/state"
scratch="file://$scratch_dir/state"
status=0
problems=()   # one markdown line each, at the top of the summary
moves=""      # the dry-run's lines

say() { echo "ci-preview: $*" >&2; }
fail() { say "$*"; problems+=("$*"); status=1; }
in_scratch() { PULUMI_BACKEND_URL=$scratch "$@"; }

# The stacks the preview runs (HEAD's layout), and those the shared backend holds (BASE's
# layout may have more entry stacks, whose entries a restack moves).
mapfile -t stacks < <("$python" -m kns_cli.layout stacks "$stack") || true
if [ "${#stacks[@]}" -eq 0 ]; then
  fail "cannot list the Pulumi stacks of \`$stack\` (\`python -m kns_cli.layout stacks\`)"
fi
if ! existing=$("$python" -c '
import os, sys
from pathlib import Path
from kns_cli.layout import existing_stacks
print("\n".join(existing_stacks(Path.cwd(), sys.argv[1], os.environ)))' "$stack"); then
  fail "cannot list the stacks of the shared backend"
  existing=""
fi
copies=("${stacks[@]}")
for each in $existing; do
  [[ " ${copies[*]} " == *" $each "* ]] || copies+=("$each")
done

# The scratch backend: every stack selected or created (an entry stack with no config file
# of its own), and the shared state imported where there is one.
if [ "${#copies[@]}" -gt 0 ] && ! in_scratch "$python" -m kns_cli.layout init "${copies[@]}"; then
  fail "cannot create the stacks in the scratch backend"
fi
for each in "${copies[@]}"; do
  if [[ $'\n'"$existing"$'\n' != *$'\n'"$each"$'\n'* ]]; then
    say "$each: not in the shared backend; previewed from an empty state"
    continue
  fi
  if ! pulumi stack export --stack "$each" --non-interactive --file "$scratch_dir/$each.json"; then
    fail "cannot read the state of \`$each\` from the shared backend"
  elif ! in_scratch pulumi stack import --stack "$each" --non-interactive --file "$scratch_dir/$each.json"; then
    fail "cannot import the state of \`$each\` into the scratch backend"
  fi
done

# What the change adds, changes and reshapes, as validated config (offline).
report=$("$kns" changed --project-dir . --stack "$stack" "$base" HEAD --format json 2>"$scratch_dir/changed.err")
compared=$?
if [ "$compared" -ne 0 ]; then
  say "kns changed could not compare $base with HEAD: $(cat "$scratch_dir/changed.err")"
  report='{}'
fi
field() { "$python" -c 'import json, sys; print(" ".join(json.loads(sys.argv[1]).get(sys.argv[2], [])))' "$report" "$1"; }
added=$(field added)
changed=$(field changed)

# A changed layout: the moves the merge's `up` will make, made here in the scratch copy.
# kns:state as each commit's stack file writes it (`./kns changed` does not compare it).
layout_at() {
  git show "$1:./Pulumi.$stack.yaml" 2>/dev/null | "$python" -c '
import json, sys, yaml
document = yaml.safe_load(sys.stdin.read() or "{}") or {}
print(json.dumps((document.get("config") or {}).get("kns:state"), sort_keys=True))'
}
if [ "$status" -eq 0 ] && [ "$(layout_at "$base")" != "$(layout_at HEAD)" ]; then
  if ! moves=$(in_scratch "$kns" restack --project-dir . --stack "$stack" --dry-run 2>"$scratch_dir/restack.err"); then
    fail "\`./kns restack --dry-run\` refused the layout: $(tail -n 5 "$scratch_dir/restack.err")"
    moves=""
  elif [[ "$moves" == *"would move "*" from "* ]] && ! in_scratch "$kns" restack --project-dir . --stack "$stack" >&2; then
    fail "\`./kns restack\` failed in the scratch backend"
  fi
fi

ran=false
if [ "$status" -eq 0 ]; then
  ran=true
  for each in "${stacks[@]}"; do
    # shellcheck disable=SC2046  # an entry stack's --config-file, or nothing
    if ! in_scratch pulumi preview --stack "$each" $("$python" -m kns_cli.layout config "$each") --diff \
        --non-interactive --policy-pack policy 2>&1 | tee -a "$log"; then
      fail "the preview of \`$each\` failed; its errors are below and in the log"
    fi
    # shellcheck disable=SC2046
    in_scratch pulumi preview --stack "$each" $("$python" -m kns_cli.layout config "$each") --json --show-sames \
      --non-interactive --policy-pack policy > "$json_dir/$each.json" || status=1
  done
fi

{
  if [ "${#problems[@]}" -gt 0 ]; then
    echo "## Preview of stack \`$stack\`: failed$([ "$ran" = true ] || echo ' before the engine ran')"
    echo
    printf -- '- %s\n' "${problems[@]}"
    if grep -q '^error: ' "$log"; then
      echo
      echo '```text'
      grep '^error: ' "$log" | head -n 20
      echo '```'
    fi
    echo
  fi
  shopt -s nullglob
  previews=()
  for each in "$json_dir"/*.json; do  # a preview that could not start writes `{}`: no summary of it
    grep -q '"steps"\|"diagnostics"' "$each" && previews+=("$each")
  done
  if [ "${#previews[@]}" -gt 0 ]; then
    "$python" "$here/preview-summary.py" "${previews[@]}" --stack "$stack" --log "$log" || status=1
  fi
  if [ -n "$moves" ]; then
    echo
    echo "### Layout change (\`kns:state.entryStacks\`): state moves, nothing on the cluster"
    echo
    echo "The merge's \`up\` runs \`./kns restack\` first; this preview made the same moves in a scratch copy"
    echo "of the state, so the tables above show the stacks after them:"
    echo
    echo '```text'
    echo "$moves"
    echo '```'
  fi
  if [ "$compared" -ne 0 ]; then
    echo
    echo "**Changed entries:** \`./kns changed\` could not compare \`${base:0:12}\` with HEAD (its message is in the job log)."
  elif [ -n "$added$changed" ]; then
    echo
    echo "### What the changed entries ask"
    echo
    echo "\`./kns explain\` of each entry this pull request adds or changes: pool, GPUs, image, privilege, queue,"
    echo "reservation (read offline from the config: no secret is decrypted)."
    for entry in $added $changed; do
      echo
      echo "#### \`$entry\` ($([[ " $added " == *" $entry "* ]] && echo added || echo changed))"
      echo
      echo '```text'
      env -u PULUMI_CONFIG_PASSPHRASE -u PULUMI_BACKEND_URL "$kns" explain --project-dir . --stack "$stack" "$entry" 2>&1 \
        | sed '/^stack .*: [0-9]* entr/,/^$/d' || status=1
      echo '```'
    done
  fi
} > "$summary"
say "summary in $summary, diff log in $log (exit $status)"
exit "$status"
