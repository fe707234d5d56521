"""Every resource the program will register, by the name it registers it under, before any is.

A Pulumi resource is known by its URN: its type, its parents' types and its logical name.
The program derives logical names from names the user gives (an entry's primer CronJobs
are `<name>-2`, ..., a credential set's Secret `<name>-cred-<set>`), so two derivations can
meet: a schedule `a` with two primer CronJobs next to a schedule named `a-2`. One rule
refuses that, for every name the program generates:

- no two resources share a URN (the same parent types, type and logical name);
- no two entries share a Job or CronJob name: each is named after its entry, so the names
  of Jobs and CronJobs are one scope with the entry names;
- no two resources are one Kubernetes object (the same cluster, kind, namespace and name):
  an entry's namespace `<prefix><entry>` can meet a budget's `<prefix>budget-<name>`, a
  reservation's `<prefix>res-<name>` or the system namespace, a queue's ClusterQueue a
  reservation's, whatever kinds the names were derived for;
- no two providers of an entry stack share a URN: there each cluster's provider is
  registered at the top (`<cluster>-kubernetes`), so a worker named like the cluster would
  be a second one.

The later registration is refused, naming both. `registrations` must list exactly what
components/ registers (tests/test_pod_classes.py compares it with a run under the
recording mocks), so a new resource cannot escape the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

from config.errors import Problem
from config.platform import PlatformConfig
from config.rules import DERIVED_NAME

from config import devices as config_devices, names

from . import devices, identity, kueue_install, multikueue, network, queues, reservations
from .identity import BUDGET_TYPE, JOB_TYPE, MULTIKUEUE_TYPE, PROVIDER_TYPE, RESERVATION_TYPE, RESERVED_POOL_TYPE, \
    SCHEDULE_TYPE, type_token
from .model import WorkloadPlan
from .stackplan import StackPlan
from .schedulers import KNS_ACCOUNT

ORDINALS = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}


@dataclass(frozen=True)
class Registration:
    """One resource: its type chain (parents first), its logical name, the config path of
    what it is derived from (and the field to change), and what it is, in words."""

    types: tuple[str, ...]
    name: str
    owner: str
    field: str
    what: str
    workload_object: bool = False
    # The Kubernetes object it is: (cluster, group/kind, namespace, name); None for components.
    object: Optional[tuple[str, str, str, str]] = None

    @property
    def type(self) -> str:
        return self.types[-1]


def _object(cluster: str, manifest: dict[str, Any]) -> tuple[str, str, str, str]:
    """The identity of a planned object on `cluster` ("" is the manager's, or the one cluster)."""
    group = manifest["apiVersion"].rpartition("/")[0]
    metadata = manifest["metadata"]
    return cluster, f"{group}/{manifest['kind']}", metadata.get("namespace") or "", metadata["name"]


def _named(cluster: str, kind: str, name: str, namespace: str = "") -> tuple[str, str, str, str]:
    """The identity of an object the components build from a name (`kind` is `group/Kind`)."""
    return cluster, kind, namespace, name


def _ordinal(index: int) -> str:
    return ORDINALS.get(index, f"{index}th")


def _cluster(cfg: PlatformConfig) -> Iterator[Registration]:
    cluster = cfg.cluster.name
    yield Registration((identity.CLUSTER_TYPE,), cluster, "kns:cluster", "name", "cluster component")
    yield Registration((identity.CLUSTER_TYPE, PROVIDER_TYPE), f"{cluster}-kubernetes",
                       "kns:cluster", "name", "Kubernetes provider")


def _pools(cfg: PlatformConfig, worker: Optional[str], base: tuple[str, ...]) -> Iterator[Registration]:
    cluster = worker or ""
    for pool in cfg.pools_of(worker):
        owner = f"kns:workers[{worker}].nodePools[{pool.name}]" if worker else f"kns:nodePools[{pool.name}]"
        yield Registration(base + (identity.NODE_POOL_TYPE,), pool.name, owner, "name", "node pool component")
        for node in pool.static_nodes:
            yield Registration(base + (identity.NODE_POOL_TYPE, "kubernetes:core/v1:NodePatch"),
                               identity.patch_name(pool.name, node),
                               owner, "nodes", f'patch of node "{node}"')
        if pool.autoscale is not None:
            yield Registration(base + (identity.NODE_POOL_TYPE, "kubernetes:karpenter.sh/v1:NodePool"), pool.name,
                               owner, "autoscale", "Karpenter NodePool")
        if config_devices.is_dra(pool):
            for kind in config_devices.kinds(pool):
                device_class = config_devices.class_name(pool.name, kind)
                token = identity.kubernetes_type(devices.API_VERSION, "DeviceClass")
                yield Registration(base + (identity.NODE_POOL_TYPE, token),
                                   identity.class_resource_name(device_class), owner, "gpu",
                                   f'DeviceClass "{device_class}"',
                                   object=_named(cluster, "resource.k8s.io/DeviceClass", device_class))


def _schedulers(cfg: PlatformConfig, base: tuple[str, ...] = (), prefix: str = "") -> Iterator[Registration]:
    packing, kns = cfg.packing_scheduler, cfg.kns_scheduler
    if not (packing.enabled or kns.enabled):
        return
    system, cluster = cfg.cluster.system_namespace, prefix[:-1]
    yield Registration(base + (identity.SYSTEM_NAMESPACE_TYPE,), prefix + system, "kns:cluster", "systemNamespace",
                       "system namespace component")
    yield Registration(base + (identity.SYSTEM_NAMESPACE_TYPE, "kubernetes:core/v1:Namespace"), prefix + system,
                       "kns:cluster", "systemNamespace", "system namespace",
                       object=_named(cluster, "/Namespace", system))
    if cfg.network.isolated:
        policy = identity.kubernetes_type(network.API_VERSION, "NetworkPolicy")
        yield Registration(base + (identity.SYSTEM_NAMESPACE_TYPE, policy), f"{prefix}{system}-isolation",
                           "kns:cluster", "systemNamespace", "system namespace's NetworkPolicy")
    if packing.enabled:
        name, chain = prefix + packing.name, base + (identity.PACKING_SCHEDULER_TYPE,)
        parts = [("", ""), ("kubernetes:core/v1:ServiceAccount", ""),
                 ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "-kube-scheduler"),
                 ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "-volume-scheduler"),
                 ("kubernetes:rbac.authorization.k8s.io/v1:Role", "-lease"),
                 ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "-lease"),
                 ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "-auth-reader"),
                 ("kubernetes:core/v1:ConfigMap", "-config"), ("kubernetes:apps/v1:Deployment", "")]
        if packing.replicas > 1:
            parts.append(("kubernetes:policy/v1:PodDisruptionBudget", ""))
        for kind, suffix in parts:
            types = chain + ((kind,) if kind else ())
            yield Registration(types, name + suffix, "kns:packingScheduler", "name",
                               f"packing scheduler's {kind.rsplit(':', 1)[-1] or 'component'}",
                               object=_cluster_scoped(cluster, kind, packing.name + suffix))
    if kns.enabled:
        name, chain = prefix + KNS_ACCOUNT, base + (identity.KNS_SCHEDULER_TYPE,)
        parts = [("", ""), ("kubernetes:core/v1:ServiceAccount", ""),
                 ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "-cluster-admin"),
                 ("kubernetes:apps/v1:Deployment", ""), ("kubernetes:core/v1:Service", "")]
        if cfg.keycloak_client_secret is not None:
            parts.append(("kubernetes:core/v1:Secret", "-keycloak"))
        if kns.replicas > 1:
            parts.append(("kubernetes:policy/v1:PodDisruptionBudget", ""))
        if kns.ingress:
            parts.append(("kubernetes:networking.k8s.io/v1:Ingress", ""))
        for kind, suffix in parts:
            types = chain + ((kind,) if kind else ())
            yield Registration(types, name + suffix, "kns:knsScheduler", "enabled",
                               f"KNS scheduler's {kind.rsplit(':', 1)[-1] or 'component'}",
                               object=_cluster_scoped(cluster, kind, KNS_ACCOUNT + suffix))


