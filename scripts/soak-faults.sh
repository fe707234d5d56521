#!/usr/bin/env bash
# Run the engine fault module (tests/test_faults_engine.py) RUNS times in a row (default 10)
# while BUSY busy loops (default: one per core) keep the machine loaded, and report each
# run's result and time (docs/testing.md, "The fault module on a loaded machine"). Exits
# non-zero if any run failed. The busy loops stop with the script, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-10}
busy=${BUSY:-$(nproc)}
out=build/soak
mkdir -p "$out"
loops=()
stop_loops() { ((${#loops[@]} == 0)) || kill "${loops[@]}" 2>/dev/null || true; }
trap stop_loops EXIT
for _ in $(seq "$busy"); do
  (while :; do :; done) &
  loops+=("$!")
done
echo "soak: $runs runs of tests/test_faults_engine.py with $busy busy loop(s) on $(nproc) core(s)" >&2
failed=0
for i in $(seq "$runs"); do
  start=$(date +%s)
  if .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_faults_engine.py >"$out/run-$i.log" 2>&1; then
    result=passed
  else
    result=FAILED failed=$((failed + 1))
  fi
  echo "soak: run $i $result in $(($(date +%s) - start))s: $(tail -n 1 "$out/run-$i.log")" >&2
done
echo "soak: $((runs - failed)) of $runs runs passed (logs in $out/)" >&2
((failed == 0))
