#!/usr/bin/env bash
# Start a local Kubernetes control plane on loopback, with simulated (kwok) nodes:
#   scripts/cluster-up.sh <state-dir> [--nodes <nodes.yaml>] [--scheduler-config <config.yaml>]...
#
# Starts etcd, kube-apiserver, kube-controller-manager, the default kube-scheduler and
# kwok (binaries from scripts/cluster-build.sh, or KNS_CLUSTER_BIN), each on free
# 127.0.0.1 ports chosen now, and waits until all of them are healthy. The state dir is
# wiped first (a fresh cluster every time; refused while a cluster from it is running).
#   <state-dir>/kubeconfig          admin (system:masters) kubeconfig, verified TLS
#   <state-dir>/pids                "<component> <pid>" per started process
#   <state-dir>/logs/<component>.log
#   <state-dir>/cluster.env         ports and paths (shell-sourceable)
#   <state-dir>/<component>.kubeconfig  the identities of the components
#   <state-dir>/kwok-stages.yaml    the stages kwok plays (below)
# --nodes registers fake nodes (scripts/cluster-nodes.sh) and waits for them to be Ready;
# --scheduler-config starts one more kube-scheduler with that KubeSchedulerConfiguration
# (scripts/scheduler-process.sh); both can also be run later on their own.
# Stop everything with scripts/cluster-down.sh <state-dir>.
#
# kwok's stages: the module's (../share/kwok-stages.yaml beside the bin dir), with its
# pod-complete stage kept off pods that have a `kns-wait` init container or the annotation
# kwok.x-k8s.io/run-for, plus scripts/kwok/pod-complete-primed.yaml, which completes the
# former at their workload's start time, and scripts/kwok/pod-complete-after.yaml, which
# completes the latter that long after they started running (docs/testing.md).
# KNS_KWOK_STAGES=<file> replaces all of them (used as is).
#
# KNS_CLUSTER_TIMEOUT (default 180) is the seconds allowed for each readiness wait.
set -euo pipefail
# shellcheck source=lib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"
ports_retry "${BASH_SOURCE[0]}" "$@"