def _cluster_scoped(cluster: str, token: str, name: str) -> Optional[tuple[str, str, str, str]]:
    """The identity of a scheduler's object of type `token` if it is cluster-scoped (its
    namespaced objects are in the system namespace, whose names the program alone gives)."""
    if not token.endswith((":ClusterRoleBinding", ":ClusterRole")):
        return None
    api, _, kind = token.removeprefix("kubernetes:").rpartition(":")
    return _named(cluster, f"{api.rpartition('/')[0]}/{kind}", name)


def _owner(cfg: PlatformConfig, manifest: dict) -> tuple[str, str, str]:
    """(owner, field, what) of one Queues child, from its kind and name."""
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    if kind == "ClusterQueue":
        return f"kns:queues[{name}]", "name", "ClusterQueue"
    if kind == "WorkloadPriorityClass":
        return f"kns:priorities[{name}]", "name", "WorkloadPriorityClass"
    if kind == "ResourceFlavor" and name == multikueue.FLAVOR and cfg.workers:
        return "kns:workers", "name", "ResourceFlavor of the manager"
    worker = cfg.pool_worker.get(name)
    owner = f"kns:workers[{worker}].nodePools[{name}]" if worker else f"kns:nodePools[{name}]"
    return (owner, "topology", "Kueue Topology") if kind == "Topology" else (owner, "name", "ResourceFlavor")


