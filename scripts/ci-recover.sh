#!/usr/bin/env bash
# CI's recovery of one stack after a cancelled, timed-out or killed apply
# (.github/workflows/recover.yml, docs/ci.md): `./kns recover --force`, then the stack's
# record of its last complete apply moves to HEAD (recover's up applied the config at HEAD).
# --force releases the lock the killed runner left: the workflow runs in the stack's
# concurrency group (up-<stack>), so GitHub starts it only once no apply of the stack runs,
# which is the check `./kns recover` cannot make itself on a cloud backend.
#   scripts/ci-recover.sh STACK    run in the project directory; the output also goes to
#                                  build/logs/recover-STACK.log
# KNS names the command (tests run this with the real one).
set -euo pipefail

stack=${1:?usage: scripts/ci-recover.sh STACK}
kns=${KNS:-./kns}
mkdir -p build/logs
log=build/logs/recover-$stack.log
status=0
"$kns" recover --stack "$stack" --force 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
if [ "$status" != 0 ]; then
  echo "ci-recover: recovery of stack $stack stopped (above, and in $log)" >&2
  exit "$status"
fi
"$kns" applied --stack "$stack" --record HEAD
