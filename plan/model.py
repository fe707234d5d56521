"""What one entry becomes: its `WorkloadPlan`, and the problems only planning reveals.

Pure data, read by the components that build it (components/workload.py,
components/namespace.py) and by the offline `kns` commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from config.errors import Problem
from config.models import NodePool, Profile, Schedule, Workload
from config.podspec import CREDENTIALS_VOLUME
from chrono.prescale import Primers

if TYPE_CHECKING:
    from config.devices import DeviceAsk

    from .accounting import PodAccount


@dataclass
class WorkloadPlan:
    """Everything one entry produces, derived from validated config."""

    entry: Workload
    namespace: str
    labels: dict[str, str]
    pod_security: str
    pool: Optional[NodePool]
    profile: Profile
    # The profile rules that match the entry, in the order they apply (config/resolve.py).
    profile_rules: list[str]
    resources: dict[str, dict[str, str]]
    limit_range: dict[str, Any]
    quota: dict[str, str]
    role_rules: list[dict[str, Any]]
    scheduler_name: Optional[str]
    primers: Optional[Primers] = None
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    # object name -> manifest: the Job, the CronJob, or one CronJob per primer schedule
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A distributed entry's headless Service, which names its workers (docs/distributed.md).
    service: Optional[dict[str, Any]] = None
    # The GPU devices each pod claims on a DRA pool, and the claim object that asks them: a
    # ResourceClaimTemplate, or the ResourceClaim the pods share (docs/gpus.md).
    device_ask: Optional["DeviceAsk"] = None
    claim: Optional[dict[str, Any]] = None
    # What one pod counts and how many run at once (plan/accounting.py), settled by the planner.
    account: Optional["PodAccount"] = None
    # The NetworkPolicy of its namespace (plan/network.py); None with kns:network.isolation: none.
    network_policy: Optional[dict[str, Any]] = None

    @property
    def is_schedule(self) -> bool:
        return isinstance(self.entry, Schedule)

    @property
    def on_autoscaled_pool(self) -> bool:
        """Its pool is a Karpenter NodePool (docs/autoscaling.md)."""
        return self.pool is not None and self.pool.autoscale is not None

    @property
    def pod_spec(self) -> Optional[dict[str, Any]]:
        """The pod spec the entry runs, as finally built (its Job's, or its first CronJob's:
        primer CronJobs share the template); None for `type: namespace`."""
        if not self.objects:
            return None
        manifest = next(iter(self.objects.values()))
        spec = manifest["spec"]
        return (spec["jobTemplate"]["spec"] if manifest["kind"] == "CronJob" else spec)["template"]["spec"]


@dataclass(frozen=True)
class Child:
    """One object a component registers, planned: its logical name, its manifest, and what
    it is registered after: the siblings whose `key` is in `after`, or, with `waits`,
    whatever the component was told to wait for (its namespace, made elsewhere)."""

    name: str
    manifest: dict[str, Any]
    after: tuple[str, ...] = ()
    waits: bool = False
    # A server-side apply patch of an object the program does not own (a node's labels).
    patch: bool = False

    @property
    def key(self) -> str:
        """`<Kind>/<logical name>`: one child of a component (a Deployment and its Service
        share a logical name, never a kind; a patch's kind is `<Kind>Patch`)."""
        return child_key(self.manifest["kind"] + ("Patch" if self.patch else ""), self.name)


def child_key(kind: str, name: str) -> str:
    return f"{kind}/{name}"


def credential_secret_name(set_name: str) -> str:
    return f"kns-cred-{set_name}"


class PlanError(ValueError):
    """Problems found while building an entry's objects, each at its path relative to the
    entry (`Problem.under` places it)."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in problems))
        self.problems = problems
