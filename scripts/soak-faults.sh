#!/usr/bin/env bash
# Run the engine fault module (tests/test_faults_engine.py) RUNS times in a row (default 10)
# while BUSY busy loops (default: one per core) keep the machine loaded, and report each
# run's result and time (docs/testing.md, "The fault module on a loaded machine"). Then the
# controls (tests marked `control`, which `make test` deselects): the stock provider, built
# without scripts/patches/ into its own Pulumi home, must panic on the fault the patched one
# survives. Exits non-zero if any run or control failed. The busy loops stop with the
# script, however it ends.
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

# The control: the stock provider (no patch), in a Pulumi home of its own so that the
# patched one in the plugin cache stays as it is.
unpatched_home=$PWD/build/unpatched-pulumi-home
mkdir -p "$unpatched_home"
if PULUMI_HOME=$unpatched_home KNS_PROVIDER_PATCH=none KNS_PLUGIN_INSTALL=off bash scripts/toolchain.sh >/dev/null 2>"$out/unpatched-toolchain.log" &&
  KNS_UNPATCHED_PULUMI_HOME=$unpatched_home .venv/bin/python -m pytest -q -p no:cacheprovider -m control \
    tests/test_faults_engine.py >"$out/control.log" 2>&1; then
  echo "soak: control passed: the unpatched provider panics on the fault: $(tail -n 1 "$out/control.log")" >&2
else
  failed=$((failed + 1))
  echo "soak: control FAILED (logs $out/unpatched-toolchain.log, $out/control.log)" >&2
fi
((failed == 0))
