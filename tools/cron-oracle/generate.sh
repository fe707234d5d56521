#!/usr/bin/env bash
# Regenerates tests/fixtures/cron-oracle.jsonl: builds the oracle (robfig/cron v3.0.1, as
# the Kubernetes API server and CronJob controller use it) and answers every case of
# tools/cron-oracle/cases.jsonl. Each fixture line is the case with the answer merged in.
# Usage: bash tools/cron-oracle/generate.sh   (from anywhere; needs go and python3)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
(cd "$here" && go build -buildvcs=false -trimpath -o "$build/cron-oracle" .)
"$build/cron-oracle" <"$here/cases.jsonl" >"$build/answers.jsonl"
python3 - "$here/cases.jsonl" "$build/answers.jsonl" "$root/tests/fixtures/cron-oracle.jsonl" <<'PY'
import json, sys
cases = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
answers = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8")]
assert len(cases) == len(answers), (len(cases), len(answers))
with open(sys.argv[3], "w", encoding="utf-8") as out:
    for case, answer in zip(cases, answers):
        out.write(json.dumps({**case, **answer}, ensure_ascii=False) + "\n")
print(f"{len(cases)} cases -> {sys.argv[3]}")
PY
