#!/usr/bin/env bash
# Run Karpenter with its kwok cloud provider (karpenter-kwok, built by
# scripts/cluster-build.sh) against a cluster from scripts/cluster-up.sh:
#   scripts/karpenter-process.sh <state-dir> [--instance-types <file.json>]
#
# Applies the CRDs of the same module (NodePool, NodeClaim, KWOKNodeClass; from the bin
# dir's ../share/karpenter/crds) server-side and waits for them to be Established, creates
# the cluster-scoped KWOKNodeClass `default` (the stand-in for a cloud's node class, for
# NodePools' nodeClassRef {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}),
# then starts karpenter-kwok with the admin kubeconfig, leader election off, short batch
# windows (KNS_KARPENTER_BATCH_IDLE, default 1s; KNS_KARPENTER_BATCH_MAX, default 3s) and
# --instance-types (a JSON list in the format of the module's
# kwok/cloudprovider/instance_types.json, e.g. tests/fixtures/kwok-instance-types.json;
# default: the module's built-in 144 types). It waits until /readyz answers on the health
# port. The nodes Karpenter creates carry the annotation kwok.x-k8s.io/node=fake, so the
# cluster's kwok makes them Ready; a kube-scheduler binds the pods.
#
# Karpenter has no bind-address setting: its metrics and health ports (free ones, chosen
# now, in <state-dir>/cluster.env as KNS_KARPENTER_METRICS_PORT and
# KNS_KARPENTER_HEALTH_PORT) listen on all interfaces. It logs to
# <state-dir>/logs/karpenter.log and is recorded in <state-dir>/pids (as `karpenter`), so
# scripts/cluster-down.sh stops it (its environment names the state dir:
# KNS_CLUSTER_STATE). KNS_CLUSTER_TIMEOUT (default 180) bounds each wait; LOG_LEVEL
# (debug, info, error) and FEATURE_GATES are passed through to Karpenter.
set -euo pipefail
# shellcheck source=lib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"
ports_retry "${BASH_SOURCE[0]}" "$@"

log() { printf 'karpenter-process: %s\n' "$*" >&2; }
die() { printf 'karpenter-process: error: %s\n' "$*" >&2; exit 1; }
usage() { die "usage: scripts/karpenter-process.sh <state-dir> [--instance-types <file.json>]"; }

(($# >= 1)) || usage
state=$(cd "$1" 2>/dev/null && pwd) || die "no state dir $1"
shift
instance_types=
while (($#)); do
  case $1 in
    --instance-types) (($# >= 2)) || usage; instance_types=$(realpath "$2"); shift 2 ;;
    *) usage ;;
  esac
done
kubeconfig=$state/kubeconfig
[[ -r $kubeconfig && -r $state/cluster.env && -s $state/pids ]] ||
  die "$state has no running cluster (run scripts/cluster-up.sh $state)"
# shellcheck source=/dev/null
bin=${KNS_CLUSTER_BIN:-$(. "$state/cluster.env" && printf '%s' "$KNS_CLUSTER_BIN")}
[[ -x $bin/karpenter-kwok ]] || die "no karpenter-kwok in $bin (run scripts/cluster-build.sh)"
[[ -x $bin/kubectl ]] || die "no kubectl in $bin"
crd_dir=$(cd "$bin/../share/karpenter/crds" 2>/dev/null && pwd) ||
  die "no Karpenter CRDs in $bin/../share/karpenter/crds (run scripts/cluster-build.sh)"
timeout=${KNS_CLUSTER_TIMEOUT:-180}
for tool in curl python3 setsid; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not on PATH"
done
if [[ -n $instance_types ]]; then
  # Karpenter only logs a file it cannot read or parse, and then offers no instance type.
  python3 - "$instance_types" <<'PY' || die "bad instance-types file $instance_types"
import json, sys
try:
    with open(sys.argv[1]) as f:
        types = json.load(f)
except (OSError, ValueError) as e:
    sys.exit("karpenter-process: %s" % e)
if not isinstance(types, list) or not types or not all(
        isinstance(t, dict) and t.get("name") and t.get("offerings") and t.get("resources") for t in types):
    sys.exit("karpenter-process: %s: expected a non-empty list of {name, offerings, resources, ...}" % sys.argv[1])
PY
fi

component=karpenter
KNS_SCRIPT=karpenter-process
# shellcheck source=lib/process.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/process.sh"
process_not_running
kubectl=("$bin/kubectl" --kubeconfig="$kubeconfig")

# --- CRDs and the node class -------------------------------------------------------------
log "applying the Karpenter CRDs from $crd_dir ($(cat "$crd_dir/../version" 2>/dev/null || echo '?'))"
"${kubectl[@]}" apply --server-side --force-conflicts -f "$crd_dir" >/dev/null
crds=()
for f in "$crd_dir"/*.yaml; do
  crds+=("crd/$(basename "$f" .yaml | awk -F_ '{ print $2 "." $1 }')")
done
"${kubectl[@]}" wait --for=condition=Established --timeout="${timeout}s" "${crds[@]}" >/dev/null ||
  die "the Karpenter CRDs did not become Established"
"${kubectl[@]}" apply --server-side -f - >/dev/null <<'EOF'
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
EOF
log "CRDs established; KWOKNodeClass default applied"

# --- karpenter-kwok ------------------------------------------------------------------------
# It binds ":<port>" (all interfaces): check the ports are free there, not just on loopback.
read -r metrics_port health_port < <(free_ports 2 "")
args=(
  --disable-leader-election=true
  --metrics-port="$metrics_port" --health-probe-port="$health_port"
  --batch-idle-duration="${KNS_KARPENTER_BATCH_IDLE:-1s}" --batch-max-duration="${KNS_KARPENTER_BATCH_MAX:-3s}"
)
[[ -n $instance_types ]] && args+=(--instance-types-file-path="$instance_types")
log "starting $component (health on :$health_port, metrics on :$metrics_port${instance_types:+, instance types $instance_types})"
# KUBECONFIG is how it finds the API server (it has no --kubeconfig flag).
process_start KUBECONFIG="$kubeconfig" -- "$bin/karpenter-kwok" "${args[@]}"
process_ready "http://127.0.0.1:$health_port/readyz"
if err=$(grep -m1 'failed constructing instance types' "$log_file"); then
  kill -KILL -- "-$pid" 2>/dev/null || true
  printf '  | %s\n' "$err" >&2
  die "$component could not load the instance types${instance_types:+ of $instance_types}"
fi
printf 'KNS_KARPENTER_METRICS_PORT=%s\nKNS_KARPENTER_HEALTH_PORT=%s\n' "$metrics_port" "$health_port" >>"$state/cluster.env"
log "$component ready (pid $pid)"
