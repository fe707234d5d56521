"""scripts/lib/gomod.sh `parallel`/`parallel_wait`, which every build script runs its Go
builds through: side by side by default, at most KNS_BUILD_JOBS at once when set (1: one
after another, docs/testing.md "CI time"), every failed job named."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kns_testing.pace import slack
from kns_testing.program import ROOT

# A job logs its start (with how many jobs had ended), may wait until other jobs have started
# (a rendezvous, so a test of "side by side" fails by timing out when they do not run
# together), then logs its end.
SCRIPT = r"""
set -euo pipefail
KNS_SCRIPT=test-build-jobs
. "$1/scripts/lib/gomod.sh"
log_file=$2
job() { # name exit-code others-to-wait-for... [-- another-to-give-2-seconds]
  local name=$1 code=$2 other tries
  shift 2
  echo "start $name $(grep -c '^end ' "$log_file" || true)" >>"$log_file"
  while (($#)) && [[ $1 != -- ]]; do
    until grep -q "^start $1 " "$log_file"; do sleep 0.05; done
    shift
  done
  if (($#)); then
    for ((tries = 0; tries < 40; tries++)); do
      ! grep -q "^start $2 " "$log_file" || break
      sleep 0.05
    done
  fi
  echo "end $name" >>"$log_file"
  return "$code"
}
shift 2
eval "$*"
"""


def run(tmp_path: Path, jobs: str, body: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = tmp_path / "jobs.log"
    log.write_text("")
    env = {"PATH": "/usr/bin:/bin", **({"KNS_BUILD_JOBS": jobs} if jobs else {})}
    done = subprocess.run(["bash", "-c", SCRIPT, "test", str(ROOT), str(log), body], env=env,
                          capture_output=True, text=True, timeout=slack())
    return done, log.read_text().splitlines()


def test_by_default_every_job_runs_at_once(tmp_path):
    done, lines = run(tmp_path, "", "parallel a job a 0 b c; parallel b job b 0 a c; parallel c job c 0 a b; "
                                    "parallel_wait")
    assert done.returncode == 0, done.stderr
    assert sorted(lines) == ["end a", "end b", "end c", "start a 0", "start b 0", "start c 0"]


def test_a_bound_starts_a_job_only_when_one_has_ended(tmp_path):
    # a and b meet (two at once) and give c two seconds to start beside them (without the
    # bound it does); with it, c may start only once one of them has ended.
    done, lines = run(tmp_path, "2", "parallel a job a 0 b -- c; parallel b job b 0 a -- c; parallel c job c 0; "
                                     "parallel_wait")
    assert done.returncode == 0, done.stderr
    assert {"start a 0", "start b 0"} <= set(lines)
    started_c = next(line for line in lines if line.startswith("start c "))
    assert started_c != "start c 0", f"c started while a and b both ran: {lines}"


def test_one_job_runs_after_another(tmp_path):
    done, lines = run(tmp_path, "1", "parallel a job a 0; parallel b job b 0; parallel c job c 0; parallel_wait")
    assert done.returncode == 0, done.stderr
    assert lines == ["start a 0", "end a", "start b 1", "end b", "start c 2", "end c"]


def test_every_failed_job_is_named_with_or_without_a_bound(tmp_path):
    for jobs in ("", "1"):
        done, lines = run(tmp_path, jobs, "parallel a job a 3; parallel b job b 0; parallel c job c 1; parallel_wait")
        assert done.returncode == 1, (jobs, done.stderr)
        assert "failed: a c (its error is above)" in done.stderr, (jobs, done.stderr)
        assert sum(line.startswith("end ") for line in lines) == 3, (jobs, lines)


def test_a_bound_that_is_not_a_number_is_refused(tmp_path):
    done, lines = run(tmp_path, "two", "parallel a job a 0; parallel_wait")
    assert done.returncode == 1
    assert "KNS_BUILD_JOBS must be a number of jobs (got 'two')" in done.stderr
    assert lines == []
