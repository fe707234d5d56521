#!/usr/bin/env bash
# Register fake Node objects, managed by the kwok of a cluster from scripts/cluster-up.sh,
# and wait until they are Ready:
#   scripts/cluster-nodes.sh <state-dir> <nodes.yaml>
#
# nodes.yaml (a list under `nodes:`, or a bare list):
#   nodes:
#   - name: vc-node            # with count: vc-node-1 .. vc-node-4; without: the name itself
#     count: 4
#     labels: {kns.example/pool: vcluster}          # optional
#     annotations: {}                               # optional
#     taints: [{key: k, value: v, effect: NoSchedule}]  # optional
#     capacity: {cpu: "16", memory: 64Gi, pods: "110", nvidia.com/gpu: "8"}
#     allocatable: {...}       # optional, defaults to capacity
# Every node gets the annotation kwok.x-k8s.io/node=fake (kwok manages exactly those), the
# label type=kwok and the usual kubernetes.io/{hostname,os,arch} labels. Applying the same
# file again is harmless (server-side apply; capacity is only set when a node is created).
# KNS_CLUSTER_TIMEOUT (default 180) bounds the wait for Ready.
set -euo pipefail

log() { printf 'cluster-nodes: %s\n' "$*" >&2; }
die() { printf 'cluster-nodes: error: %s\n' "$*" >&2; exit 1; }

(($# == 2)) || die "usage: scripts/cluster-nodes.sh <state-dir> <nodes.yaml>"
state=$(cd "$1" 2>/dev/null && pwd) || die "no state dir $1"
nodes_file=$2
[[ -r $nodes_file ]] || die "cannot read nodes file $nodes_file"
[[ -r $state/kubeconfig && -r $state/cluster.env ]] || die "$state has no cluster (run scripts/cluster-up.sh $1)"
bin=${KNS_CLUSTER_BIN:-$(. "$state/cluster.env" && printf '%s' "$KNS_CLUSTER_BIN")}
kubectl=("$bin/kubectl" --kubeconfig="$state/kubeconfig")
[[ -x $bin/kubectl ]] || die "no kubectl in $bin"
timeout=${KNS_CLUSTER_TIMEOUT:-180}

# shellcheck source=lib/python.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/python.sh"

manifest=$(mktemp "${TMPDIR:-/tmp}/kns-nodes.XXXXXX.json")
trap 'rm -f "$manifest"' EXIT
names=$("$py" - "$nodes_file" "$manifest" <<'PY'
import json, sys, yaml

src, out = sys.argv[1:3]
with open(src) as f:
    doc = yaml.safe_load(f)
entries = doc.get("nodes") if isinstance(doc, dict) else doc
if not isinstance(entries, list) or not entries:
    sys.exit("%s: expected a non-empty list of nodes (under `nodes:`)" % src)

def quantities(d, what, name):
    if not isinstance(d, dict) or not d:
        sys.exit("%s: node %s needs %s (cpu, memory, pods, ...)" % (src, name, what))
    return {str(k): str(v) for k, v in d.items()}

items, names = [], []
for e in entries:
    if not isinstance(e, dict) or not e.get("name"):
        sys.exit("%s: every entry needs a name: %r" % (src, e))
    count = e.get("count")
    node_names = [e["name"]] if count is None else ["%s-%d" % (e["name"], i) for i in range(1, int(count) + 1)]
    capacity = quantities(e.get("capacity"), "capacity", e["name"])
    allocatable = quantities(e.get("allocatable") or capacity, "allocatable", e["name"])
    capacity.setdefault("pods", "110")
    allocatable.setdefault("pods", capacity["pods"])
    for name in node_names:
        labels = {
            "type": "kwok",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
        }
        labels.update({str(k): str(v) for k, v in (e.get("labels") or {}).items()})
        annotations = {str(k): str(v) for k, v in (e.get("annotations") or {}).items()}
        annotations["kwok.x-k8s.io/node"] = "fake"
        annotations["node.alpha.kubernetes.io/ttl"] = "0"
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {},
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                "phase": "Running",
            },
        }
        if e.get("taints"):
            node["spec"]["taints"] = e["taints"]
        items.append(node)
        names.append(name)
if len(set(names)) != len(names):
    sys.exit("%s: duplicate node names" % src)
with open(out, "w") as f:
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
print(" ".join(names))
PY
) || die "invalid nodes file $nodes_file"

log "registering nodes: $names"
"${kubectl[@]}" apply --server-side --field-manager=kns-cluster-nodes -f "$manifest" >&2
read -ra node_list <<<"$names"
start=$SECONDS
if ! "${kubectl[@]}" wait --for=condition=Ready --timeout="${timeout}s" "${node_list[@]/#/node/}" >&2; then
  "${kubectl[@]}" get nodes -o wide >&2 || true
  if [[ -r $state/logs/kwok.log ]]; then
    printf 'cluster-nodes: last lines of %s:\n' "$state/logs/kwok.log" >&2
    tail -n 40 "$state/logs/kwok.log" | sed 's/^/  | /' >&2
  fi
  die "nodes not Ready after ${timeout}s"
fi
log "${#node_list[@]} nodes Ready in $((SECONDS - start))s"