def _queueing(cfg: PlatformConfig, objects: tuple[list, list, list, list], base: tuple[str, ...] = (),
              prefix: str = "") -> Iterator[Registration]:
    """Kueue as the program installs it, and the Queues component's children: Topologies,
    ResourceFlavors, ClusterQueues, WorkloadPriorityClasses (plan/multikueue.py's
    `queue_objects` of one cluster)."""
    if not cfg.queueing.enabled:
        return
    if cfg.queueing.install:
        chain = base + (identity.KUEUE_TYPE,)
        yield Registration(chain, prefix + kueue_install.COMPONENT, "kns:queueing", "install", "Kueue install component")
        for token, name, kind in kueue_install.registered(isolated=cfg.network.isolated):
            yield Registration(chain + (token,), prefix + name, "kns:queueing", "install", f"Kueue's {kind}")
    flavors, cluster_queues, topologies, priority_classes = objects
    if not (cluster_queues or priority_classes):
        return
    chain = base + (identity.QUEUES_TYPE,)
    yield Registration(chain, prefix + queues.COMPONENT, "kns:queues", "name", "queues component")
    for manifest in [*topologies, *flavors, *cluster_queues, *priority_classes]:
        owner, field, what = _owner(cfg, manifest)
        yield Registration(chain + (type_token(manifest),), prefix + identity.kind_name(manifest), owner,
                           field, what, object=_object(prefix[:-1], manifest))


def _workers(cfg: PlatformConfig, objects: multikueue.QueueObjects) -> Iterator[Registration]:
    """Each worker's component, provider, platform and MultiKueue identity; the manager's
    MultiKueue component and its children."""
    for worker in cfg.workers:
        owner, base, prefix = f"kns:workers[{worker.name}]", (identity.WORKER_TYPE,), f"{worker.name}-"
        yield Registration(base, worker.name, owner, "name", "worker component")
        yield Registration(base + (identity.CLUSTER_TYPE,), worker.name, owner, "name", "worker's cluster component")
        yield Registration(base + (identity.CLUSTER_TYPE, PROVIDER_TYPE),
                           f"{worker.name}-kubernetes", owner, "name", "worker's Kubernetes provider")
        yield from _pools(cfg, worker.name, base)
        yield from _schedulers(cfg, base, prefix)
        # Queueing off on a site is a config problem of its own: then a worker has no queue objects.
        yield from _queueing(cfg, objects.workers.get(worker.name, multikueue.QueueObjects().manager), base, prefix)
        for manifest in multikueue.worker_access(cfg.cluster.name):
            yield Registration(base + (type_token(manifest),), f"{worker.name}-{multikueue.ACCESS}",
                               owner, "name", f"MultiKueue's {manifest['kind']}",
                               object=_object(worker.name, manifest))
    if not cfg.workers:
        return
    chain = (MULTIKUEUE_TYPE,)
    yield Registration(chain, multikueue.COMPONENT, "kns:workers", "name", "MultiKueue component")
    for worker in cfg.workers:
        owner = f"kns:workers[{worker.name}]"
        yield Registration(chain + ("kubernetes:core/v1:Secret",), f"{worker.name}-kubeconfig", owner, "name",
                           "kubeconfig Secret", object=_object("", {
                               "apiVersion": "v1", "kind": "Secret",
                               "metadata": multikueue.kubeconfig_secret_metadata(worker.name, cfg.cluster.name)}))
        cluster = multikueue.multikueue_cluster(worker.name, cfg.cluster.name)
        yield Registration(chain + (type_token(cluster),), identity.kind_name(cluster), owner, "name",
                           "MultiKueueCluster", object=_object("", cluster))
    configs, checks = multikueue.connection_objects(cfg)
    for manifest in [*configs, *checks]:
        yield Registration(chain + (type_token(manifest),), identity.kind_name(manifest),
                           f"kns:queues[{manifest['metadata']['name'][len(multikueue.ACCESS) + 1:]}]", "name",
                           manifest["kind"], object=_object("", manifest))


