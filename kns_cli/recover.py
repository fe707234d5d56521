"""`./kns recover`: the one command to run after an interrupted `pulumi up` (a cancelled CI
job, a killed laptop session, an API server that went away mid-update). It brings the
stack's state, the cluster and the config back into agreement (docs/operations.md).

The steps, each of which is safe to repeat:

1. **The lock.** A killed engine leaves the stack locked (a file backend's lock file names
   the process, its host and its start). A lock held by a live `pulumi` process on this
   host stops recovery: that update is still running. A lock from another host (a CI
   runner) is removed only with `--force`, as the operator's word that the run is over;
   on this host, a lock whose process is gone is stale and removed (`pulumi cancel`).
   Before that, a file backend's half-written attribute files are removed: the storage
   library under the engine writes `<file>.attrs` (a blob's content type and checksum) in
   place, not atomically, so a kill in the middle leaves it empty or cut short, and every
   later command then fails with "failed to load checkpoint: EOF". The blob itself is
   written to a temporary file and renamed, so it is whole; without its attributes file it
   reads as before.
2. **Refresh** (`pulumi refresh --clear-pending-creates`): the state is made to match the
   cluster, once the platform's objects that are being deleted are gone (a namespace the
   interrupted run deleted would otherwise stay in the state while it terminates). An
   object the interrupted run deleted leaves the state; a create it left pending is dropped from the state (the next step creates it again: the Kubernetes
   provider creates with server-side apply, an upsert, so the object that may exist is
   adopted, not duplicated).
3. **Up**: the config applied as `make up` applies it (the engine settings of
   scripts/lib/engine.sh, the policy pack).
4. **Sweep**: an object that carries the stack's `kns.io/cluster` label, was made by the
   platform (no owner: not a controller's child) and is of a kind the platform registers,
   but is not in the stack's state, is deleted. Such an object is left by an interrupted
   create whose entry was then removed from the config, or by a state written before the
   interruption (PULUMI_SKIP_CHECKPOINTS, scripts/lib/engine.sh). On a MultiKueue site
   every cluster is swept, the manager and each worker, each through its own credentials
   (its kubeconfig or context in the config), against the state's objects of that
   cluster's provider only (a worker's namespace may have the manager's name).
5. **Check**: `pulumi preview --expect-no-changes`; recovery succeeded only if it is clean.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from chrono import calendar, moments
from config import kubeconfig as kubeconfig_rules
from config.platform import PlatformConfig
from config.names import LABEL_CLUSTER
from plan import stacks
from plan.reservation_switch import edge_schedule
from plan.reservations import BOOTSTRAP, SWITCH, namespace_name
from plan.identity import object_id, type_token
from plan.inventory import registrations
from plan.stackplan import StackPlan

from . import preview as engine
from .stack import SECRET_PLACEHOLDER

SWEEP_TIMEOUT = 300  # seconds for swept objects to be gone (a namespace waits for its content)


class RecoverFailed(Exception):
    """Recovery stopped: the message says at which step and what to do."""


@dataclass(frozen=True)
class Lock:
    path: Path
    pid: int
    hostname: str
    username: str
    timestamp: str

    def describe(self) -> str:
        return f"pid {self.pid} of {self.username}@{self.hostname} since {self.timestamp}"


def say(message: str) -> None:
    print(f"kns recover: {message}", file=sys.stderr, flush=True)


def file_backend(env: Mapping[str, str]) -> Optional[Path]:
    url = env.get("PULUMI_BACKEND_URL", "")
    return Path(os.path.expanduser(url[len("file://"):])) if url.startswith("file://") else None


def repair_backend(backend: Path) -> list[Path]:
    """Remove the attribute files under the backend's `.pulumi/` that are not a JSON object
    (left cut short by a killed engine: the module's step 1); the paths removed."""
    removed = []
    for path in sorted((backend / ".pulumi").rglob("*.attrs")):
        try:
            whole = isinstance(json.loads(path.read_text()), dict)
        except (ValueError, UnicodeDecodeError):
            whole = False
        if not whole:
            path.unlink()
            removed.append(path)
    return removed


def stack_locks(backend: Path, project: str, stack: str) -> list[Lock]:
    """The lock files of a file backend's stack (.pulumi/locks/<org>/<project>/<stack>/)."""
    locks = []
    for path in sorted((backend / ".pulumi" / "locks").glob(f"*/{project}/{stack}/*.json")):
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            content = {}
        locks.append(Lock(path, int(content.get("pid") or 0), str(content.get("hostname", "?")),
                          str(content.get("username", "?")), str(content.get("timestamp", "?"))))
    return locks


def running_here(lock: Lock) -> bool:
    """The lock's process is a live pulumi on this host."""
    if lock.hostname != socket.gethostname() or lock.pid <= 0:
        return False
    try:
        name = Path(f"/proc/{lock.pid}/comm").read_text().strip()
        state = Path(f"/proc/{lock.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and name.startswith("pulumi")


def release_lock(project_dir: Path, project: str, stack: str, env: Mapping[str, str], force: bool) -> None:
    backend = file_backend(env)
    if backend is None:
        if force:
            # The backend's lock cannot be read from here, so nothing here can see whether its
            # holder still runs: --force is the word of whoever runs this that none does. CI's
            # recover workflow gives it from the stack's concurrency group (docs/ci.md).
            say("step 1/5: --force on a backend whose lock this cannot read: pulumi cancel, on your word that "
                "no update of the stack still runs")
            pulumi(["cancel", "--yes", stack], project_dir, env, "step 1/5 (cancel)")
        else:
            say("step 1/5: not a file backend: a lock left by the interrupted run is released with --force")
        return
    locks = stack_locks(backend, project, stack)
    if not locks:
        say("step 1/5: the stack is not locked")
        return
    live = [lock for lock in locks if running_here(lock)]
    if live:
        raise RecoverFailed(f"an update of stack {stack} is still running ({'; '.join(l.describe() for l in live)}): "
                            f"let it finish, or stop it (kill -INT <pid>) and run "
                            f"`{stacks.kns_command('recover', stack)}` again")
    elsewhere = [lock for lock in locks if lock.hostname != socket.gethostname()]
    if elsewhere and not force:
        raise RecoverFailed(f"stack {stack} is locked from another host ({'; '.join(l.describe() for l in elsewhere)}): "
                            f"once that run is over (a cancelled CI job), run "
                            f"`{stacks.kns_command('recover --force', stack)}`")
    say(f"step 1/5: removing {len(locks)} stale lock(s) ({'; '.join(l.describe() for l in locks)})")
    pulumi(["cancel", "--yes", stack], project_dir, env, "step 1/5 (cancel)")


def pulumi(args: Sequence[str], project_dir: Path, env: Mapping[str, str], step: str,
           capture: bool = False) -> subprocess.CompletedProcess:
    done = engine._pulumi(args, project_dir, env, stdout=subprocess.PIPE if capture else None)
    if done.returncode != 0:
        raise RecoverFailed(f"{step} failed: pulumi {args[0]} exited {done.returncode} (its messages are above)")
    return done


def kubernetes_types(planned: StackPlan, state: Sequence[Mapping[str, Any]]) -> set[str]:
    """The Kubernetes object types the platform registers: those of the config (plan/inventory)
    and those in the state; node patches are not objects of the platform."""
    types = {item.type for item in registrations(planned)} | {str(r.get("type", "")) for r in state}
    return {t for t in types if t.startswith("kubernetes:") and not t.endswith("Patch")}


def group_kind(type_token: str) -> tuple[str, str]:
    """`kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue` -> (`kueue.x-k8s.io`, `ClusterQueue`).
    An object is the same object whichever version the server serves it in (Kueue serves
    v1beta2 and stops serving v1beta1), so the sweep never keys on the version."""
    _, api, kind = type_token.split(":")
    group = api.rpartition("/")[0]
    return ("" if group == "core" else group), kind


def kubectl_resource(type_token: str) -> str:
    """`kubernetes:apps/v1:Deployment` -> `deployment.apps`; core kinds by name. No version:
    the server answers in the version it prefers, the one the sweep needs to see."""
    group, kind = group_kind(type_token)
    return f"{kind.lower()}.{group}" if group else kind.lower()


def identity(type_or_obj: str | Mapping[str, Any], object_name: str | None = None) -> tuple[str, str, str]:
    """Group, kind and `namespace/name` of a state resource (its type and id) or a live object."""
    if isinstance(type_or_obj, str):
        return (*group_kind(type_or_obj), str(object_name))
    return (*group_kind(type_token(type_or_obj)), object_id(type_or_obj))


def state_resources(project_dir: Path, stack: str, env: Mapping[str, str], step: str) -> list[dict[str, Any]]:
    done = pulumi(["stack", "export", "--stack", stack], project_dir, env, step, capture=True)
    return list((json.loads(done.stdout).get("deployment") or {}).get("resources") or [])


@dataclass(frozen=True)
class Target:
    """One cluster of the stack: the manager (or the only cluster), or a worker of a site."""

    name: str
    # Its Pulumi provider's name (components/cluster.py `cluster_provider`): the state's
    # objects of this cluster are those registered through it.
    provider: str
    kubeconfig: Optional[str]
    context: Optional[str]
    # Where its kubeconfig is in the config, to read it when it is encrypted.
    config_path: str


def targets(cfg: PlatformConfig) -> list[Target]:
    """The stack's clusters: its own, then each worker in config order."""
    out = [Target(cfg.cluster.name, f"{cfg.cluster.name}-kubernetes", cfg.cluster.kubeconfig, cfg.cluster.context,
                  "kns:cluster.kubeconfig")]
    for index, worker in enumerate(cfg.workers):
        out.append(Target(worker.name, f"{worker.name}-kubernetes", worker.kubeconfig, worker.context,
                          f"kns:workers[{index}].kubeconfig"))
    return out


def provider_name(resource: Mapping[str, Any]) -> Optional[str]:
    """The name of the provider a state resource was registered through (its reference is
    `<provider URN>::<provider id>`, the URN ending in `::<name>`)."""
    reference = str(resource.get("provider") or "")
    if "::" not in reference:
        return None
    return reference.rsplit("::", 1)[0].rsplit("::", 1)[-1]


def of_cluster(state: Sequence[Mapping[str, Any]], target: Target, cfg: PlatformConfig) -> list[Mapping[str, Any]]:
    """The state's objects of one cluster: a worker's, those of its provider; the stack's own
    cluster, every other (never fewer than the state holds there, so nothing the state holds
    is swept)."""
    workers = {t.provider for t in targets(cfg)[1:]}
    if target.provider in workers:
        return [r for r in state if provider_name(r) == target.provider]
    return [r for r in state if provider_name(r) not in workers]


@contextmanager
def kubectl_access(target: Target, project_dir: Path, stack: str, env: Mapping[str, str]) -> Iterator[list[str]]:
    """kubectl's arguments for one cluster of the stack: its kubeconfig (a path, or inline
    text, secret or not, written to a private temporary file) and context."""
    args: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kns-recover-") as tmp:
        value = target.kubeconfig
        if value == SECRET_PLACEHOLDER:
            done = pulumi(["config", "get", "--path", target.config_path, "--stack", stack], project_dir, env,
                          f"reading {target.config_path}", capture=True)
            value = done.stdout.rstrip("\n")
        if value:
            if kubeconfig_rules.is_inline(value):
                path = Path(tmp) / "kubeconfig"
                path.touch(mode=0o600)
                path.write_text(value, encoding="utf-8")
            else:
                path = kubeconfig_rules.resolve_path(value, project_dir)
            args += ["--kubeconfig", str(path)]
        if target.context:
            args += ["--context", target.context]
        yield args


def kubectl(access: Sequence[str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(["kubectl", *access, *args], capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise RecoverFailed("recovering a stack on a cluster needs kubectl on PATH") from None
    if check and done.returncode != 0:
        raise RecoverFailed(f"kubectl {args[0]} failed: {done.stderr.strip()}")
    return done


def labelled(access: Sequence[str], cluster: str, types: set[str]) -> list[dict]:
    """Every object of the given types that carries the stack's cluster label."""
    found = []
    for resource in sorted({kubectl_resource(token) for token in types}):
        done = kubectl(access, "get", resource, "--all-namespaces", "-l", f"{LABEL_CLUSTER}={cluster}",
                       "-o", "json", check=False)
        if done.returncode != 0:
            if "the server doesn't have a resource type" in done.stderr:
                continue  # its CRD is not installed: no object of it can exist
            raise RecoverFailed(f"kubectl get {resource} failed: {done.stderr.strip()}")
        found += json.loads(done.stdout).get("items") or []
    return found


def orphans(access: Sequence[str], cluster: str, types: set[str], state: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The platform's objects in the cluster that the state does not hold."""
    return unowned(labelled(access, cluster, types), state)


def unowned(live: Sequence[Mapping[str, Any]], state: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The live objects no state resource holds, matched by group, kind and identity (never the
    API version: an object the state wrote as v1beta1 is the one the server now lists as
    v1beta2). Objects owned by another object, or being deleted, are not the sweep's."""
    owned = {identity(str(r["type"]), r.get("id")) for r in state if str(r.get("type", "")).startswith("kubernetes:")}
    return [dict(obj) for obj in live
            if not obj["metadata"].get("ownerReferences") and not obj["metadata"].get("deletionTimestamp")
            and identity(obj) not in owned]


def scope(obj: Mapping[str, Any]) -> list[str]:
    """kubectl's namespace arguments for one object (none for a cluster-scoped one)."""
    namespace = (obj.get("metadata") or {}).get("namespace")
    return ["--namespace", namespace] if namespace else []


def wait_until_gone(access: Sequence[str], objects: Sequence[dict], what: str) -> None:
    deadline = time.monotonic() + SWEEP_TIMEOUT
    while True:
        left = [obj for obj in objects if kubectl(access, "get", kubectl_resource(type_token(obj)), obj["metadata"]["name"],
                                                  *scope(obj), "--ignore-not-found", "-o", "name").stdout.strip()]
        if not left:
            return
        if time.monotonic() > deadline:
            raise RecoverFailed(f"{what}: still there after {SWEEP_TIMEOUT}s: "
                                + ", ".join(f"{o['kind']} {object_id(o)}" for o in left))
        time.sleep(2)


def settle_deletions(access: Sequence[str], cluster: str, types: set[str], where: str = "") -> int:
    """Wait for the platform's objects that are being deleted (a namespace waits for its
    content) to be gone: refreshed while still there, one would stay in the state, and the
    objects to be created in it would fail once it is gone."""
    deleting = [obj for obj in labelled(access, cluster, types) if obj["metadata"].get("deletionTimestamp")]
    for obj in deleting:
        say(f"step 2/5: waiting for {obj['kind']} {object_id(obj)}{where} to finish being deleted")
    wait_until_gone(access, deleting, "step 2/5 (deletions in progress)")
    return len(deleting)


def sweep(access: Sequence[str], cluster: str, types: set[str], state: Sequence[Mapping[str, Any]],
          where: str = "") -> int:
    found = orphans(access, cluster, types, state)
    for obj in found:
        say(f"step 4/5: deleting {obj['kind']} {object_id(obj)}{where}: labelled {LABEL_CLUSTER}={cluster}, "
            "not in the stack")
        kubectl(access, "delete", kubectl_resource(type_token(obj)), obj["metadata"]["name"], *scope(obj), "--wait=false",
                "--ignore-not-found")
    wait_until_gone(access, found, "step 4/5 (sweep)")
    return len(found)


# A switch run at an edge takes a few seconds, and the CronJob fires on the minute: a
# schedule still on an edge this recent is a run under way, not a stuck switch.
SWITCH_GRACE = timedelta(minutes=3)


def switch_problems(cfg: PlatformConfig, live: Mapping[str, Optional[Mapping[str, Any]]],
                    now: datetime) -> list[str]:
    """What is wrong with each reservation's switch CronJob (`live`: by reservation name, the
    CronJob as the cluster has it, None when missing), compared with the calendar at `now`
    (docs/reservations.md, "The switch"): its next fire must be the next edge (a warm-up or
    an end), or it must be suspended once no window is left. A switch whose Job failed all
    its retries stays on the edge it missed, to fire again a year later, and says nothing."""
    found = []
    for item in cfg.reservations:
        where = f"reservation {item.name}: CronJob {namespace_name(cfg, item.name)}/switch"
        cron = live.get(item.name)
        if cron is None:
            found.append(f"{where} is missing: nothing switches its windows (`{stacks.make_command('up', cfg.stack)}` creates it)")
            continue
        spec = cron.get("spec") or {}
        schedule, suspended = spec.get("schedule"), bool(spec.get("suspend"))
        cal = item.calendar()
        upcoming = calendar.next_edge(cal, now, starts=False)
        if upcoming is None:
            if not suspended:
                found.append(f"{where} is not suspended, though its last window is over")
            continue
        if suspended:
            found.append(f"{where} is suspended, though its next edge is {moments.shown(upcoming, item.zone(), item.start)}: the window is not "
                         "switched")
            continue
        if schedule in (BOOTSTRAP, edge_schedule(upcoming)):
            continue
        recent = calendar.next_edge(cal, now - SWITCH_GRACE, starts=False)
        if recent is not None and recent <= now and schedule == edge_schedule(recent):
            continue  # the run at that edge is under way
        found.append(f'{where} fires at "{schedule}" (UTC), not at its next edge {moments.shown(upcoming, item.zone(), item.start)} '
                     f'("{edge_schedule(upcoming)}"): its last run failed or never ran, and the window\'s state may be '
                     f"wrong; run it now: kubectl create job --from=cronjob/switch -n "
                     f"{namespace_name(cfg, item.name)} switch-now")
    return found


def check_switches(access: Sequence[str], cfg: PlatformConfig, now: datetime) -> list[str]:
    """`switch_problems` of the switches as the cluster has them."""
    live: dict[str, Optional[Mapping[str, Any]]] = {}
    for item in cfg.reservations:
        done = kubectl(access, "get", "cronjob", SWITCH, "-n", namespace_name(cfg, item.name), "-o", "json",
                       check=False)
        live[item.name] = json.loads(done.stdout) if done.returncode == 0 else None
    return switch_problems(cfg, live, now)


def on_worker(cfg: PlatformConfig, target: Target) -> str:
    """How the messages name a worker's cluster (nothing for the stack's own)."""
    return f" on worker {target.name}" if target.name != cfg.cluster.name else ""


def run_recover(project_dir: Path, planned: StackPlan, stack: str, environ: Mapping[str, str],
                force: bool = False) -> int:
    """Recover the stack (the module's steps); 0 once a no-change preview is clean. A stack
    with entry stacks (docs/entry-stacks.md) is recovered whole: each step runs on every one
    of its Pulumi stacks, the stack's first, and the sweep reads all their states."""
    started = time.monotonic()
    cfg = planned.config
    env = engine.engine_environment(project_dir, stack, (), engine.toolchain(), environ)
    backend = file_backend(env)
    for path in repair_backend(backend) if backend else ():
        say(f"step 1/5: removing {path.relative_to(backend)}: cut short by the interrupted run (unreadable JSON)")
    engine.select_stack(project_dir, stack, env, create=False)
    every = stacks.stacks(stack, cfg.state.entry_stacks if cfg.state else None)
    for each in every[1:]:
        engine.select_stack(project_dir, each, env)
    project = engine.project_name(project_dir)
    for each in every:
        release_lock(project_dir, project, each, env, force)
    before = [r for each in every for r in state_resources(project_dir, each, env, "reading the state")]
    with ExitStack() as opened:
        # Every cluster of the stack, each through its own credentials (a site's workers too).
        clusters = [] if cfg.cluster.render_dir else [
            (target, opened.enter_context(kubectl_access(target, project_dir, stack, env))) for target in targets(cfg)]
        types = kubernetes_types(planned, before)
        for target, access in clusters:
            settle_deletions(access, cfg.cluster.name, types, on_worker(cfg, target))
        if cfg.cluster.render_dir:
            say("step 2/5: the stack renders manifests (kns:cluster.renderDir): no cluster to refresh from; "
                "the up rewrites them")
        else:
            say("step 2/5: pulumi refresh --clear-pending-creates (the state made to match the cluster)")
            for each in every:
                pulumi(["refresh", "--yes", "--skip-preview", "--clear-pending-creates", "--stack", each,
                        *stacks.config_arguments(each)], project_dir, env, "step 2/5 (refresh)")

        say("step 3/5: pulumi up (the config applied, as `make up`)")
        policy = ["--policy-pack", str(engine.policy_pack(project_dir))]
        if env.get("KNS_POLICY_CONFIG"):
            policy += ["--policy-pack-config", env["KNS_POLICY_CONFIG"]]
        for each in every:
            pulumi(["up", "--yes", "--skip-preview", "--stack", each, *stacks.config_arguments(each), *policy],
                   project_dir, env, "step 3/5 (up)")

        if cfg.cluster.render_dir:
            say("step 4/5: the stack renders manifests (kns:cluster.renderDir): no cluster to sweep")
        else:
            after = [r for each in every for r in state_resources(project_dir, each, env, "step 4/5 (reading the state)")]
            swept = sum(sweep(access, cfg.cluster.name, types | kubernetes_types(planned, after),
                              of_cluster(after, target, cfg), on_worker(cfg, target)) for target, access in clusters)
            say(f"step 4/5: {swept} object(s) not in the stack deleted"
                + (f" ({len(clusters)} clusters swept)" if cfg.workers else ""))
            if cfg.reservations and clusters:
                problems = check_switches(clusters[0][1], cfg, datetime.now(timezone.utc))
                for problem in problems:
                    say(f"step 4/5: {problem}")
                if not problems:
                    say(f"step 4/5: the switches of {len(cfg.reservations)} reservation(s) fire at their next edges")

    say("step 5/5: pulumi preview --expect-no-changes")
    for each in every:
        pulumi(["preview", "--expect-no-changes", "--stack", each, *stacks.config_arguments(each)], project_dir, env,
               "step 5/5 (the no-change check)")
    say(f"stack {stack} recovered: state, cluster and config agree ({time.monotonic() - started:.0f}s)")
    return 0
