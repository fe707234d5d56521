"""Both schedulers under recording mocks, plus their pure builders."""

from __future__ import annotations

import base64
import copy
import json

import pytest
import yaml

from plan import schedulers as specs
from config.models import KnsScheduler
from kns_testing.program import ROOT, run_program, secret_value

CM = "kubernetes:core/v1:ConfigMap"
DEPLOY = "kubernetes:apps/v1:Deployment"
CRB = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
RB = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
SECRET = "kubernetes:core/v1:Secret"
SERVICE = "kubernetes:core/v1:Service"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
NS = "kubernetes:core/v1:Namespace"
JOB = "kubernetes:batch/v1:Job"

# The environment table of the JARVICE KNS scheduler documentation, kept in the repository.
KNS_ENVIRONMENT_TABLE = ROOT / "tests" / "fixtures" / "jarvice-kns-environment.txt"
SECRET_VALUE = "kc-client-s3cr3t-9f2b"

BASE = {
    "cluster": {"name": "kns-test", "renderDir": "out", "systemNamespace": "kns-sys"},
    "nodePools": [
        {"name": "sys", "role": "system", "nodes": ["s1"], "taints": [{"key": "kns.io/system", "value": "true", "effect": "NoSchedule"}]},
        {"name": "a100", "role": "gpu", "nodes": ["g1"], "gpu": {"vendor": "nvidia", "perNode": 8}},
    ],
    "packingScheduler": {"weights": {"cpu": 1, "memory": 1, "nvidia.com/gpu": 5}},
    "jobs": [{"name": "gpu-job", "image": "i", "gpus": 1, "pool": "a100"}],
}
KNS = {
    "enabled": True,
    "image": "us-docker.pkg.dev/jarvice/images/kns-scheduler:3.21",
    "replicas": 2,
    "jobsDomain": "jobs.kns.example.org",
    "ingressClass": "nginx",
    "ingress": True,
    "imagesTag": "jarvice-3.21.9",
    "keycloak": {"url": "https://kc.example.org/auth", "realm": "kns", "clientId": "kns-scheduler"},
}


def with_(**changes):
    cfg = copy.deepcopy(BASE)
    cfg.update(copy.deepcopy(changes))
    return cfg


@pytest.fixture(scope="module")
def packing_run():
    return run_program(BASE)


@pytest.fixture(scope="module")
def kns_run():
    return run_program(with_(knsScheduler=KNS, keycloakClientSecret=SECRET_VALUE), secret_keys=("keycloakClientSecret",))


def scheduler_config(run) -> dict:
    cm = run.named(CM, "kns-packing-config")
    return yaml.safe_load(cm.inputs["data"]["config.yaml"])


# ---- packing scheduler -------------------------------------------------------------------


def test_generated_scheduler_configuration(packing_run):
    config = scheduler_config(packing_run)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["leaderElection"] == {"leaderElect": False}
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "kns-packing"
    assert profile["plugins"] == {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}}
    assert profile["pluginConfig"] == [{
        "name": "NodeResourcesFit",
        "args": {"scoringStrategy": {
            "type": "MostAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 5}],
        }},
    }]


