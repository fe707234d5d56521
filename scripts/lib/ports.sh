# free_ports N [HOST]: N distinct TCP ports free on HOST now (default 127.0.0.1; "" for all
# interfaces, for a program that binds ":<port>"), on one line. Shared by the cluster
# scripts (cluster-up.sh, scheduler-process.sh, karpenter-process.sh, kueue-process.sh).
free_ports() {
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
