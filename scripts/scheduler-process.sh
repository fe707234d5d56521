#!/usr/bin/env bash
# Run one more kube-scheduler, with a given KubeSchedulerConfiguration (e.g. the packing
# scheduler the program generates, profile schedulerName kns-packing), against a cluster
# from scripts/cluster-up.sh:
#   scripts/scheduler-process.sh <state-dir> <config.yaml> [--kubeconfig <file>] [--name <name>]
#
# The config is copied to <state-dir>/schedulers/<name>.yaml with
# clientConnection.kubeconfig set (default: <state-dir>/kube-scheduler.kubeconfig, the
# system:kube-scheduler identity) and leader election off (KNS_SCHEDULER_LEADER_ELECT=keep
# keeps the file's settings; its lease then needs a --kubeconfig allowed to write it).
# <name> defaults to the first profile's schedulerName. The process serves /healthz on a
# free 127.0.0.1 port, logs to <state-dir>/logs/kube-scheduler-<name>.log and is recorded
# in <state-dir>/pids, so scripts/cluster-down.sh stops it.
set -euo pipefail
# shellcheck source=lib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"
ports_retry "${BASH_SOURCE[0]}" "$@"

log() { printf 'scheduler-process: %s\n' "$*" >&2; }
die() { printf 'scheduler-process: error: %s\n' "$*" >&2; exit 1; }
usage() { die "usage: scripts/scheduler-process.sh <state-dir> <config.yaml> [--kubeconfig <file>] [--name <name>]"; }

(($# >= 2)) || usage
state=$(cd "$1" 2>/dev/null && pwd) || die "no state dir $1"
config=$2
shift 2
kubeconfig=$state/kube-scheduler.kubeconfig name=
while (($#)); do
  case $1 in
    --kubeconfig) (($# >= 2)) || usage; kubeconfig=$(realpath "$2"); shift 2 ;;
    --name) (($# >= 2)) || usage; name=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ -r $config ]] || die "cannot read scheduler config $config"
[[ -r $kubeconfig && -r $state/cluster.env && -s $state/pids ]] ||
  die "$state has no running cluster (run scripts/cluster-up.sh $state)"
bin=${KNS_CLUSTER_BIN:-$(. "$state/cluster.env" && printf '%s' "$KNS_CLUSTER_BIN")}
[[ -x $bin/kube-scheduler ]] || die "no kube-scheduler in $bin"
timeout=${KNS_CLUSTER_TIMEOUT:-180}

# shellcheck source=lib/python.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/python.sh"

mkdir -p "$state/schedulers" "$state/logs"
tmp=$(mktemp "$state/schedulers/.config.XXXXXX")
trap 'rm -f "$tmp"' EXIT
name=$("$py" - "$config" "$tmp" "$kubeconfig" "${KNS_SCHEDULER_LEADER_ELECT:-off}" "$name" <<'PY'
import sys, yaml

src, out, kubeconfig, leader, name = sys.argv[1:6]
with open(src) as f:
    cfg = yaml.safe_load(f)
if not isinstance(cfg, dict) or cfg.get("kind") != "KubeSchedulerConfiguration":
    sys.exit("%s is not a KubeSchedulerConfiguration" % src)
cfg.setdefault("clientConnection", {})["kubeconfig"] = kubeconfig
if leader != "keep":
    cfg["leaderElection"] = {"leaderElect": False}
profiles = cfg.get("profiles") or [{}]
name = name or profiles[0].get("schedulerName") or "default-scheduler"
with open(out, "w") as f:
    yaml.safe_dump(cfg, f, sort_keys=False)
print(name)
PY
) || die "cannot use $config"
[[ $name =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "bad scheduler name '$name' (use --name)"
component=kube-scheduler-$name
pids_file=$state/pids
while read -r n pid _; do
  if [[ $n == "$component" ]] && kill -0 "$pid" 2>/dev/null; then
    die "$component is already running (pid $pid)"
  fi
done <"$pids_file"
final=$state/schedulers/$name.yaml
mv -f "$tmp" "$final"

port=$(free_ports 1)
cert_dir=$state/pki/$component
mkdir -p "$cert_dir"
log_file=$state/logs/$component.log
pid_tmp=$state/.pid.$component
rm -f "$pid_tmp"
log "starting $component (config $final, health on 127.0.0.1:$port)"
setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pid_tmp" "$bin/kube-scheduler" \
  --config="$final" \
  --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
  --authentication-skip-lookup=true \
  --bind-address=127.0.0.1 --secure-port="$port" --cert-dir="$cert_dir" \
  >"$log_file" 2>&1 </dev/null &
for _ in $(seq 50); do [[ -s $pid_tmp ]] && break; sleep 0.1; done
[[ -s $pid_tmp ]] || die "$component did not start"
pid=$(cat "$pid_tmp")
printf '%s %s\n' "$component" "$pid" >>"$pids_file"
rm -f "$pid_tmp"

deadline=$((SECONDS + timeout))
until curl -skf --max-time 5 "https://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
  if ! kill -0 "$pid" 2>/dev/null && port_clash "$log_file"; then
    exit "$PORT_CLASH"
  fi
  if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
    printf 'scheduler-process: last lines of %s:\n' "$log_file" >&2
    tail -n 40 "$log_file" | sed 's/^/  | /' >&2
    kill -KILL -- "-$pid" 2>/dev/null || true
    die "$component did not become healthy"
  fi
  sleep 0.5
done
printf 'KNS_SCHEDULER_PORT_%s=%s\n' "$(tr 'a-z.-' 'A-Z__' <<<"$name")" "$port" >>"$state/cluster.env"
log "$component healthy (pid $pid, schedulerName $name)"
