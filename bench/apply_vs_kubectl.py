"""`pulumi up` against a real API server, against `kubectl apply --server-side` of the very
same manifests (the floor a user could pick instead), and the second, no-change `up`
against `kubectl diff --server-side`, on the local control plane (scripts/cluster-up.sh,
kwok nodes), at 100 and 300 entries of bench/common.py's synthetic stack.

The manifests kubectl applies are the stack's own: the same stack rendered by the engine
(`kns:cluster.renderDir`), its Namespaces first. Every arm starts on a cluster of its own,
brought up for it and stopped after (about 15 s), so no two arms share an object, a watch
cache or a controller's backlog: deleting 300 namespaces instead keeps the namespace
controller busy for minutes, under the next arm. Before a no-change run the cluster is left
to settle (each Job has its pod, each quota its status), after the floor's apply as after
`up`. Arms are interleaved round by round and the best of the rounds is kept; every ratio
compares arms of the same run.

Engine settings: `default` is the engine and the Kubernetes provider as they ship (a plain
`pulumi up`); `tuned` is scripts/lib/engine.sh, which scripts/up.sh sources. `default`
runs in the first round only: at 300 entries its `up` takes about half an hour.
`tuned in entry stacks of 100` is `tuned` on the stack split into entry stacks of about 100
entries each (docs/entry-stacks.md): the stack and every entry stack run in turn, as `make
up` runs them, their times summed. `--levers N` adds, at N entries, `default` with its preview and `tuned` without each of its
settings in turn. `--arms tuned` runs only the named arms (comma-separated): at 1,000
entries `default`'s `up` would take hours.

The entries live in a job file (`kns:jobFiles`): with 1,000 entries in the stack file, the
config the engine hands the program (one environment variable) is over Linux's 128 KiB
limit for one variable.

    cd bench && ../.venv/bin/python apply_vs_kubectl.py [sizes...] [--rounds N] [--levers N] [--arms A,B]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from common import recorded, run_timed, synthetic_config, table, write
from kns_testing.cluster import Cluster, local_cluster, node_manifest, script
from kns_cli import preview as preview_module
from kns_cli.engine import engine_settings
from kns_testing.program import PROJECT_FILES, engine_project
from plan import stacks

PASSPHRASE = "bench"
FIELD_MANAGER = "kns-bench-kubectl"
TUNED = engine_settings()
FILES = tuple(name for name in PROJECT_FILES if name != "jobs")  # the stack's entries are its own job file


@dataclass(frozen=True)
class Arm:
    """One way of running the engine: the environment it adds (nothing else of
    scripts/lib/engine.sh is inherited), whether the fresh `up` runs its preview first, and
    whether the no-change runs follow."""

    env: dict[str, str]
    preview: bool = False
    no_change: bool = True
    every_round: bool = True
    # Entries per entry stack (kns:state.entryStacks, docs/entry-stacks.md); 0: one stack.
    per_stack: int = 0


def without(*names: str) -> dict[str, str]:
    return {key: value for key, value in TUNED.items() if key not in names}


ARMS = {
    "default": Arm({}, every_round=False),
    "tuned": Arm(TUNED),
    "tuned with preview": Arm(TUNED, preview=True, no_change=False),
    # Every Pulumi stack run in turn, as `make up` runs them; the times are their sums.
    "tuned in entry stacks of 100": Arm(TUNED, per_stack=100),
}
LEVERS = {
    "default with preview": Arm({}, preview=True, no_change=False, every_round=False),
    "checkpoints off only": Arm({"PULUMI_SKIP_CHECKPOINTS": "true"}),
    "tuned, parallel 4 per core": Arm(without("PULUMI_PARALLEL")),
    "tuned, client 50/s burst 120": Arm(without("PULUMI_K8S_CLIENT_QPS", "PULUMI_K8S_CLIENT_BURST")),
    "tuned, serial diffs": Arm(without("PULUMI_PARALLEL_DIFF")),
}


def nodes() -> list[dict]:
    """The synthetic stack's pool nodes, and one plain node for the packing scheduler's pod
    (its Deployment is awaited until Ready; the stack has no system pool)."""
    return ([node_manifest(f"vc-{n}", 16, 0) for n in range(8)] + [node_manifest(f"gpu-{n}", 64, 8) for n in range(4)]
            + [node_manifest("plain-0", 16, 0)])


def timed(command: list[str], cwd: Optional[Path], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command and every process it started) of a
    command that must succeed (`kubectl diff` exits 1 on a difference: not a no-change run)."""
    seconds, cpu, _ = run_timed(command, cwd, env)
    return seconds, cpu


