#!/usr/bin/env bash
# Run Kueue's manager (kueue, built by scripts/cluster-build.sh) as a process against a
# cluster from scripts/cluster-up.sh:
#   scripts/kueue-process.sh <state-dir> [--frameworks <fw>[,<fw>...]] [--config-extra <file.yaml>]
#
# What it sets up, in order (files under <state-dir>/kueue/):
# - the CRDs of the same module (from the bin dir's ../share/kueue/crds), applied
#   server-side, Established; the ones upstream serves through its conversion webhook
#   (../share/kueue/crd-patches) get that webhook at the process's URL (crds/);
# - namespace kueue-system (Kueue's own; jobs there and in kube-system are not managed);
# - a self-signed certificate for 127.0.0.1 (SAN IP:127.0.0.1), certs/tls.{crt,key};
# - config.yaml, a Configuration (config.kueue.x-k8s.io/v1beta2): internal certificate
#   management and leader election off, the webhook server on 127.0.0.1:<free port> with
#   certs/, metrics off (bindAddress "0"), health probes on 127.0.0.1:<free port>,
#   manageJobsWithoutQueueName false (only jobs with the kueue.x-k8s.io/queue-name label),
#   integrations.frameworks from --frameworks (default batch/job); with --config-extra,
#   that file's top-level fields are added to it (a YAML mapping; a field this script
#   writes itself is refused): the fields the program owns, as it renders them
#   (kns_testing/kueue.py start_kueue, e.g. waitForPodsReady from
#   kns:queueing.waitForPodsReady, docs/distributed.md), or `multiKueue: {...}` for a
#   MultiKueue manager (kns_testing/multicluster.py, docs/multicluster-notes.md);
# - the metrics certificate Kueue loads from the fixed path /etc/kueue/metrics/certs even
#   with metrics off (KNS_KUEUE_METRICS_CERTS): `namespace` (the default when running as
#   root and `unshare -m` works) runs it in a private mount namespace where certs/ is
#   bind-mounted there (over a private overlay of /etc when the path does not exist), so
#   the host's /etc is untouched; `files` copies certs/ to that path on the host (root, or
#   a writable /etc/kueue);
# - kueue --config=config.yaml --kubeconfig=<state-dir>/kubeconfig
#   --feature-gates=VisibilityOnDemand=false[,$KNS_KUEUE_FEATURE_GATES], waited for on
#   /readyz (which includes the webhook server);
# - webhooks.yaml: the module's webhook configurations (../share/kueue/webhook-manifests.yaml)
#   with every clientConfig.service turned into url https://127.0.0.1:<port><path> and
#   caBundle the certificate, renamed kueue-process-{mutating,validating}-webhook-configuration;
#   only the webhooks of Kueue's own API and of the enabled frameworks are registered (the
#   others are no-ops in the manager, and the pod, deployment and statefulset ones, with
#   failurePolicy Fail, would make every such object of the cluster depend on this process),
#   with upstream's namespaceSelector (not kube-system, kueue-system) on the framework ones;
#   then it waits until the API server gets answers from them (a server-side dry run of a
#   Job with the queue label comes back suspended).
#
# Ports in <state-dir>/cluster.env: KNS_KUEUE_WEBHOOK_PORT, KNS_KUEUE_HEALTH_PORT. It logs
# to <state-dir>/logs/kueue.log and is recorded in <state-dir>/pids (as `kueue`), so
# scripts/cluster-down.sh stops it. KNS_CLUSTER_TIMEOUT (default 180) bounds each wait;
# KNS_KUEUE_LOG_LEVEL (zap: debug, info, error, or a number) sets its log level.
set -euo pipefail
# shellcheck source=lib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"
ports_retry "${BASH_SOURCE[0]}" "$@"

log() { printf 'kueue-process: %s\n' "$*" >&2; }
die() { printf 'kueue-process: error: %s\n' "$*" >&2; exit 1; }
usage() { die "usage: scripts/kueue-process.sh <state-dir> [--frameworks <fw>[,<fw>...]] [--config-extra <file.yaml>]"; }

