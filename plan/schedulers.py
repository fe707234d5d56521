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