class Project:
    """A copy of the project with a file backend and one stack `bench` of `config`, its
    entries in jobs/bench.yaml."""

    def __init__(self, where: Path, bin_dir: str, config: dict, base_env: Optional[dict[str, str]] = None):
        self.root = where / "kns-platform"
        env = engine_project(self.root, bin_dir, PASSPHRASE, base_env=base_env, files=FILES)
        self.env = {key: value for key, value in env.items() if key not in TUNED}
        config = dict(config)
        entries = {"jobs": config.pop("jobs", []), "schedules": config.pop("schedules", [])}
        (self.root / "jobs").mkdir()
        (self.root / "jobs" / "bench.yaml").write_text(yaml.safe_dump(entries, sort_keys=False))
        stack = {"config": {f"kns:{k}": v for k, v in {**config, "jobFiles": ["jobs/bench.yaml"]}.items()}}
        (self.root / "Pulumi.bench.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
        self.pulumi({}, "stack", "init", "bench")

    def pulumi(self, env: dict[str, str], *args: str) -> tuple[float, float]:
        return timed(["pulumi", *args, "--non-interactive"], self.root, {**self.env, **env})


def rendered(config: dict, bin_dir: str, where: Path) -> Path:
    """The stack's manifests, rendered by the engine, laid out for `kubectl apply -R`:
    Namespaces in 0-namespaces/, everything else in 1-objects/ (kubectl walks in order)."""
    out = where / "render"
    project = Project(where, bin_dir, {**config, "cluster": {**config["cluster"], "renderDir": str(out)}})
    project.pulumi(TUNED, "up", "--yes", "--skip-preview")
    manifests = where / "kubectl"
    for part in ("0-namespaces", "1-objects"):
        (manifests / part).mkdir(parents=True)
    for path in sorted(out.rglob("*.yaml")):
        kind = yaml.safe_load(path.read_text())["kind"]
        shutil.copy(path, manifests / ("0-namespaces" if kind == "Namespace" else "1-objects") / path.name)
    return manifests


def settle(cluster: Cluster, jobs: int, timeout: float = 300) -> None:
    """Wait until the controllers have caught up with a fresh apply: every Job has its pod
    and every quota its status."""
    def quiet() -> bool:
        pods = cluster.get("pods", "-A", "-l", "kns.io/job")["items"]
        quotas = cluster.get("resourcequotas", "-A")["items"]
        return len(pods) >= jobs and all(q.get("status", {}).get("hard") for q in quotas)
    cluster.wait(quiet, timeout, every=2, message=f"{jobs} Job pods and every quota's status")


def floor(state: Path, manifests: Path, jobs: int) -> dict[str, float]:
    """kubectl on a fresh cluster: `apply --server-side` of every manifest, then `diff`."""
    out: dict[str, float] = {}
    with local_cluster(state, nodes()) as cluster:
        flags = ["--server-side", f"--field-manager={FIELD_MANAGER}", "-f", str(manifests), "-R"]
        out["apply"], out["apply_cpu"] = timed(["kubectl", "apply", *flags], None, cluster.env)
        settle(cluster, jobs)
        out["diff"], out["diff_cpu"] = timed(["kubectl", "diff", *flags], None, cluster.env)
    return out


def engine(state: Path, bin_dir: str, config: dict, arm: Arm, jobs: int) -> dict[str, float]:
    """`pulumi up` of a fresh stack on a fresh cluster; then, for `no_change` arms, the
    second `up` (with its preview, then with --skip-preview) and a `preview`, all no-change."""
    out: dict[str, float] = {}
    with local_cluster(state / "cluster", nodes()) as cluster:
        target = {"name": config["cluster"]["name"], "kubeconfig": str(cluster.kubeconfig)}
        split = max(1, round((len(config["jobs"]) + len(config["schedules"])) / arm.per_stack)) if arm.per_stack else None
        project = Project(state / "project", bin_dir, {**config, "cluster": target,
                                                        **({"state": {"entryStacks": split}} if split else {})},
                          base_env=cluster.env)
        every = stacks.stacks("bench", split)
        for name in every[1:]:
            preview_module.select_stack(project.root, name, project.env)

        def run(*args: str) -> tuple[float, float]:
            times = [project.pulumi(arm.env, *args, "--stack", name, *stacks.config_arguments(name)) for name in every]
            return sum(wall for wall, _ in times), sum(cpu for _, cpu in times)
        fresh = ("up", "--yes") if arm.preview else ("up", "--yes", "--skip-preview")
        out["up"], out["up_cpu"] = run(*fresh)
        if arm.no_change:
            settle(cluster, jobs)
            for key, args in (("noop_up", ("up", "--yes")), ("noop_up_skip_preview", ("up", "--yes", "--skip-preview")),
                              ("preview", ("preview",))):
                out[key], out[f"{key}_cpu"] = run(*args, "--expect-no-changes")
    return out


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: min(run[key] for run in runs) for key in runs[0]}