def test_leader_election_and_disruption_budget_with_replicas():
    run = run_program(with_(packingScheduler={"name": "packer", "replicas": 3, "strategy": "RequestedToCapacityRatio"}))
    config = yaml.safe_load(run.named(CM, "packer-config").inputs["data"]["config.yaml"])
    assert config["leaderElection"] == {
        "leaderElect": True, "resourceLock": "leases", "resourceName": "packer", "resourceNamespace": "kns-sys",
    }
    strategy = config["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"]
    assert strategy["type"] == "RequestedToCapacityRatio"
    assert strategy["requestedToCapacityRatio"] == {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    assert config["profiles"][0]["schedulerName"] == "packer"
    pdb = run.named(PDB, "packer")
    assert pdb.inputs["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "packer"}}}
    assert run.named(DEPLOY, "packer").inputs["spec"]["replicas"] == 3
    # workloads follow the renamed scheduler
    assert run.named(JOB, "gpu-job").inputs["spec"]["template"]["spec"]["schedulerName"] == "packer"


def test_no_disruption_budget_for_one_replica(packing_run):
    assert packing_run.of_type(PDB) == []


def test_packing_deployment(packing_run):
    deploy = packing_run.named(DEPLOY, "kns-packing")
    assert deploy.metadata["namespace"] == "kns-sys"
    pod = deploy.inputs["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kns-packing"
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.36.1"
    assert "--config=/etc/kns-packing/config.yaml" in container["command"]
    assert container["volumeMounts"] == [{"name": "config", "mountPath": "/etc/kns-packing", "readOnly": True}]
    assert pod["volumes"] == [{"name": "config", "configMap": {"name": "kns-packing-config"}}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": 10259, "scheme": "HTTPS"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 10259, "scheme": "HTTPS"}
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["runAsUser"] == pod["securityContext"]["runAsUser"] == 65532
    assert pod["tolerations"] == [{"key": "kns.io/system", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    preference = pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]
    assert preference == {"matchExpressions": [{"key": "kns.io/pool", "operator": "In", "values": ["sys"]}]}


def test_no_system_pool_means_no_system_tolerations():
    cfg = with_(nodePools=[BASE["nodePools"][1]])
    pod = run_program(cfg).named(DEPLOY, "kns-packing").inputs["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "affinity" not in pod


def test_packing_rbac_exactly_as_listed(packing_run):
    subject = [{"kind": "ServiceAccount", "name": "kns-packing", "namespace": "kns-sys"}]
    bindings = {b.metadata["name"]: b.inputs for b in packing_run.of_type(CRB)}
    assert bindings == {
        "kns-packing-kube-scheduler": {**bindings["kns-packing-kube-scheduler"],
                                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kube-scheduler"},
                                       "subjects": subject},
        "kns-packing-volume-scheduler": {**bindings["kns-packing-volume-scheduler"],
                                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:volume-scheduler"},
                                         "subjects": subject},
    }
    lease = packing_run.named(ROLE, "kns-packing-lease")
    assert lease.metadata["namespace"] == "kns-sys"
    assert lease.inputs["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["kns-packing"], "verbs": ["get", "update"]},
    ]
    lease_binding = packing_run.named(RB, "kns-packing-lease")
    assert lease_binding.inputs["roleRef"]["name"] == "kns-packing-lease" and lease_binding.inputs["subjects"] == subject
    reader = packing_run.named(RB, "kns-packing-auth-reader")
    assert reader.metadata["namespace"] == "kube-system"
    assert reader.inputs["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"}
    assert reader.inputs["subjects"] == subject


def test_system_namespace(packing_run):
    ns = packing_run.named(NS, "kns-sys")
    assert ns.metadata["name"] == "kns-sys"
    assert ns.metadata["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_disabled_packing_scheduler_creates_nothing():
    run = run_program(with_(packingScheduler={"enabled": False}))
    assert run.of_type(DEPLOY) == [] and run.of_type(CM) == [] and run.of_type(NS) == [run.named(NS, "gpu-job")]


def test_no_cluster_admin_binding_without_the_kns(packing_run):
    assert all(b.inputs["roleRef"]["name"] != "cluster-admin" for b in packing_run.of_type(CRB))


# ---- KNS scheduler -----------------------------------------------------------------------

# The JARVICE KNS scheduler documentation's table: every variable and its documented default.
REFERENCE_DEFAULTS = {
    "JARVICE_KNS_KEEP_VCLUSTERS": "false",
    "JARVICE_KNS_VCLUSTER_SPAWN_DELAY": "300",
    "JARVICE_KNS_INIT_IMAGE": "us-docker.pkg.dev/jarvice/images/init-kns",
    "JARVICE_KNS_ALLOW_GOTTY_SHELL": "false",
    "JARVICE_KNS_GOTTY_IMAGE": "us-docker.pkg.dev/jarvice/images/kns-gotty",
    "JARVICE_KNS_GOTTY_IMAGE_TAG": "n1.3.0",
}
REFERENCE_LIMIT_RANGE_B64 = (
    "eyJkZWZhdWx0Ijp7ImNwdSI6IDEsICJtZW1vcnkiOiAiMUdpIn0sICJkZWZhdWx0X3JlcXVlc3QiOnsiY3B1IjogIjIwMG0iLCAibWVtb3J5IjogIjI1Nk1pIn0sICJ0eXBlIjoiQ29udGFpbmVyIn0="
)


def env_of(kns: KnsScheduler, has_secret: bool = False) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in specs.kns_environment(kns, has_secret)}


def test_reference_table_is_what_the_reference_says():
    text = KNS_ENVIRONMENT_TABLE.read_text()
    for name, default in REFERENCE_DEFAULTS.items():
        assert name in text and default in text, name
    assert REFERENCE_LIMIT_RANGE_B64 in text


def test_kns_environment_defaults_match_reference_000():
    env = env_of(KnsScheduler())
    for name, default in REFERENCE_DEFAULTS.items():
        assert env[name] == default, name
    reference = json.loads(base64.b64decode(REFERENCE_LIMIT_RANGE_B64))
    assert json.loads(base64.b64decode(env["JARVICE_KNS_DEFAULT_LIMIT_RANGE"])) == reference
    assert set(env) == set(REFERENCE_DEFAULTS) | {"JARVICE_KNS_DEFAULT_LIMIT_RANGE"}


def test_default_limit_range_object_round_trips_through_base64():
    limit_range = {"default": {"cpu": 2, "memory": "4Gi"}, "defaultRequest": {"cpu": "500m", "memory": "1Gi"}}
    env = env_of(KnsScheduler(default_limit_range=limit_range))
    # camelCase in config, the KNS's documented snake case in the variable; quantities canonical
    assert json.loads(base64.b64decode(env["JARVICE_KNS_DEFAULT_LIMIT_RANGE"])) == {
        "default": {"cpu": "2", "memory": "4Gi"}, "default_request": {"cpu": "500m", "memory": "1Gi"}, "type": "Container"}


@pytest.mark.parametrize(
    "image, tag, expected",
    [
        ("us-docker.pkg.dev/jarvice/images/init-kns", "3.21", "us-docker.pkg.dev/jarvice/images/init-kns:3.21"),
        ("us-docker.pkg.dev/jarvice/images/init-kns:pinned", "3.21", "us-docker.pkg.dev/jarvice/images/init-kns:pinned"),
        ("localhost:5000/init-kns", "3.21", "localhost:5000/init-kns:3.21"),
        ("registry/init-kns@sha256:abc", "3.21", "registry/init-kns@sha256:abc"),
        ("registry/init-kns", None, "registry/init-kns"),
    ],
)
def test_init_image_without_tag_takes_images_tag(image, tag, expected):
    assert specs.image_with_tag(image, tag) == expected


def test_kns_deployment_env_and_shape(kns_run):
    deploy = kns_run.named(DEPLOY, "kns-scheduler")
    assert deploy.metadata["namespace"] == "kns-sys"
    spec = deploy.inputs["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "kns-scheduler"
    (container,) = pod["containers"]
    assert container["image"] == KNS["image"]
    env = {e["name"]: e for e in container["env"]}
    assert env["JARVICE_KNS_INIT_IMAGE"]["value"] == "us-docker.pkg.dev/jarvice/images/init-kns:jarvice-3.21.9"
    assert env["JARVICE_IMAGES_TAG"]["value"] == "jarvice-3.21.9"
    assert env["JARVICE_JOBS_DOMAIN"]["value"] == "jobs.kns.example.org"
    assert env["JARVICE_JOBS_INGRESS_CLASS"]["value"] == "nginx"
    assert env["JARVICE_KNS_KEYCLOAK_URL"]["value"] == "https://kc.example.org/auth"
    assert env["JARVICE_KNS_KEYCLOAK_REALM"]["value"] == "kns"
    assert env["JARVICE_KNS_KEYCLOAK_CLIENT_ID"]["value"] == "kns-scheduler"
    assert env["JARVICE_KNS_KEYCLOAK_CLIENT_SECRET"] == {
        "name": "JARVICE_KNS_KEYCLOAK_CLIENT_SECRET",
        "valueFrom": {"secretKeyRef": {"name": "kns-scheduler-keycloak", "key": "client-secret"}},
    }
    assert container["readinessProbe"]["tcpSocket"] == {"port": "http"}
    assert container["livenessProbe"]["tcpSocket"] == {"port": "http"}
    assert container["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "64Mi"},
                                      "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "256Mi"}}
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert kns_run.named(PDB, "kns-scheduler").inputs["spec"]["minAvailable"] == 1


def test_keycloak_secret_is_only_in_the_secret(kns_run):
    secret = kns_run.named(SECRET, "kns-scheduler-keycloak")
    assert secret.metadata["name"] == "kns-scheduler-keycloak"
    # sent to the engine as a Pulumi secret, so state holds it encrypted
    assert secret_value(secret.inputs["stringData"]) == {"client-secret": SECRET_VALUE}
    for resource in kns_run.resources:
        if resource.type != SECRET:
            assert SECRET_VALUE not in json.dumps(resource.inputs), resource.name


def test_only_cluster_admin_binding_is_the_kns_account(kns_run):
    admin = [b for b in kns_run.of_type(CRB) if b.inputs["roleRef"]["name"] == "cluster-admin"]
    assert len(admin) == 1
    assert admin[0].inputs["subjects"] == [{"kind": "ServiceAccount", "name": "kns-scheduler", "namespace": "kns-sys"}]
    assert admin[0].inputs["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}


def test_service_and_ingress(kns_run):
    service = kns_run.named(SERVICE, "kns-scheduler")
    assert service.inputs["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http"}]
    assert service.inputs["spec"]["selector"] == {"app.kubernetes.io/name": "kns-scheduler"}
    ingress = kns_run.named(INGRESS, "kns-scheduler")
    assert ingress.inputs["spec"]["ingressClassName"] == "nginx"
    rule = ingress.inputs["spec"]["rules"][0]
    assert rule["host"] == "jobs.kns.example.org"
    assert rule["http"]["paths"][0]["backend"] == {"service": {"name": "kns-scheduler", "port": {"name": "http"}}}
    assert ingress.metadata["annotations"] == {"pulumi.com/skipAwait": "true", "pulumi.com/patchForce": "true"}


def test_kns_without_keycloak_or_ingress():
    kns = {"enabled": True, "image": "kns:1"}
    run = run_program(with_(knsScheduler=kns))
    assert run.of_type(SECRET) == [] and run.of_type(INGRESS) == [] and run.of_type(PDB) == []
    env = {e["name"] for e in run.named(DEPLOY, "kns-scheduler").inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "JARVICE_KNS_KEYCLOAK_CLIENT_SECRET" not in env


@pytest.mark.parametrize(
    "kns, secret, expected",
    [
        ({"enabled": True}, None, "kns:knsScheduler: enabled: true needs image"),
        ({"enabled": True, "image": "x", "ingress": True}, None, "kns:knsScheduler: ingress: true needs jobsDomain"),
        ({"enabled": True, "image": "x", "keycloak": KNS["keycloak"]}, None,
         "kns:keycloakClientSecret: is required when kns:knsScheduler.keycloak is set"),
    ],
)
def test_kns_config_errors(kns, secret, expected):
    import pulumi

    with pytest.raises(pulumi.RunError, match=expected.replace("[", r"\[")):
        run_program(with_(knsScheduler=kns))


def test_kns_endpoint_output(kns_run, packing_run):
    assert kns_run.outputs["knsScheduler"] == {
        "service": "kns-scheduler.kns-sys.svc:8080", "url": "https://jobs.kns.example.org", "namespace": "kns-sys",
    }
    assert packing_run.outputs["knsScheduler"] is None