(($# >= 1)) || usage
state=$(cd "$1" 2>/dev/null && pwd) || die "no state dir $1"
shift
frameworks=batch/job
config_extra=
while (($#)); do
  case $1 in
    --frameworks) (($# >= 2)) || usage; frameworks=$2; shift 2 ;;
    --config-extra) (($# >= 2)) || usage; config_extra=$(realpath -m -- "$2"); shift 2
      [[ -f $config_extra && -r $config_extra ]] || die "cannot read --config-extra file $config_extra" ;;
    *) usage ;;
  esac
done
[[ $frameworks =~ ^[a-z0-9./-]+(,[a-z0-9./-]+)*$ ]] || die "bad --frameworks '$frameworks' (e.g. batch/job,jobset.x-k8s.io/jobset)"
kubeconfig=$state/kubeconfig
[[ -r $kubeconfig && -r $state/cluster.env && -s $state/pids ]] ||
  die "$state has no running cluster (run scripts/cluster-up.sh $state)"
# shellcheck source=/dev/null
bin=${KNS_CLUSTER_BIN:-$(. "$state/cluster.env" && printf '%s' "$KNS_CLUSTER_BIN")}
[[ -x $bin/kueue ]] || die "no kueue in $bin (run KNS_BUILD_KUEUE=1 scripts/cluster-build.sh)"
[[ -x $bin/kubectl ]] || die "no kubectl in $bin"
share=$(cd "$bin/../share/kueue" 2>/dev/null && pwd) || die "no $bin/../share/kueue (run scripts/cluster-build.sh)"
[[ -d $share/crds && -r $share/webhook-manifests.yaml ]] ||
  die "no Kueue CRDs or webhook manifests in $share (run KNS_BUILD_KUEUE=1 scripts/cluster-build.sh)"
timeout=${KNS_CLUSTER_TIMEOUT:-180}
for tool in curl openssl setsid; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not on PATH"
done
# shellcheck source=lib/python.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/python.sh"

component=kueue
KNS_SCRIPT=kueue-process
# shellcheck source=lib/process.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/process.sh"
process_not_running
kubectl=("$bin/kubectl" --kubeconfig="$kubeconfig")
dir=$state/kueue
rm -rf "$dir"
mkdir -p "$dir/certs" "$dir/crds" "$state/logs"

# --- How the metrics certificate gets to /etc/kueue/metrics/certs ----------------------------
metrics_path=/etc/kueue/metrics/certs
mode=${KNS_KUEUE_METRICS_CERTS:-auto}
if [[ $mode == auto ]]; then
  if ((EUID == 0)) && command -v unshare >/dev/null 2>&1 && unshare -m --propagation private true 2>/dev/null; then
    mode=namespace
  else
    mode=files
  fi
fi
case $mode in
  namespace)
    ((EUID == 0)) || die "KNS_KUEUE_METRICS_CERTS=namespace needs root (mounts in a private mount namespace)"
    unshare -m --propagation private true 2>/dev/null || die "unshare -m does not work here (try KNS_KUEUE_METRICS_CERTS=files)"
    ;;
  files)
    mkdir -p "$metrics_path" 2>/dev/null && [[ -w $metrics_path ]] ||
      die "cannot write $metrics_path, where Kueue loads its metrics certificate from (run as root)"
    ;;
  *) die "KNS_KUEUE_METRICS_CERTS must be auto, namespace or files (got '$mode')" ;;
esac

# --- Ports, certificate, configuration ---------------------------------------------------------
read -r webhook_port health_port < <(free_ports 2)
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=kueue-webhook.127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$dir/certs/tls.key" -out "$dir/certs/tls.crt" 2>/dev/null ||
  die "openssl could not make the webhook certificate"
chmod 600 "$dir/certs/tls.key"
ca_bundle=$(base64 -w0 <"$dir/certs/tls.crt")
url=https://127.0.0.1:$webhook_port

{
  cat <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: $webhook_port
  certDir: $dir/certs
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:$health_port
integrations:
  frameworks:
EOF
  tr ',' '\n' <<<"$frameworks" | sed 's/^/  - /'
} >"$dir/config.yaml"
if [[ -n $config_extra ]]; then
  "$py" - "$dir/config.yaml" "$config_extra" <<'PY' || die "bad --config-extra file $config_extra"
import sys, yaml

base_path, extra_path = sys.argv[1:3]
with open(base_path) as f:
    base = yaml.safe_load(f)
with open(extra_path) as f:
    extra = yaml.safe_load(f)
if extra is None:
    sys.exit(0)
if not isinstance(extra, dict):
    sys.exit("kueue-process: --config-extra must be a YAML mapping of Configuration fields")
clash = sorted(set(extra) & set(base))
if clash:
    sys.exit("kueue-process: --config-extra sets fields this script writes: %s" % ", ".join(clash))
with open(base_path, "a") as f:
    f.write("# --config-extra %s\n" % extra_path)
    yaml.safe_dump(extra, f, sort_keys=False)
PY
  log "configuration: $(tr '\n' ' ' <"$config_extra" | cut -c1-200) added from $config_extra"
fi

# --- CRDs (with upstream's conversion webhooks) and the namespace --------------------------------
crd_names=$("$py" - "$share" "$dir/crds" "$url" "$ca_bundle" <<'PY'
import glob, os, sys, yaml

share, out, url, ca = sys.argv[1:5]
conversion = {}
kust = os.path.join(share, "crd-patches", "kustomization.yaml")
if os.path.exists(kust):
    with open(kust) as f:
        for p in (yaml.safe_load(f) or {}).get("patches") or []:
            path = p.get("path") or ""
            if not os.path.basename(path).startswith("webhook_in_"):
                continue
            with open(os.path.join(share, "crd-patches", os.path.basename(path))) as f:
                patch = yaml.safe_load(f)
            conv = patch["spec"]["conversion"]
            service = conv["webhook"]["clientConfig"].pop("service")
            conv["webhook"]["clientConfig"] = {"url": url + service.get("path", "/convert"), "caBundle": ca}
            conversion[patch["metadata"]["name"]] = conv
else:
    print("kueue-process: %s has no crd-patches: CRDs without conversion webhooks (v1beta2 only)" % share,
          file=sys.stderr)
names = []
for src in sorted(glob.glob(os.path.join(share, "crds", "*.yaml"))):
    with open(src) as f:
        crd = yaml.safe_load(f)
    name = crd["metadata"]["name"]
    if name in conversion:
        crd["spec"]["conversion"] = conversion.pop(name)
    with open(os.path.join(out, os.path.basename(src)), "w") as f:
        yaml.safe_dump(crd, f, sort_keys=False)
    names.append(name)
if conversion:
    sys.exit("kueue-process: conversion patches for unknown CRDs: %s" % ", ".join(conversion))
print(" ".join(names))
PY
) || die "could not prepare the Kueue CRDs"
log "applying the Kueue CRDs ($(cat "$share/version" 2>/dev/null || echo '?'))"
"${kubectl[@]}" apply --server-side --force-conflicts -f "$dir/crds" >/dev/null
read -ra crds <<<"$crd_names"
"${kubectl[@]}" wait --for=condition=Established --timeout="${timeout}s" "${crds[@]/#/crd/}" >/dev/null ||
  die "the Kueue CRDs did not become Established"
"${kubectl[@]}" apply --server-side -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: kueue-system
EOF
log "${#crds[@]} CRDs established; namespace kueue-system"

# --- The manager -------------------------------------------------------------------------------
gates=VisibilityOnDemand=false${KNS_KUEUE_FEATURE_GATES:+,$KNS_KUEUE_FEATURE_GATES}
cmd=("$bin/kueue" --config="$dir/config.yaml" --kubeconfig="$kubeconfig" --feature-gates="$gates")
[[ -n ${KNS_KUEUE_LOG_LEVEL:-} ]] && cmd+=(--zap-log-level="$KNS_KUEUE_LOG_LEVEL")
if [[ $mode == namespace ]]; then
  # In the private mount namespace: a tmpfs (for the overlay's upper layer) on
  # <dir>/etc-overlay, /etc overlaid when the path is missing, certs/ bind-mounted there.
  # unshare execs (no fork), so the recorded pid stays the manager's.
  mkdir -p "$dir/etc-overlay"
  # shellcheck disable=SC2016 # expanded by the inner shell
  inner='set -e
certs=$1 ovl=$2 target=$3
shift 3
if [[ ! -d $target ]]; then
  mount -t tmpfs -o mode=0700 kns-kueue "$ovl"
  mkdir "$ovl/upper" "$ovl/work"
  mount -t overlay kns-kueue -o "lowerdir=/etc,upperdir=$ovl/upper,workdir=$ovl/work" /etc
  mkdir -p "$target"
fi
mount --bind "$certs" "$target"
exec "$@"'
  cmd=(unshare -m --propagation private bash -c "$inner" kueue-mounts "$dir/certs" "$dir/etc-overlay" "$metrics_path" "${cmd[@]}")
  log "metrics certificate: certs/ bind-mounted on $metrics_path in a private mount namespace"
else
  cp "$dir/certs/tls.crt" "$dir/certs/tls.key" "$metrics_path/"
  log "metrics certificate: copied to $metrics_path (on the host)"
fi
log "starting $component (webhooks on 127.0.0.1:$webhook_port, health on 127.0.0.1:$health_port, frameworks $frameworks)"
start=$SECONDS
process_start -- "${cmd[@]}"
process_ready "http://127.0.0.1:$health_port/readyz"
log "$component ready in $((SECONDS - start))s (pid $pid)"

# --- Its webhooks --------------------------------------------------------------------------------
"$py" - "$share/webhook-manifests.yaml" "$dir/webhooks.yaml" "$url" "$ca_bundle" "$frameworks" <<'PY' ||
import sys, yaml

src, out, url, ca, frameworks = sys.argv[1:6]
core = {"pod": ("", "pods"), "deployment": ("apps", "deployments"), "statefulset": ("apps", "statefulsets")}
enabled = set()
for fw in frameworks.split(","):
    if fw in core:
        enabled.add(core[fw])
    elif "/" in fw:
        group, kind = fw.rsplit("/", 1)
        enabled.add((group, kind.lower() + "s"))
    else:
        sys.exit("kueue-process: unknown framework %r" % fw)
not_system = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                    "values": ["kube-system", "kueue-system"]}]}
with open(src) as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
kept = 0
for doc in docs:
    kind = doc["kind"]
    doc["metadata"] = {"name": "kueue-process-%s-webhook-configuration" % kind[:-len("WebhookConfiguration")].lower(),
                       "labels": {"app.kubernetes.io/name": "kueue",
                                  "app.kubernetes.io/managed-by": "kns-kueue-process"}}
    webhooks = []
    for wh in doc.get("webhooks") or []:
        pairs = {(g, r.split("/")[0]) for rule in wh.get("rules") or []
                 for g in rule.get("apiGroups") or [] for r in rule.get("resources") or []}
        own = any(g == "kueue.x-k8s.io" for g, _ in pairs)
        if not own and not pairs & enabled:
            continue
        service = wh["clientConfig"].pop("service")
        wh["clientConfig"] = {"url": url + service["path"], "caBundle": ca}
        if not own:
            wh.setdefault("namespaceSelector", not_system)
        webhooks.append(wh)
    doc["webhooks"] = webhooks
    kept += len(webhooks)