def ratio(value: Optional[float], base: float) -> str:
    return "-" if value is None else f"{value / base:.2f}"


def seconds(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 300])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--levers", type=int, metavar="N", help="at N entries, also default with its preview and tuned without each setting")
    parser.add_argument("--arms", help=f"only these arms, comma-separated (of: {', '.join(ARMS)})")
    options = parser.parse_args()
    chosen = [name.strip() for name in options.arms.split(",")] if options.arms else list(ARMS)
    unknown = [name for name in chosen if name not in ARMS]
    if unknown:
        parser.error(f"no arm {', '.join(unknown)} (arms: {', '.join(ARMS)})")
    bin_dir = script("toolchain.sh")
    results, rows = [], []
    for size in options.sizes:
        arms = {**{name: ARMS[name] for name in chosen}, **(LEVERS if size == options.levers else {})}
        config = synthetic_config(size)
        jobs = len(config["jobs"])
        runs: dict[str, list[dict[str, float]]] = {"kubectl": []}
        with tempfile.TemporaryDirectory() as tmp:
            manifests = rendered(config, bin_dir, Path(tmp) / "render")
            objects = len(list(manifests.rglob("*.yaml")))
            for round_ in range(options.rounds):
                runs["kubectl"].append(floor(Path(tmp) / f"kubectl-{round_}", manifests, jobs))
                print(f"{size} entries, round {round_}, kubectl: {runs['kubectl'][-1]}", flush=True)
                for index, (name, arm) in enumerate(arms.items()):
                    if round_ and not arm.every_round:
                        continue
                    runs.setdefault(name, []).append(engine(Path(tmp) / f"arm{index}-{round_}", bin_dir, config, arm, jobs))
                    print(f"{size} entries, round {round_}, {name}: {runs[name][-1]}", flush=True)
        floor_ = best(runs["kubectl"])
        measured = {name: best(runs[name]) for name in arms}
        results.append({"entries": size, "objects": objects, "best": {"kubectl": floor_, **measured}, "runs": runs})
        for name, got in measured.items():
            rows.append([size, objects, name, seconds(got["up"]), seconds(floor_["apply"]), ratio(got["up"], floor_["apply"]),
                         seconds(got.get("noop_up")), seconds(got.get("noop_up_skip_preview")), seconds(got.get("preview")),
                         seconds(floor_["diff"]), ratio(got.get("noop_up"), floor_["diff"]),
                         ratio(got.get("noop_up_skip_preview"), floor_["diff"]), ratio(got.get("preview"), floor_["diff"])])
    print(table(["entries", "objects", "engine", "up s", "apply s", "up/apply", "no-change up s", "…--skip-preview s",
                 "preview s", "diff s", "up/diff", "…--skip-preview/diff", "preview/diff"], rows))
    print(f"written: {write('apply_vs_kubectl', {'results': results, 'arms': {k: vars(v) for k, v in {**ARMS, **LEVERS}.items()}})}")


if __name__ == "__main__":
    with recorded("apply_vs_kubectl"):
        main()
