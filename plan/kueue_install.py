"""Kueue as the program installs it (`kns:queueing.install: true`, docs/queueing.md): the
upstream install manifests of the pinned version, vendored in vendor/kueue/ with the
command that made them, held to the platform's rules for its own system namespaces.

What changes from upstream, and nothing else: every object carries the cluster label
(the stack owns it); namespace `kueue-system` enforces Pod Security `restricted`, as the
platform's system namespace does; the controller's pods tolerate and prefer the `system`
pools, as the schedulers' do; its container runs as a numeric non-root user with the
RuntimeDefault seccomp profile (upstream already drops every capability, forbids
privilege escalation and mounts the root read-only) and bounds its local disk with
ephemeral-storage requests and limits; its Deployment carries the kube-score checks it
keeps on purpose. The controller image stays upstream's, pinned by version.
"""

from __future__ import annotations

import copy
import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import yaml

from config import names
from config.models import PLATFORM_UID, FairSharing, MultiKueueSettings, Network, NodePool

from . import network
from .identity import kubernetes_type, object_id, type_token
from .schedulers import EPHEMERAL, KUBE_SCORE_IGNORE, system_placement

# The Kueue version the vendored manifests are of; versions.env pins the same one for the
# manager the tests build (tests/test_versions.py holds them together).
KUEUE_VERSION = "0.19.2"
IMAGE = f"registry.k8s.io/kueue/kueue:v{KUEUE_VERSION}"
POD_SECURITY = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}


# The program's KueueInstall component (components/kueue.py), and its project (where the
# vendored manifests are).
COMPONENT = "kueue"
PROJECT_DIR = Path(__file__).resolve().parent.parent


def manifest_path(project_dir: Path) -> Path:
    return project_dir / "vendor" / "kueue" / f"v{KUEUE_VERSION}" / "manifests.yaml"


