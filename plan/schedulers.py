"""Builders for the two schedulers (docs/schedulers.md). No Pulumi here, so the
generated KubeSchedulerConfiguration and the KNS environment can be checked (and run by a
local control plane) exactly as the cluster will see them.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

import yaml

from config import names, resolve, rules
from config.models import PLATFORM_UID, ContainerSecurityContext, KnsScheduler, NodePool, PackingScheduler

from .model import Child, child_key

CONFIG_DIR = "/etc/kns-packing"
CONFIG_FILE = "config.yaml"
SECURE_PORT = 10259
KNS_SECRET = "kns-scheduler-keycloak"
KNS_SECRET_KEY = "client-secret"
KNS_ACCOUNT = "kns-scheduler"
RATIO_SHAPE = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]

# Every platform container (both schedulers here, the wait in plan/wait.py) meets Pod
# Security `restricted` and can start on a real kubelet: a numeric non-root user and group
# (the kube-scheduler image's own user is root, so runAsNonRoot alone is refused with
# CreateContainerConfigError), no privilege escalation, no capabilities, the runtime's
# seccomp profile, a read-only root file system. docs/schedulers.md says why for each.
RESTRICTED_CONTAINER = ContainerSecurityContext().manifest()
# The pod-level half: the same user, and fsGroup so any volume it writes to is its own.
RESTRICTED_POD = {
    "runAsNonRoot": True,
    "runAsUser": PLATFORM_UID,
    "runAsGroup": PLATFORM_UID,
    "fsGroup": PLATFORM_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
# Small local-disk bounds for the platform's own containers: they write only logs.
EPHEMERAL = {"requests": {"ephemeral-storage": "64Mi"}, "limits": {"ephemeral-storage": "256Mi"}}
KNS_TMP = "/tmp"

# kube-score checks the schedulers' Deployments keep on purpose (docs/testing.md): the
# program sets them as the object's `kube-score/ignore` annotation.
KUBE_SCORE_IGNORE = rules.KUBE_SCORE_IGNORE


def packing_annotations(packing: PackingScheduler, isolated: bool) -> dict[str, str]:
    # pod-networkpolicy: with kns:network.isolation: none the network is the site's; isolated,
    # the system namespace has its NetworkPolicy (plan/network.py).
    return {} if isolated else {KUBE_SCORE_IGNORE: "pod-networkpolicy"}


def kns_annotations(kns: KnsScheduler, isolated: bool) -> dict[str, str]:
    # pod-probes-identical: the JARVICE image offers only its TCP port to probe.
    # deployment-replicas: one replica is the KNS's documented default; `replicas` is the site's.
    ignored = ([] if isolated else ["pod-networkpolicy"]) + ["pod-probes-identical"]
    if kns.replicas < 2:
        ignored.append("deployment-replicas")
    return {KUBE_SCORE_IGNORE: ",".join(ignored)}


def scheduler_configuration(packing: PackingScheduler, namespace: str) -> dict[str, Any]:
    """The KubeSchedulerConfiguration of the packing scheduler.

    `NodeResourcesFit` scores the fullest nodes highest (MostAllocated, the successor of the
    MostRequestedPriority policy of the PanDA Harvester Kubernetes documentation), and `NodeResourcesBalancedAllocation`,
    which pulls pods towards emptier nodes, is switched off so it cannot undo the packing.
    """
    strategy: dict[str, Any] = {
        "type": packing.strategy,
        "resources": [{"name": name, "weight": weight} for name, weight in packing.weights.items()],
    }
    if packing.strategy == "RequestedToCapacityRatio":
        strategy["requestedToCapacityRatio"] = {"shape": copy.deepcopy(RATIO_SHAPE)}
    leader = packing.replicas > 1
    election: dict[str, Any] = {"leaderElect": leader}
    if leader:
        election.update(
            {"resourceLock": "leases", "resourceName": packing.name, "resourceNamespace": namespace}
        )
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": election,
        "profiles": [
            {
                "schedulerName": packing.name,
                "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
                "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}],
            }
        ],
    }


def scheduler_configuration_yaml(packing: PackingScheduler, namespace: str) -> str:
    return yaml.safe_dump(scheduler_configuration(packing, namespace), sort_keys=False)


def system_placement(pools: list[NodePool]) -> dict[str, Any]:
    """Tolerations for every `system` pool, and a preference (not a requirement) for them."""
    system = [p for p in pools if p.role == "system"]
    if not system:
        return {}
    tolerations: list[dict[str, Any]] = []
    for pool in system:
        for toleration in resolve.tolerations_for(pool):
            if toleration not in tolerations:
                tolerations.append(toleration)
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [
                            {"key": names.LABEL_POOL, "operator": "In", "values": [p.name for p in system]}
                        ]
                    },
                }
            ]
        }
    }
    out: dict[str, Any] = {"affinity": affinity}
    if tolerations:
        out["tolerations"] = tolerations
    return out


def packing_pod_spec(packing: PackingScheduler, namespace: str, pools: list[NodePool], config_map: str) -> dict[str, Any]:
    def probe(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": SECURE_PORT, "scheme": "HTTPS"}}

    container = {
        "name": "kube-scheduler",
        "image": packing.image,
        "imagePullPolicy": "Always",
        "command": [
            "kube-scheduler",
            f"--config={CONFIG_DIR}/{CONFIG_FILE}",
            f"--secure-port={SECURE_PORT}",
            "--v=2",
        ],
        "ports": [{"name": "https", "containerPort": SECURE_PORT}],
        # /livez: the process is alive; /readyz: it is also synced and, with leader
        # election, serving. Both are on kube-scheduler's secure port (no authentication:
        # --authorization-always-allow-paths covers /healthz, /readyz and /livez).
        "livenessProbe": {**probe("/livez"), "initialDelaySeconds": 15, "periodSeconds": 10, "failureThreshold": 3},
        "readinessProbe": {**probe("/readyz"), "periodSeconds": 5},
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi", **EPHEMERAL["requests"]},
            "limits": {"cpu": "1", "memory": "512Mi", **EPHEMERAL["limits"]},
        },
        # kube-scheduler writes nothing to disk: without --cert-dir its self-signed serving
        # certificate stays in memory (cmd/kube-scheduler/app/options/options.go, v1.36.1).
        "securityContext": copy.deepcopy(RESTRICTED_CONTAINER),
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
    }
    spec: dict[str, Any] = {
        "serviceAccountName": packing.name,
        "priorityClassName": "system-cluster-critical",
        "securityContext": copy.deepcopy(RESTRICTED_POD),
        "containers": [container],
        "volumes": [{"name": "config", "configMap": {"name": config_map}}],
        **system_placement(pools),
    }
    return spec


def image_with_tag(image: str, tag: Optional[str]) -> str:
    """An image reference without a tag takes `tag` (`JARVICE_KNS_INIT_IMAGE` in the JARVICE KNS
    scheduler documentation)."""
    last = image.rsplit("/", 1)[-1]
    if tag and ":" not in last and "@" not in last:
        return f"{image}:{tag}"
    return image


def kns_environment(kns: KnsScheduler, has_secret: bool) -> list[dict[str, Any]]:
    """Every environment variable of the JARVICE KNS scheduler documentation, with its
    documented default.

    The Keycloak client secret is only ever a `secretKeyRef` to the Secret the component
    creates, never a literal value.
    """
    env = [
        ("JARVICE_KNS_KEEP_VCLUSTERS", "true" if kns.keep_vclusters else "false"),
        ("JARVICE_KNS_DEFAULT_LIMIT_RANGE", kns.encoded_limit_range()),
        ("JARVICE_KNS_VCLUSTER_SPAWN_DELAY", str(kns.vcluster_spawn_delay)),
        ("JARVICE_KNS_INIT_IMAGE", image_with_tag(kns.init_image, kns.images_tag)),
        ("JARVICE_KNS_ALLOW_GOTTY_SHELL", "true" if kns.allow_gotty_shell else "false"),
        ("JARVICE_KNS_GOTTY_IMAGE", kns.gotty_image),
        ("JARVICE_KNS_GOTTY_IMAGE_TAG", kns.gotty_image_tag),
    ]
    if kns.images_tag:
        env.append(("JARVICE_IMAGES_TAG", kns.images_tag))
    if kns.jobs_domain:
        env.append(("JARVICE_JOBS_DOMAIN", kns.jobs_domain))
    if kns.ingress_class:
        env.append(("JARVICE_JOBS_INGRESS_CLASS", kns.ingress_class))
    if kns.keycloak is not None:
        env += [
            ("JARVICE_KNS_KEYCLOAK_URL", kns.keycloak.url),
            ("JARVICE_KNS_KEYCLOAK_REALM", kns.keycloak.realm),
            ("JARVICE_KNS_KEYCLOAK_CLIENT_ID", kns.keycloak.client_id),
        ]
    out: list[dict[str, Any]] = [{"name": name, "value": value} for name, value in env]
    if has_secret:
        out.append(
            {
                "name": "JARVICE_KNS_KEYCLOAK_CLIENT_SECRET",
                "valueFrom": {"secretKeyRef": {"name": KNS_SECRET, "key": KNS_SECRET_KEY}},
            }
        )
    return out


def kns_pod_spec(kns: KnsScheduler, pools: list[NodePool], has_secret: bool, selector: dict[str, str]) -> dict[str, Any]:
    probe = {"tcpSocket": {"port": "http"}}
    resources = kns.resources.model_dump(exclude_defaults=False)
    for side, amounts in EPHEMERAL.items():
        for key, value in amounts.items():
            resources.setdefault(side, {}).setdefault(key, value)
    security = kns.security_context.manifest()
    container = {
        "name": "kns-scheduler",
        "image": kns.image,
        "imagePullPolicy": "Always",
        "env": kns_environment(kns, has_secret),
        "ports": [{"name": "http", "containerPort": kns.port}],
        "readinessProbe": {**probe, "periodSeconds": 10},
        "livenessProbe": {**probe, "initialDelaySeconds": 30, "periodSeconds": 20, "failureThreshold": 3},
        "resources": resources,
        # kns:knsScheduler.securityContext, hardened by default; a writable /tmp, since the
        # JARVICE image is not ours and may need scratch space under a read-only root.
        "securityContext": security,
        "volumeMounts": [{"name": "tmp", "mountPath": KNS_TMP}],
    }
    pod_security: dict[str, Any] = {}
    if "runAsGroup" in security:
        pod_security["fsGroup"] = security["runAsGroup"]
    if "seccompProfile" in security:
        pod_security["seccompProfile"] = copy.deepcopy(security["seccompProfile"])
    spec = {"serviceAccountName": KNS_ACCOUNT, "containers": [container],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": EPHEMERAL["limits"]["ephemeral-storage"]}}],
            **system_placement(pools)}
    if pod_security:
        spec["securityContext"] = pod_security
    affinity = spec.setdefault("affinity", {})
    affinity["podAntiAffinity"] = {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": dict(selector)},
                },
            }
        ]
    }
    return spec


def _meta(object_name: str, labels: dict[str, str], namespace: Optional[str],
          annotations: Optional[dict[str, str]] = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": object_name, "labels": dict(labels)}
    if namespace:
        out["namespace"] = namespace
    if annotations:
        out["annotations"] = annotations
    return out


def _role_ref(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def packing_children(name: str, packing: PackingScheduler, namespace: str, pools: list[NodePool], site: str,
                     isolated: bool) -> list[Child]:
    """The packing scheduler's objects, `name` its component's: its account, bound to the
    kube-scheduler's roles and to its own Lease, its configuration and its Deployment (and a
    PodDisruptionBudget when it runs more than one replica)."""
    labels = {"app.kubernetes.io/name": packing.name, "app.kubernetes.io/component": "scheduler",
              names.LABEL_CLUSTER: site, **names.MANAGED_BY}
    selector = {"app.kubernetes.io/name": packing.name}
    subjects = [{"kind": "ServiceAccount", "name": packing.name, "namespace": namespace}]

    def meta(object_name: str, in_namespace: Optional[str] = namespace) -> dict[str, Any]:
        return _meta(object_name, labels, in_namespace)

    out = [Child(name, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(packing.name)}, waits=True)]
    for role in ("system:kube-scheduler", "system:volume-scheduler"):
        suffix = role.split(":")[1]
        out.append(Child(f"{name}-{suffix}", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": meta(f"{packing.name}-{suffix}", None), "roleRef": _role_ref("ClusterRole", role),
            "subjects": subjects}))
    # system:kube-scheduler only covers the Lease named kube-scheduler.
    out.append(Child(f"{name}-lease", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(f"{packing.name}-lease"),
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "resourceNames": [packing.name], "verbs": ["get", "update"]}]}, waits=True))
    out.append(Child(f"{name}-lease", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(f"{packing.name}-lease"),
        "roleRef": _role_ref("Role", f"{packing.name}-lease"), "subjects": subjects}, waits=True))
    out.append(Child(f"{name}-auth-reader", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": meta(f"{packing.name}-auth-reader", "kube-system"),
        "roleRef": _role_ref("Role", "extension-apiserver-authentication-reader"), "subjects": subjects}))
    out.append(Child(f"{name}-config", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"{packing.name}-config"),
        "data": {CONFIG_FILE: scheduler_configuration_yaml(packing, namespace)}}, waits=True))
    out.append(Child(name, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {**meta(packing.name), "annotations": packing_annotations(packing, isolated)},
        "spec": {"replicas": packing.replicas, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": dict(labels)},
                              "spec": packing_pod_spec(packing, namespace, pools, f"{packing.name}-config")}}},
        after=(child_key("ConfigMap", f"{name}-config"), child_key("ServiceAccount", name),
               child_key("ClusterRoleBinding", f"{name}-kube-scheduler"),
               child_key("ClusterRoleBinding", f"{name}-volume-scheduler"), child_key("RoleBinding", f"{name}-lease"),
               child_key("RoleBinding", f"{name}-auth-reader"))))
    if packing.replicas > 1:
        out.append(Child(name, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(packing.name),
                                "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}}}, waits=True))
    return out


def kns_children(name: str, kns: KnsScheduler, namespace: str, pools: list[NodePool], site: str,
                 client_secret: Optional[str], isolated: bool) -> list[Child]:
    """The KNS scheduler's objects, `name` its component's: its account and the one
    cluster-admin binding the program makes, the Keycloak client secret's Secret (when
    set: the pod reads it by `secretKeyRef`), its Deployment, Service, PodDisruptionBudget
    (more than one replica) and Ingress (when asked)."""
    account = KNS_ACCOUNT
    selector = {"app.kubernetes.io/name": account}
    labels = {**selector, "app.kubernetes.io/component": "scheduler", names.LABEL_CLUSTER: site, **names.MANAGED_BY}

    def meta(object_name: str, in_namespace: Optional[str] = namespace,
             annotations: Optional[dict[str, str]] = None) -> dict[str, Any]:
        return _meta(object_name, labels, in_namespace, annotations)

    out = [Child(name, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(account)}, waits=True),
           Child(f"{name}-cluster-admin", {
               "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": meta(f"{account}-cluster-admin", None), "roleRef": _role_ref("ClusterRole", "cluster-admin"),
               "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})]
    waits = [child_key("ServiceAccount", name), child_key("ClusterRoleBinding", f"{name}-cluster-admin")]
    has_secret = client_secret is not None
    if has_secret:
        out.append(Child(f"{name}-keycloak", {"apiVersion": "v1", "kind": "Secret", "metadata": meta(KNS_SECRET),
                                              "type": "Opaque", "stringData": {KNS_SECRET_KEY: client_secret}},
                         waits=True))
        waits.append(child_key("Secret", f"{name}-keycloak"))
    out.append(Child(name, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": meta(account, annotations=kns_annotations(kns, isolated)),
        "spec": {"replicas": kns.replicas, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": dict(labels)},
                              "spec": kns_pod_spec(kns, pools, has_secret, selector)}}}, after=tuple(waits)))
    out.append(Child(name, {"apiVersion": "v1", "kind": "Service", "metadata": meta(account),
                            "spec": {"selector": selector,
                                     "ports": [{"name": "http", "port": kns.port, "targetPort": "http"}]}},
                     waits=True))
    if kns.replicas > 1:
        out.append(Child(name, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(account),
                                "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}}}, waits=True))
    if kns.ingress:
        rule = {"host": kns.jobs_domain, "http": {"paths": [{
            "path": "/", "pathType": "Prefix", "backend": {"service": {"name": account, "port": {"name": "http"}}}}]}}
        spec: dict[str, Any] = {"rules": [rule]}
        if kns.ingress_class:
            spec["ingressClassName"] = kns.ingress_class
        # An Ingress is ready only once a controller publishes an address; do not block on it.
        out.append(Child(name, {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                "metadata": meta(account, annotations={"pulumi.com/skipAwait": "true"}), "spec": spec},
                         after=(child_key("Service", name),)))
    return out
