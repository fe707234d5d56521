# Shared by scripts/karpenter-process.sh and scripts/kueue-process.sh: one long-running
# component of a cluster from scripts/cluster-up.sh, in its own process group, recorded in
# the state dir's pids file so scripts/cluster-down.sh stops it. Source it after setting
# KNS_SCRIPT (the log prefix), `component`, `state` and `timeout`, and defining die(), and
# after lib/ports.sh.

# Refuse a second instance of $component.
process_not_running() {
  local n p
  while read -r n p _; do
    if [[ $n == "$component" ]] && kill -0 "$p" 2>/dev/null; then
      die "$component is already running (pid $p)"
    fi
  done <"$state/pids"
}

# process_start [VAR=value ...] -- command [args ...]: start it with those variables (and
# KNS_CLUSTER_STATE, by which cluster-down.sh tells it is ours) in a new session, logging to
# $state/logs/$component.log; sets `pid` and `log_file`.
process_start() {
  local vars=() pid_tmp=$state/.pid.$component
  while (($#)) && [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  mkdir -p "$state/logs"
  log_file=$state/logs/$component.log
  rm -f "$pid_tmp"
  # shellcheck disable=SC2016 # $$, $0 and $@ are the inner shell's
  env KNS_CLUSTER_STATE="$state" ${vars[@]+"${vars[@]}"} setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pid_tmp" \
    "$@" >"$log_file" 2>&1 </dev/null &
  for _ in $(seq 50); do [[ -s $pid_tmp ]] && break; sleep 0.1; done
  [[ -s $pid_tmp ]] || die "$component did not start"
  pid=$(cat "$pid_tmp")
  printf '%s %s\n' "$component" "$pid" >>"$state/pids"
  rm -f "$pid_tmp"
}

# Stop it, show the end of its log, and die with the message; when it exited because a
# port was taken (lib/ports.sh), exit with PORT_CLASH instead, so the script runs again.
process_fail() {
  if ! kill -0 "$pid" 2>/dev/null && port_clash "$log_file"; then
    exit "$PORT_CLASH"
  fi
  printf '%s: last lines of %s:\n' "$KNS_SCRIPT" "$log_file" >&2
  tail -n 40 "$log_file" | sed 's/^/  | /' >&2
  kill -KILL -- "-$pid" 2>/dev/null || true
  die "$*"
}

# process_ready URL: wait until URL answers, while the process lives, for at most $timeout s.
process_ready() {
  local deadline=$((SECONDS + timeout))
  until curl -sf --max-time 5 "$1" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || process_fail "$component exited"
    ((SECONDS < deadline)) || process_fail "$component did not become ready in ${timeout}s"
    sleep 0.5
  done
}