missing = {fw for fw in enabled if not any(
    (g, r.split("/")[0]) == fw for d in docs for wh in d["webhooks"]
    for rule in wh.get("rules") or [] for g in rule.get("apiGroups") or [] for r in rule.get("resources") or [])}
if missing:
    sys.exit("kueue-process: the module has no webhooks for %s" % ", ".join("/".join(m) for m in sorted(missing)))
with open(out, "w") as f:
    yaml.safe_dump_all(docs, f, sort_keys=False)
print("kueue-process: %d webhooks to register" % kept, file=sys.stderr)
PY
  process_fail "could not prepare the webhook configurations"
"${kubectl[@]}" apply --server-side --force-conflicts -f "$dir/webhooks.yaml" >/dev/null ||
  process_fail "the webhook configurations were refused"

# The API server reaches them: a Job with the queue label, created as a dry run, comes back
# suspended from the mutating webhook (with batch/job; else a ResourceFlavor dry run passes
# Kueue's own webhooks).
if [[ ,$frameworks, == *,batch/job,* ]]; then
  probe() {
    [[ $("${kubectl[@]}" create --dry-run=server -o 'jsonpath={.spec.suspend}' -f - 2>/dev/null <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  name: kueue-process-probe
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: kueue-process-probe
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: probe
        image: registry.k8s.io/pause:3.10
EOF
) == true ]]
  }
else
  probe() {
    "${kubectl[@]}" create --dry-run=server -f - >/dev/null 2>&1 <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: kueue-process-probe
EOF
  }
fi
until probe; do
  kill -0 "$pid" 2>/dev/null || process_fail "$component exited"
  ((SECONDS < deadline)) || process_fail "the API server got no answer from the Kueue webhooks in ${timeout}s"
  sleep 0.5
done
printf 'KNS_KUEUE_WEBHOOK_PORT=%s\nKNS_KUEUE_HEALTH_PORT=%s\n' "$webhook_port" "$health_port" >>"$state/cluster.env"
log "$component webhooks answer (${SECONDS}s in all)"
