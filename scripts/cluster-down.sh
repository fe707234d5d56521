#!/usr/bin/env bash
# Stop every process scripts/cluster-up.sh (and scripts/scheduler-process.sh,
# scripts/karpenter-process.sh, scripts/kueue-process.sh) started for a state dir:
#   scripts/cluster-down.sh <state-dir>
# Reads <state-dir>/pids ("<component> <pid>" lines) and stops the components in tiers
# (kwok, schedulers, Karpenter, Kueue and controller-manager; then kube-apiserver; then etcd):
# SIGTERM to each process group, up to KNS_CLUSTER_GRACE seconds (default 10), then
# SIGKILL. A pid is only signalled while its command line still names the state dir (or its
# environment has KNS_CLUSTER_STATE=<state-dir>), so a recycled pid is never hit.
# Idempotent: a missing state dir or pids file, or processes already gone, are not errors.
# The state dir is kept (logs).
set -euo pipefail

log() { printf 'cluster-down: %s\n' "$*" >&2; }

(($# == 1)) || { printf 'usage: scripts/cluster-down.sh <state-dir>\n' >&2; exit 2; }
if [[ ! -d $1 ]]; then
  log "no state dir $1: nothing to stop"
  exit 0
fi
state=$(cd "$1" && pwd)
pids_file=$state/pids
grace=${KNS_CLUSTER_GRACE:-10}

ours() { # pid: alive and started for this state dir (its command line names it, or, for
  # a process configured through its environment such as karpenter-kwok, KNS_CLUSTER_STATE)
  kill -0 "$1" 2>/dev/null || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF "$state/" ||
    grep -qxzF "KNS_CLUSTER_STATE=$state" "/proc/$1/environ" 2>/dev/null
}

# Pids of half-started components (cluster-up writes .pid.<name> before recording them).
extra=()
for f in "$state"/.pid.*; do
  [[ -s $f ]] && extra+=("${f##*/.pid.} $(cat "$f")")
done

entries=()
if [[ -s $pids_file ]]; then
  mapfile -t entries < <(tac "$pids_file")
fi
entries+=(${extra[@]+"${extra[@]}"})
if ((${#entries[@]} == 0)); then
  log "no processes recorded in $pids_file: nothing to stop"
  exit 0
fi

# Stop a set of components: SIGTERM to each process group, wait up to the grace period,
# then SIGKILL what is left.
stop() { # "name pid"...
  local e name pid live=() still signalled=()
  for e in "$@"; do
    read -r name pid _ <<<"$e"
    [[ $pid =~ ^[0-9]+$ ]] || continue
    if ours "$pid"; then
      log "stopping $name (pid $pid)"
      # Each component leads its own process group (setsid): signal the group, then the pid.
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      live+=("$name $pid")
      signalled+=("$name $pid")
    fi
  done
  local deadline=$((SECONDS + grace))
  while ((${#live[@]})) && ((SECONDS < deadline)); do
    still=()
    for e in "${live[@]}"; do
      read -r name pid <<<"$e"
      ours "$pid" && still+=("$e")
    done
    live=(${still[@]+"${still[@]}"})
    ((${#live[@]})) && sleep 0.3
  done
  for e in ${live[@]+"${live[@]}"}; do
    read -r name pid <<<"$e"
    if ours "$pid"; then
      log "$name (pid $pid) still running after ${grace}s: killing it"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for e in ${live[@]+"${live[@]}"}; do
    read -r name pid <<<"$e"
    for _ in $(seq 50); do ours "$pid" || break; sleep 0.1; done
    ours "$pid" && { log "error: $name (pid $pid) survived SIGKILL"; return 1; }
  done
  # An exited process stays a zombie until its parent (init, after cluster-up exited)
  # reaps it: give that a moment so `ps` right after this shows nothing.
  for e in ${signalled[@]+"${signalled[@]}"}; do
    read -r name pid <<<"$e"
    for _ in $(seq 30); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
  done
  return 0
}

# Clients first (kwok, schedulers, Karpenter, Kueue, controller-manager), then the API server, then etcd: an
# API server whose etcd is gone takes long to stop.
clients=() apiservers=() etcds=()
for e in "${entries[@]}"; do
  case ${e%% *} in
    kube-apiserver) apiservers+=("$e") ;;
    etcd) etcds+=("$e") ;;
    *) clients+=("$e") ;;
  esac
done
rc=0
stop ${clients[@]+"${clients[@]}"} || rc=1
stop ${apiservers[@]+"${apiservers[@]}"} || rc=1
stop ${etcds[@]+"${etcds[@]}"} || rc=1
((rc == 0)) || exit 1

rm -f "$pids_file" "$state"/.pid.*
log "stopped (state and logs kept in $state)"
