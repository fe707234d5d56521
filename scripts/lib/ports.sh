# Ports for the cluster scripts (cluster-up.sh, scheduler-process.sh, karpenter-process.sh,
# kueue-process.sh).
#
# free_ports N [HOST]: N distinct TCP ports free on HOST now (default 127.0.0.1; "" for all
# interfaces, for a program that binds ":<port>"), on one line. They are released before
# the component binds them, so another process can take one in between (parallel test
# workers start clusters at once): a script whose component then exits with "address
# already in use" exits with PORT_CLASH, and ports_retry, called at its top, runs it again
# with new ports. KNS_FIRST_PORTS (space-separated) are the ports it gives on a script's
# first try instead (tests hold one of them, to see the script try again). Readiness checks
# give up on an answer after 5 s (curl --max-time): a port taken by another process may
# accept and never answer.
free_ports() {
  if [[ ${port_try:-} == 1 && -n ${KNS_FIRST_PORTS:-} ]]; then
    local first
    read -ra first <<<"$KNS_FIRST_PORTS"
    ((${#first[@]} >= $1)) || { printf 'KNS_FIRST_PORTS has fewer than %s ports\n' "$1" >&2; return 1; }
    echo "${first[@]:0:$1}"
    return
  fi
  python3 - "$1" "${2-127.0.0.1}" <<'PY'
import socket
import sys

socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind((sys.argv[2], 0))
    socks.append(s)
print(*(s.getsockname()[1] for s in socks))
PY
}

PORT_CLASH=75

# port_clash LOG: the component that wrote LOG exited because a port was taken.
port_clash() { grep -qi 'address already in use' "$1" 2>/dev/null; }

# ports_retry SCRIPT ARGS...: the first time, run SCRIPT ARGS... again (up to
# KNS_PORT_TRIES times, default 5) while it exits with PORT_CLASH, then exit with its
# status; inside that run (KNS_PORT_TRY set), return at once.
ports_retry() {
  if [[ -n ${KNS_PORT_TRY:-} ]]; then
    port_try=$KNS_PORT_TRY
    unset KNS_PORT_TRY # the scripts this one runs retry on their own
    return 0
  fi
  local try rc tries=${KNS_PORT_TRIES:-5}
  for ((try = 1; try <= tries; try++)); do
    rc=0
    KNS_PORT_TRY=$try bash "$@" || rc=$?
    ((rc == PORT_CLASH)) || exit "$rc"
    printf '%s: a port was taken before its component bound it; trying again with new ports (%d/%d)\n' \
      "$(basename "$1" .sh)" "$try" "$tries" >&2
  done
  exit "$rc"
}