def _workload(plan: WorkloadPlan, owner: str, workers: Iterable[str] = ()) -> Iterator[Registration]:
    name = plan.entry.name
    top = (SCHEDULE_TYPE,) if plan.is_schedule else (JOB_TYPE,)
    yield Registration(top, name, owner, "name", "workload component")
    yield from _namespace(plan, top, name, owner, "", "")
    for worker in workers:
        yield from _namespace(plan, top, f"{worker}-{name}", owner, f' on worker "{worker}"', worker)
    kind = "kubernetes:batch/v1:CronJob" if plan.is_schedule else "kubernetes:batch/v1:Job"
    count = len(plan.objects)
    for index, object_name in enumerate(plan.objects, start=1):
        what = kind.rsplit(":", 1)[-1]
        if index > 1:
            what = f"{_ordinal(index)} primer CronJob (of {count})"
        elif count > 1:
            what = f"first primer CronJob (of {count})"
        yield Registration(top + (kind,), object_name, owner, "name", what, workload_object=True)


def _namespace(plan: WorkloadPlan, top: tuple[str, ...], name: str, owner: str, where: str,
               cluster: str) -> Iterator[Registration]:
    """An entry's namespace component with its guard rails, LocalQueue and workers' Service,
    on the manager (`name` is the entry's) or on a worker (`<worker>-<entry>`)."""
    inner = top + (identity.JOB_NAMESPACE_TYPE,)
    yield Registration(inner, name, owner, "name", "namespace component" + where)
    yield Registration(inner + ("kubernetes:core/v1:Namespace",), name, owner, "name", "Namespace" + where,
                       object=_named(cluster, "/Namespace", plan.namespace))
    isolation = (("kubernetes:networking.k8s.io/v1:NetworkPolicy", "-isolation", "NetworkPolicy"),) \
        if plan.network_policy is not None else ()
    for kind, suffix, what in (("kubernetes:core/v1:LimitRange", "-defaults", "LimitRange"),
                               ("kubernetes:core/v1:ResourceQuota", "-quota", "ResourceQuota"),
                               ("kubernetes:core/v1:ServiceAccount", "-runner", "ServiceAccount"),
                               *isolation,
                               ("kubernetes:rbac.authorization.k8s.io/v1:Role", "-runner", "Role"),
                               ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "-runner", "RoleBinding")):
        yield Registration(inner + (kind,), name + suffix, owner, "name", what + where)
    for set_name in plan.credentials:
        yield Registration(inner + ("kubernetes:core/v1:Secret",), f"{name}-cred-{set_name}", owner, "credentials",
                           f'Secret of credential set "{set_name}"{where}')
    if plan.entry.queue is not None:
        yield Registration(top + (identity.kubernetes_type(queues.API_VERSION, "LocalQueue"),),
                           identity.local_queue_resource_name(name),
                           owner, "queue", "LocalQueue" + where)
    if plan.service is not None:
        yield Registration(top + ("kubernetes:core/v1:Service",), f"{name}-workers", owner, "workers",
                           "Service of its workers" + where)
    if plan.claim is not None:
        yield Registration(top + (type_token(plan.claim),),
                           identity.claim_resource_name(name), owner, "gpu", plan.claim["kind"] + where)


def registrations(planned: StackPlan) -> list[Registration]:
    """Every resource `__main__.py` registers for the stack's plan, in its order."""
    cfg, plans = planned.config, planned.entries
    objects = multikueue.queue_objects(cfg) if cfg.queueing.enabled else multikueue.QueueObjects()
    out = [*_cluster(cfg), *_pools(cfg, None, ()), *_schedulers(cfg), *_queueing(cfg, objects.manager),
           *_workers(cfg, objects), *_reservations(planned), *_budgets(planned)]
    for plan in plans:
        out += _workload(plan, cfg.paths[plan.entry.name], planned.workers[plan.entry.name])
        out += _reserved(cfg, plan)
    return out