log() { printf 'cluster-up: %s\n' "$*" >&2; }
die() { printf 'cluster-up: error: %s\n' "$*" >&2; exit 1; }
usage() { die "usage: scripts/cluster-up.sh <state-dir> [--nodes <nodes.yaml>] [--scheduler-config <config.yaml>]..."; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
(($# >= 1)) || usage
state_arg=$1
shift
nodes_file=
sched_configs=()
while (($#)); do
  case $1 in
    --nodes) (($# >= 2)) || usage; nodes_file=$(realpath "$2"); shift 2 ;;
    --scheduler-config) (($# >= 2)) || usage; sched_configs+=("$(realpath "$2")"); shift 2 ;;
    *) usage ;;
  esac
done
[[ -z $nodes_file || -r $nodes_file ]] || die "cannot read nodes file $nodes_file"
for c in ${sched_configs[@]+"${sched_configs[@]}"}; do [[ -r $c ]] || die "cannot read scheduler config $c"; done
timeout=${KNS_CLUSTER_TIMEOUT:-180}
for tool in curl openssl python3 setsid; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not on PATH"
done

mkdir -p "$state_arg"
state=$(cd "$state_arg" && pwd)
pids_file=$state/pids
logs=$state/logs
pki=$state/pki

# --- 0. A fresh state dir ----------------------------------------------------------------
if [[ -s $pids_file ]]; then
  while read -r name pid _; do
    # Ours: the command line names the state dir, or (karpenter-kwok) the environment does.
    if [[ -n ${pid:-} ]] && kill -0 "$pid" 2>/dev/null &&
      { tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$state/" ||
        grep -qxzF "KNS_CLUSTER_STATE=$state" "/proc/$pid/environ" 2>/dev/null; }; then
      die "$name (pid $pid) of a cluster in $state is still running: run scripts/cluster-down.sh $state first"
    fi
  done <"$pids_file"
fi
rm -rf "$state/etcd" "$pki" "$logs" "$pids_file" "$state"/*.kubeconfig "$state/kubeconfig" "$state/cluster.env" "$state/schedulers" \
  "$state/kwok-stages.yaml"
mkdir -p "$logs" "$pki/apiserver" "$pki/kube-controller-manager" "$pki/kube-scheduler"
chmod 700 "$pki"

bin=${KNS_CLUSTER_BIN:-$(bash "$script_dir/cluster-build.sh")}
[[ -n $bin && -d $bin ]] || die "no bin dir from scripts/cluster-build.sh"
bin=$(cd "$bin" && pwd)
module_stages=${KNS_KWOK_STAGES:-$(dirname "$bin")/share/kwok-stages.yaml}
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubectl; do
  [[ -x $bin/$b ]] || die "$bin/$b is missing (run scripts/cluster-build.sh)"
done
[[ -r $module_stages ]] || die "kwok stages $module_stages are missing (run scripts/cluster-build.sh)"

# The stages kwok plays: the module's, with the project's (scripts/kwok/stages.sh says how).
stages=$state/kwok-stages.yaml
if [[ -n ${KNS_KWOK_STAGES:-} ]]; then
  cp "$module_stages" "$stages"
else
  bash "$script_dir/kwok/stages.sh" "$module_stages" >"$stages" || die "cannot compose kwok's stages from $module_stages"
fi

# On failure: the tail of the failing component's log, then stop whatever was started.
started=0 failed_component=
on_exit() {
  local rc=$?
  ((rc == 0)) && return
  if [[ -n $failed_component && -r $logs/$failed_component.log ]]; then
    printf 'cluster-up: last lines of %s:\n' "$logs/$failed_component.log" >&2
    tail -n 40 "$logs/$failed_component.log" | sed 's/^/  | /' >&2
  fi
  if ((started)); then
    log "stopping what was started"
    bash "$script_dir/cluster-down.sh" "$state" >&2 || true
  fi
}
trap on_exit EXIT

# Start a component in its own session (so it outlives the caller and can be stopped as a
# group) with its output in logs/<name>.log; record its pid.
start() { # name binary args...
  local name=$1 pid_tmp=$state/.pid.$1
  shift
  rm -f "$pid_tmp"
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pid_tmp" "$@" >"$logs/$name.log" 2>&1 </dev/null &
  local i
  for ((i = 0; i < 50; i++)); do [[ -s $pid_tmp ]] && break; sleep 0.1; done
  [[ -s $pid_tmp ]] || { failed_component=$name; die "$name did not start"; }
  printf '%s %s\n' "$name" "$(cat "$pid_tmp")" >>"$pids_file"
  rm -f "$pid_tmp"
  started=1
}

pid_of() { awk -v n="$1" '$1 == n { p = $2 } END { print p }' "$pids_file"; }

# Wait until the command succeeds; fail with the component's log if it exits or times out.
wait_for() { # name description command...
  local name=$1 what=$2 deadline=$((SECONDS + timeout)) pid
  shift 2
  pid=$(pid_of "$name")
  until "$@" >/dev/null 2>&1; do
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
      port_clash "$logs/$name.log" && exit "$PORT_CLASH"
      failed_component=$name
      die "$name exited while waiting for $what (log: $logs/$name.log)"
    fi
    if ((SECONDS >= deadline)); then
      failed_component=$name
      die "timed out after ${timeout}s waiting for $what (log: $logs/$name.log)"
    fi
    sleep 0.5
  done
  log "$what: ok"
}

# --- 1. Ports, keys, tokens ----------------------------------------------------------------
read -r etcd_port etcd_peer_port api_port kcm_port sched_port kwok_port < <(free_ports 6)

openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
token() { openssl rand -hex 24; }
admin_token=$(token) kcm_token=$(token) sched_token=$(token) kwok_token=$(token)
{
  printf '%s,kns-admin,kns-admin,"system:masters"\n' "$admin_token"
  printf '%s,system:kube-controller-manager,system:kube-controller-manager\n' "$kcm_token"
  printf '%s,system:kube-scheduler,system:kube-scheduler\n' "$sched_token"
  printf '%s,kwok,kwok,"system:masters"\n' "$kwok_token"
} >"$pki/tokens.csv"
chmod 600 "$pki"/*

server=https://127.0.0.1:$api_port
cat >"$state/cluster.env" <<EOF
KNS_CLUSTER_STATE=$state
KNS_CLUSTER_BIN=$bin
KUBECONFIG=$state/kubeconfig
KNS_APISERVER=$server
KNS_ETCD=http://127.0.0.1:$etcd_port
KNS_KCM_PORT=$kcm_port
KNS_SCHEDULER_PORT=$sched_port
KNS_KWOK_PORT=$kwok_port
EOF

# --- 2. etcd ---------------------------------------------------------------------------------
log "starting etcd on 127.0.0.1:$etcd_port"
start etcd "$bin/etcd" --name=kns --data-dir="$state/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster="kns=http://127.0.0.1:$etcd_peer_port" --initial-cluster-state=new \
  --unsafe-no-fsync=true --log-level=warn
etcd_healthy() { curl -sf --max-time 5 "http://127.0.0.1:$etcd_port/health" | grep -q '"health":"true"'; }
wait_for etcd "etcd health" etcd_healthy

# --- 3. kube-apiserver -----------------------------------------------------------------------
log "starting kube-apiserver on $server"
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
  --cert-dir="$pki/apiserver" \
  --token-auth-file="$pki/tokens.csv" \
  --authorization-mode=Node,RBAC \
  --service-account-key-file="$pki/sa.pub" \
  --service-account-signing-key-file="$pki/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range=10.96.0.0/16 --endpoint-reconciler-type=none \
  --allow-privileged=true --profiling=false
api_ready() { curl -sf --max-time 5 --cacert "$pki/apiserver/apiserver.crt" -H "Authorization: Bearer $admin_token" "$server/readyz"; }
wait_for kube-apiserver "kube-apiserver /readyz" api_ready

# The serving cert --cert-dir generated (its file also holds the CA that signed it).
ca_data=$(base64 -w0 <"$pki/apiserver/apiserver.crt")
write_kubeconfig() { # file user token
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kns-local
  cluster:
    server: $server
    certificate-authority-data: $ca_data
users:
- name: $2
  user:
    token: $3
contexts:
- name: kns-local
  context:
    cluster: kns-local
    user: $2
current-context: kns-local
EOF
  chmod 600 "$1"
}
write_kubeconfig "$state/kubeconfig" kns-admin "$admin_token"
write_kubeconfig "$state/kube-controller-manager.kubeconfig" system:kube-controller-manager "$kcm_token"
write_kubeconfig "$state/kube-scheduler.kubeconfig" system:kube-scheduler "$sched_token"
write_kubeconfig "$state/kwok.kubeconfig" kwok "$kwok_token"
kubectl=("$bin/kubectl" --kubeconfig="$state/kubeconfig")

# --- 4. kube-controller-manager, kube-scheduler, kwok ---------------------------------------
log "starting kube-controller-manager (health on 127.0.0.1:$kcm_port)"
kcm_kc=$state/kube-controller-manager.kubeconfig
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$kcm_kc" --authentication-kubeconfig="$kcm_kc" --authorization-kubeconfig="$kcm_kc" \
  --authentication-skip-lookup=true \
  --bind-address=127.0.0.1 --secure-port="$kcm_port" --cert-dir="$pki/kube-controller-manager" \
  --leader-elect=false \
  --controllers='*' \
  --use-service-account-credentials=true \
  --service-account-private-key-file="$pki/sa.key" \
  --root-ca-file="$pki/apiserver/apiserver.crt" \
  --profiling=false

log "starting kube-scheduler (health on 127.0.0.1:$sched_port)"
sched_kc=$state/kube-scheduler.kubeconfig
start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig="$sched_kc" --authentication-kubeconfig="$sched_kc" --authorization-kubeconfig="$sched_kc" \
  --authentication-skip-lookup=true \
  --bind-address=127.0.0.1 --secure-port="$sched_port" --cert-dir="$pki/kube-scheduler" \
  --leader-elect=false --profiling=false

log "starting kwok (health on 127.0.0.1:$kwok_port)"
start kwok "$bin/kwok" \
  --kubeconfig="$state/kwok.kubeconfig" --config="$stages" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-lease-duration-seconds=40 --cidr=10.244.0.1/16 --node-ip=127.0.0.1 \
  --server-address="127.0.0.1:$kwok_port"

healthz() { curl -skf --max-time 5 "https://127.0.0.1:$1/healthz"; }
wait_for kube-controller-manager "kube-controller-manager /healthz" healthz "$kcm_port"
wait_for kube-scheduler "kube-scheduler /healthz" healthz "$sched_port"
kwok_healthy() { curl -sf --max-time 5 "http://127.0.0.1:$kwok_port/healthz"; }
wait_for kwok "kwok /healthz" kwok_healthy
# Controllers at work: the service-account controller made the default ServiceAccount.
wait_for kube-controller-manager "ServiceAccount default/default" "${kubectl[@]}" -n default get serviceaccount default

# --- 5. Optional: nodes and extra schedulers ------------------------------------------------
if [[ -n $nodes_file ]]; then
  KNS_CLUSTER_BIN=$bin bash "$script_dir/cluster-nodes.sh" "$state" "$nodes_file" ||
    { failed_component=kwok; die "registering the nodes of $nodes_file failed"; }
fi
for c in ${sched_configs[@]+"${sched_configs[@]}"}; do
  KNS_CLUSTER_BIN=$bin bash "$script_dir/scheduler-process.sh" "$state" "$c" ||
    die "starting a scheduler with $c failed"
done

log "cluster ready in ${SECONDS}s: export KUBECONFIG=$state/kubeconfig (kubectl: $bin/kubectl)"