def load(project_dir: Path) -> list[dict[str, Any]]:
    """The vendored upstream objects, in file order."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(manifest_path(project_dir), encoding="utf-8") as handle:
        return [doc for doc in yaml.load_all(handle, Loader=loader) if doc]


@lru_cache(maxsize=4)
def _registered(path: str, stamp: tuple[int, int]) -> tuple[tuple[str, str, str], ...]:
    with open(path, encoding="utf-8") as handle:
        objects = [doc for doc in yaml.load_all(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if doc]
    return tuple((type_token(obj), object_id(obj), obj["kind"]) for obj in objects)


def registered(project_dir: Path = PROJECT_DIR, isolated: bool = False) -> tuple[tuple[str, str, str], ...]:
    """(type, logical name, kind) of every object the component registers, in file order
    (install_objects changes neither kinds nor names), then each namespace's isolation
    when `isolated` (kns:network); read once per process and file version, for
    plan/inventory.py."""
    path = manifest_path(project_dir)
    stat = path.stat()
    found = _registered(str(path), (stat.st_mtime_ns, stat.st_size))
    if not isolated:
        return found
    policy = kubernetes_type(network.API_VERSION, "NetworkPolicy")
    return found + tuple((policy, f"{name}/{network.POLICY}", "NetworkPolicy")
                         for _, name, kind in found if kind == "Namespace")


CONFIG_KEY = "controller_manager_config.yaml"
# On the controller's pods when the program changes Kueue's configuration, so that a change
# rolls the controller (it reads the file once, at start).
CONFIG_HASH = "kns.io/kueue-config"
# kube-score checks the controller's Deployment keeps on purpose (docs/queueing.md,
# tests/test_manifest_lint.py): pod-networkpolicy without kns:network isolation (the network
# is the site's then; isolated, its namespace has its NetworkPolicy); deployment-replicas, upstream's single replica (its manager leader-elects,
# so a second one would only stand by).
KUBE_SCORE_IGNORED = ("pod-networkpolicy", "deployment-replicas")


# The fields of Kueue's Configuration the program sets from `kns:queueing`; the rest is
# upstream's. A Kueue the tests run as a process is started with exactly these, taken from
# the configuration the program renders (kns_testing/kueue.py `start_kueue`).
OWNED_FIELDS = ("waitForPodsReady", "resources", "multiKueue", "fairSharing", "admissionFairSharing")


def owned_configuration(wait_for_pods_ready: Optional[str] = None,
                        device_mappings: Optional[list[dict[str, Any]]] = None,
                        multi_kueue: Optional[MultiKueueSettings] = None,
                        fair_sharing: Optional[FairSharing] = None) -> dict[str, Any]:
    """What the config sets in Kueue's Configuration: `waitForPodsReady` (from
    `kns:queueing`) evicts and requeues whole an admitted Job whose pods are not all Ready
    within the timeout; `resources.deviceClassMappings` (from the DRA pools) counts each
    kind of GPU device as one resource of the queues' quota (docs/gpus.md); `multiKueue`
    (a site's manager only, from `kns:queueing.multiKueue`): the settings given, Kueue's
    defaults for the rest (docs/multicluster.md); `fairSharing` (its presence turns Kueue's
    fair sharing between the queues of a cohort on) and `admissionFairSharing` (the order
    of a `usageBased` queue's entries by past usage, always with a half-life: Kueue's is 0
    when left out, which orders nothing) from `kns:queueing.fairSharing` (docs/queueing.md)."""
    owned: dict[str, Any] = {}
    if wait_for_pods_ready:
        owned["waitForPodsReady"] = {"timeout": wait_for_pods_ready}
    if device_mappings:
        owned["resources"] = {"deviceClassMappings": device_mappings}
    if multi_kueue is not None:
        given = {"workerLostTimeout": multi_kueue.worker_lost_timeout, "gcInterval": multi_kueue.gc_interval}
        if any(value is not None for value in given.values()):
            owned["multiKueue"] = {key: value for key, value in given.items() if value is not None}
    if fair_sharing is not None:
        owned["fairSharing"] = ({"preemptionStrategies": list(fair_sharing.preemption_strategies)}
                                if fair_sharing.preemption_strategies else {})
        admission = fair_sharing.admission
        if admission is not None:
            owned["admissionFairSharing"] = {"usageHalfLifeTime": admission.usage_half_life}
            if admission.sampling_interval is not None:
                owned["admissionFairSharing"]["usageSamplingInterval"] = admission.sampling_interval
            if admission.resource_weights:
                owned["admissionFairSharing"]["resourceWeights"] = dict(admission.resource_weights)
    return owned


def configuration(objects: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """Kueue's Configuration as the given install objects carry it (its ConfigMap)."""
    for obj in objects:
        if obj["kind"] == "ConfigMap" and CONFIG_KEY in (obj.get("data") or {}):
            return yaml.safe_load(obj["data"][CONFIG_KEY])
    return None


def install_objects(upstream: list[dict[str, Any]], cluster: str, pools: list[NodePool],
                    wait_for_pods_ready: Optional[str] = None,
                    device_mappings: Optional[list[dict[str, Any]]] = None,
                    multi_kueue: Optional[MultiKueueSettings] = None,
                    fair_sharing: Optional[FairSharing] = None,
                    isolation: Optional[Network] = None) -> list[dict[str, Any]]:
    """The upstream objects with the platform's rules applied (see the module docstring),
    the settings of `kns:queueing` the program owns (`owned_configuration`) in the
    controller's configuration, and the isolation of Kueue's namespace (`kns:network`)."""
    out = []
    configured = None
    owned = owned_configuration(wait_for_pods_ready, device_mappings, multi_kueue, fair_sharing)
    for document in upstream:
        obj = copy.deepcopy(document)
        metadata = obj.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), names.LABEL_CLUSTER: cluster}
        if obj["kind"] == "Namespace":
            metadata["labels"].update(POD_SECURITY)
        if obj["kind"] == "ConfigMap" and CONFIG_KEY in (obj.get("data") or {}) and owned:
            config = yaml.safe_load(obj["data"][CONFIG_KEY])
            config.update(owned)
            obj["data"][CONFIG_KEY] = configured = yaml.safe_dump(config, sort_keys=False)
        out.append(obj)
    for obj in out:
        if obj["kind"] == "Deployment":
            _harden(obj["spec"]["template"]["spec"], pools)
            ignored = [check for check in KUBE_SCORE_IGNORED if check != "pod-networkpolicy" or isolation is None
                       or not isolation.isolated]
            obj["metadata"].setdefault("annotations", {})[KUBE_SCORE_IGNORE] = ",".join(ignored)
            if configured is not None:
                template = obj["spec"]["template"].setdefault("metadata", {})
                template.setdefault("annotations", {})[CONFIG_HASH] = hashlib.sha256(configured.encode()).hexdigest()[:16]
    if isolation is not None:
        for obj in [o for o in out if o["kind"] == "Namespace"]:
            policy = network.platform_policy(isolation, obj["metadata"]["name"],
                                             {names.LABEL_CLUSTER: cluster, **names.MANAGED_BY}, network.KUEUE_SERVED)
            out += [policy] if policy is not None else []
    return out


def _harden(pod: dict[str, Any], pools: list[NodePool]) -> None:
    pod.update(system_placement(pools))
    pod.setdefault("securityContext", {}).update(
        {"runAsNonRoot": True, "runAsUser": PLATFORM_UID, "runAsGroup": PLATFORM_UID,
         "seccompProfile": {"type": "RuntimeDefault"}})
    for container in pod.get("containers", []):
        # Bounds on its local disk, as the platform's other containers have: it writes only
        # logs and the visibility server's certificate.
        resources = container.setdefault("resources", {})
        for side, amounts in EPHEMERAL.items():
            resources.setdefault(side, {}).update(amounts)
        container.setdefault("securityContext", {}).update({
            "runAsNonRoot": True, "runAsUser": PLATFORM_UID, "runAsGroup": PLATFORM_UID,
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
        })
