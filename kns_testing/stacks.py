"""A project copy deployed by the real engine on the local control plane (`Stack`), and
the timing of its `up` against the cron schedules it sets."""

from __future__ import annotations

import math
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from kns_testing import pace
from kns_testing.cluster import Cluster, script
from kns_testing.program import engine_project


def server_time(stamp: str) -> datetime:
    """An API timestamp, to the fraction of a second where the API gives one (MicroTime,
    kwok's RFC 3339 with nanoseconds), whole seconds otherwise (metav1.Time)."""
    whole, _, fraction = stamp.removesuffix("Z").partition(".")
    instant = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return instant + timedelta(microseconds=int(fraction[:6].ljust(6, "0"))) if fraction else instant


class Stack:
    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env = root, env
        self.up_seconds = 0.0  # how long the last `up` took on this machine

    def up(self) -> None:
        started = time.monotonic()
        self.pulumi("up", "--yes")
        self.up_seconds = time.monotonic() - started
        pace.measured(self.up_seconds)

    def entry(self, section: str, name: str) -> dict:
        document = yaml.safe_load((self.root / "Pulumi.local.yaml").read_text())
        return next(e for e in document["config"][section] if e["name"] == name)

    def entry_value(self, section: str, key: str, default):
        document = yaml.safe_load((self.root / "Pulumi.local.yaml").read_text())
        return (document["config"].get(section) or {}).get(key, default)

    def pulumi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=900)
        if check and done.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        return done

    def edit(self, change) -> None:
        path = self.root / "Pulumi.local.yaml"
        document = yaml.safe_load(path.read_text())
        change(document["config"])
        path.write_text(yaml.safe_dump(document, sort_keys=False))


def start_packing_scheduler(cluster: Cluster) -> None:
    """The packing scheduler as a process with exactly the configuration the program
    applied (its Deployment's pods cannot run on simulated nodes)."""
    config = cluster.get("configmap", "kns-packing-config", "-n", "kns-system")["data"]["config.yaml"]
    config_path = cluster.state / "kns-packing.yaml"
    config_path.write_text(config)
    script("scheduler-process.sh", str(cluster.state), str(config_path), timeout=300)


def up_with_schedules_ahead(stack, warm_up: int, set_schedules) -> tuple[datetime, datetime]:
    """`up` with schedules (`set_schedules(config, start)` puts them in) whose primers fire
    after this `up` has finished: three times as far away as the last `up` took on this
    machine (at least two minutes), and a new minute if even that was not enough (the
    controller does not run a time that passed before the CronJob existed). (start, primer)."""
    for _ in range(3):
        lead = max(120, math.ceil(3 * stack.up_seconds))
        start = (datetime.now(timezone.utc) + timedelta(minutes=warm_up, seconds=lead)).replace(second=0, microsecond=0)
        primer = start - timedelta(minutes=warm_up)
        stack.edit(lambda config, start=start: set_schedules(config, start))
        stack.up()
        if datetime.now(timezone.utc) < primer:
            return start, primer
    pytest.fail(f"three `pulumi up` runs each outlasted three times the one before ({stack.up_seconds:.0f}s)")


PASSPHRASE = "kns-local-queueing"


def project(tmp_path_factory, cluster: Cluster, name: str, config: dict) -> Stack:
    root = tmp_path_factory.mktemp(name) / "kns-platform"
    env = engine_project(root, script("toolchain.sh"), PASSPHRASE, base_env=cluster.env)
    (root / "Pulumi.local.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    live = Stack(root, env)
    live.pulumi("stack", "init", "local")
    return live


def condition(obj: dict, kind: str) -> dict | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def is_true(obj: dict, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found["status"] == "True"
