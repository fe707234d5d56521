#!/usr/bin/env bash
# Print the stages kwok plays on the local control plane (scripts/cluster-up.sh), composed
# from kwok's module stages (the file scripts/cluster-build.sh writes, given as $1) and the
# project's. tests/test_stage_vs_wait.py runs kwok's own stage code on this same output.
#
# The module's pod-complete completes every running Job pod at once; a primed pod (init
# container kns-wait) completes at its start time instead, and a pod annotated
# kwok.x-k8s.io/run-for that long after it started running: two requirements are added to
# pod-complete's selector, before its first one and with the same indentation (kwok's NotIn
# also matches a pod without init containers; its DoesNotExist an empty annotation too),
# then come the primed and the run-for stages, and the one that fails worker 1 of a Job
# annotated kns.io/e2e-fail-worker. A reservation's pods (label kns.io/reservation,
# docs/reservations.md) are not completed either: its holder's container is pause, which
# runs until it is deleted, and its switch's pod is run, and ended with its exit code, by
# the test (kns_testing/reservations.py).
set -euo pipefail
module_stages=${1:?usage: scripts/kwok/stages.sh MODULE_STAGES.yaml}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
own=("$here/pod-complete-primed.yaml" "$here/pod-complete-after.yaml" "$here/pod-fail-worker.yaml")
for f in "$module_stages" "${own[@]}"; do
  [[ -r $f ]] || { echo "kwok/stages.sh: cannot read $f" >&2; exit 1; }
done
awk '
  /^---[[:space:]]*$/ { in_stage = 0; in_exprs = 0 }
  /^[[:space:]]*name:[[:space:]]*["\047]?pod-complete["\047]?[[:space:]]*$/ && !done { in_stage = 1 }
  in_stage && /^[[:space:]]*matchExpressions:[[:space:]]*$/ { in_exprs = 1; print; next }
  in_exprs && /^[[:space:]]*- / {
    match($0, /^[[:space:]]*/)
    pad = substr($0, 1, RLENGTH)
    print pad "- key: \047.spec.initContainers.[].name\047"
    print pad "  operator: \047NotIn\047"
    print pad "  values:"
    print pad "  - \047kns-wait\047"
    print pad "- key: \047.metadata.annotations[\"kwok.x-k8s.io/run-for\"]\047"
    print pad "  operator: \047DoesNotExist\047"
    print pad "- key: \047.metadata.labels[\"kns.io/reservation\"]\047"
    print pad "  operator: \047DoesNotExist\047"
    in_stage = 0; in_exprs = 0; done = 1
  }
  { print }
  END { if (!done) { print "kwok/stages.sh: no pod-complete stage with a selector in the module stages" > "/dev/stderr"; exit 3 } }
' "$module_stages"
for f in "${own[@]}"; do
  printf -- '---\n# scripts/kwok/%s (scripts/kwok/stages.sh)\n' "${f##*/}"
  sed '/^---[[:space:]]*$/d' "$f"
done