def _reservations(planned: StackPlan) -> Iterator[Registration]:
    """Each reserved pool's component and Cohort, each reservation's component and objects
    (components/reservation.py)."""
    for cohort in planned.cohorts:
        name = cohort["metadata"]["name"]
        owner = f"kns:nodePools[{cohort['metadata']['labels']['kns.io/pool']}]"
        yield Registration((RESERVED_POOL_TYPE,), name, owner, "name", "reserved pool component")
        yield Registration((RESERVED_POOL_TYPE, type_token(cohort)), identity.child_name(name, cohort),
                           owner, "name", "Cohort of its reservations", object=_object("", cohort))
    for reserved in planned.reservations:
        yield from _component(RESERVATION_TYPE, f"kns:reservations[{reserved.name}]",
                              identity.reservation_component_name(reserved.name), reserved.objects,
                              "reservation component")


def _budgets(planned: StackPlan) -> Iterator[Registration]:
    """Each budget's component and objects (components/budget.py)."""
    for planned_budget in planned.budgets:
        yield from _component(BUDGET_TYPE, f"kns:budgets[{planned_budget.name}]",
                              identity.budget_component_name(planned_budget.name), planned_budget.objects,
                              "budget component")


def _component(type_: str, owner: str, name: str, objects: list[dict[str, Any]], what: str) -> Iterator[Registration]:
    """A component and its planned objects, each `<component>-<kind>-<name>`."""
    yield Registration((type_,), name, owner, "name", what)
    for manifest in objects:
        yield Registration((type_, type_token(manifest)), identity.child_name(name, manifest),
                           owner, "name", manifest["kind"], object=_object("", manifest))


def _reserved(cfg: PlatformConfig, plan: WorkloadPlan) -> Iterator[Registration]:
    """The LocalQueue and RoleBinding of its reservation in an entry's namespace."""
    if plan.entry.reservation is None:
        return
    top = (SCHEDULE_TYPE,) if plan.is_schedule else (JOB_TYPE,)
    prefix = identity.entry_prefix(plan.entry.name)
    for kind in ("LocalQueue", "RoleBinding"):
        manifest = {"kind": kind, "apiVersion": queues.API_VERSION if kind == "LocalQueue" else
                    "rbac.authorization.k8s.io/v1",
                    "metadata": {"name": names.RESERVATION_LOCAL_QUEUE if kind == "LocalQueue" else
                                 reservations.SWITCH_BINDING}}
        yield Registration(top + (type_token(manifest),), identity.child_name(prefix, manifest),
                           cfg.paths[plan.entry.name], "reservation", f"{kind} of its reservation")


def _entry_stack_providers(cfg: PlatformConfig) -> Iterator[Registration]:
    """The providers an entry stack registers at its top (`__main__.py`): its cluster's and
    each worker's. Checked on every stack, so that splitting one into entry stacks later
    (docs/entry-stacks.md) cannot meet them."""
    yield Registration((PROVIDER_TYPE,), f"{cfg.cluster.name}-kubernetes", "kns:cluster", "name",
                       "Kubernetes provider in an entry stack")
    for worker in cfg.workers:
        yield Registration((PROVIDER_TYPE,), f"{worker.name}-kubernetes", f"kns:workers[{worker.name}]",
                           "name", "Kubernetes provider in an entry stack")


def collisions(planned: StackPlan, reported: Iterable[str] = ()) -> list[Problem]:
    """A problem for each resource that would share a URN (or a Job or CronJob name) with
    one registered before it; owners that already have a problem in `reported` are left
    out (their names may change when it is fixed)."""
    dirty = list(reported)

    def clean(owner: str) -> bool:
        return not any(p == owner or p.startswith((owner + ".", owner + "[")) for p in dirty)

    first: dict[tuple, Registration] = {}
    problems: list[Problem] = []
    for item in [*registrations(planned), *_entry_stack_providers(planned.config)]:
        if not clean(item.owner):
            continue
        keys: list[tuple] = [("urn", item.types, item.name)]
        if item.workload_object:
            keys.append(("workload", item.name))
        if item.object is not None:
            keys.append(("object", *item.object))
        for key in keys:
            earlier = first.get(key)
            if earlier is None:
                first[key] = item
                continue
            if earlier.owner == item.owner:
                continue
            named = item.object[3] if key[0] == "object" and item.object else item.name
            problems.append(Problem(
                f"{item.owner}.{item.field}",
                f'its {item.what} is named "{named}", like the {earlier.what} of {earlier.owner}; '
                f"{DERIVED_NAME.message}",
            ))
            break
    return problems
