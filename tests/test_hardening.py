"""Issue 17: every container the platform defines can start on a real kubelet and runs
hardened (Pod Security `restricted`); the KNS gets its limit range in the shape it reads;
the `kube-score/ignore` exceptions the program sets on user workloads are the ones their
pods need. Under the recording mocks (the real __main__.py) and through `./kns validate`."""

from __future__ import annotations

import base64
import copy
import json
import subprocess

import pulumi
import pytest

from config.models import KnsScheduler
from kns_testing.program import ROOT, RecordingMocks, run_program
from plan import manifests, schedulers as specs, wait

DEPLOY = "kubernetes:apps/v1:Deployment"
CRONJOB = "kubernetes:batch/v1:CronJob"
JOB = "kubernetes:batch/v1:Job"
NS = "kubernetes:core/v1:Namespace"

KNS = {"enabled": True, "image": "us-docker.pkg.dev/jarvice/images/kns-scheduler:3.21"}
BASE = {
    "cluster": {"name": "kns-test", "renderDir": "out", "systemNamespace": "kns-sys"},
    "nodePools": [{"name": "compute", "role": "compute", "nodes": ["c1"]}],
    "knsScheduler": KNS,
    "jobs": [{"name": "plain", "image": "busybox:1.37", "cpu": 1, "memory": 256}],
    "schedules": [
        {"name": "primed", "image": "busybox:1.37", "schedule": "0 6 * * *", "warmUpMinutes": 10,
         "cpu": 1, "memory": 256},
        {"name": "pulled", "image": "busybox:1.37", "schedule": "0 7 * * *", "warmUpMinutes": 10,
         "imagePullPolicy": "Always", "storage": "1Gi", "startingDeadlineSeconds": 120},
    ],
}

# The documented default of JARVICE_KNS_DEFAULT_LIMIT_RANGE (the JARVICE KNS scheduler documentation).
DOCUMENTED_DEFAULT = ('{"default":{"cpu": 1, "memory": "1Gi"}, "default_request":{"cpu": "200m", "memory": "256Mi"}, '
                      '"type":"Container"}')


def with_(**changes):
    cfg = copy.deepcopy(BASE)
    cfg.update(copy.deepcopy(changes))
    return cfg


@pytest.fixture(scope="module")
def run():
    return run_program(BASE)


def pod_template(resource) -> dict:
    spec = resource.inputs["spec"]
    if "jobTemplate" in spec:
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def platform_containers(run) -> list[tuple[str, dict, dict]]:
    """(where, pod securityContext, container) for every container the platform defines."""
    found = []
    for name in ("kns-packing", "kns-scheduler"):
        pod = pod_template(run.named(DEPLOY, name))
        found += [(f"Deployment {name}", pod.get("securityContext") or {}, c) for c in pod["containers"]]
    for cron in run.of_type(CRONJOB):
        pod = pod_template(cron)
        found += [(f"CronJob {cron.metadata['name']}", pod.get("securityContext") or {}, c)
                  for c in pod.get("initContainers", []) if c["name"] == wait.NAME]
    return found


def effective(pod_security: dict, container: dict) -> dict:
    return {**pod_security, **(container.get("securityContext") or {})}


# ---- every platform container can start, hardened -------------------------------------------


def test_every_platform_container_is_found(run):
    where = [w for w, _, _ in platform_containers(run)]
    assert sorted(where) == ["CronJob primed", "CronJob pulled", "Deployment kns-packing", "Deployment kns-scheduler"]


def test_every_platform_container_can_start_as_non_root(run):
    for where, pod_security, container in platform_containers(run):
        security = effective(pod_security, container)
        assert security["runAsNonRoot"] is True, where
        # The images' own users are root: a kubelet refuses runAsNonRoot without a numeric user.
        for key in ("runAsUser", "runAsGroup"):  # (the mocks hand numbers over as floats)
            assert security[key] == int(security[key]) and security[key] > 10000, (where, key, security)


def test_every_platform_container_is_hardened(run):
    for where, pod_security, container in platform_containers(run):
        security = effective(pod_security, container)
        assert container["securityContext"]["allowPrivilegeEscalation"] is False, where
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}, where
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, where
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert "privileged" not in security, where
        resources = container["resources"]
        assert "ephemeral-storage" in resources["requests"] and "ephemeral-storage" in resources["limits"], where


def test_writable_paths_are_empty_dirs_and_pods_own_their_volumes(run):
    packing = pod_template(run.named(DEPLOY, "kns-packing"))
    # kube-scheduler keeps its self-signed serving certificate in memory (no --cert-dir).
    assert not any(arg.startswith("--cert-dir") for arg in packing["containers"][0]["command"])
    assert packing["securityContext"]["fsGroup"] == packing["securityContext"]["runAsGroup"]
    kns = pod_template(run.named(DEPLOY, "kns-scheduler"))
    assert kns["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
    assert kns["containers"][0]["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert kns["securityContext"]["fsGroup"] == kns["containers"][0]["securityContext"]["runAsGroup"]


def test_packing_probes_are_livez_and_readyz(run):
    (container,) = pod_template(run.named(DEPLOY, "kns-packing"))["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": 10259, "scheme": "HTTPS"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 10259, "scheme": "HTTPS"}


def test_platform_deployments_pull_always_and_the_wait_follows_its_entry(run):
    for name in ("kns-packing", "kns-scheduler"):
        assert pod_template(run.named(DEPLOY, name))["containers"][0]["imagePullPolicy"] == "Always"
    waits = {w: c for w, _, c in platform_containers(run) if w.startswith("CronJob")}
    assert "imagePullPolicy" not in waits["CronJob primed"]
    assert waits["CronJob pulled"]["imagePullPolicy"] == "Always"


def test_the_system_namespace_is_pod_security_restricted(run):
    labels = run.named(NS, "kns-sys").metadata["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


# ---- kns:knsScheduler.securityContext ----------------------------------------------------------


def kns_container(config) -> dict:
    return pod_template(run_program(config).named(DEPLOY, "kns-scheduler"))["containers"][0]


def test_kns_security_context_default_is_the_hardened_one(run):
    container = pod_template(run.named(DEPLOY, "kns-scheduler"))["containers"][0]
    assert container["securityContext"] == {
        "runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": True, "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert KnsScheduler().security_context.manifest() == container["securityContext"]


def test_kns_security_context_override_changes_only_what_it_says():
    container = kns_container(with_(knsScheduler={**KNS, "securityContext": {
        "runAsUser": 1000, "runAsGroup": 1000, "readOnlyRootFilesystem": False}}))
    assert container["securityContext"] == {
        "runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True, "readOnlyRootFilesystem": False,
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_kns_security_context_null_leaves_a_field_out():
    container = kns_container(with_(knsScheduler={**KNS, "securityContext": {
        "runAsUser": None, "runAsNonRoot": None, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}))
    assert "runAsUser" not in container["securityContext"] and "runAsNonRoot" not in container["securityContext"]
    assert container["securityContext"]["capabilities"] == {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}


BAD_SECURITY = [
    ({"runAsUsr": 1000}, 'kns:knsScheduler.securityContext.runAsUsr: unknown key; did you mean "runAsUser"?'),
    ({"privileged": True}, "kns:knsScheduler.securityContext.privileged: unknown key"),
    ({"runAsUser": 0}, "kns:knsScheduler.securityContext: runAsNonRoot: true with runAsUser: 0 can never start"),
    ({"runAsUser": -1}, "kns:knsScheduler.securityContext.runAsUser: "),
    ({"seccompProfile": {"type": "Localhost"}}, "kns:knsScheduler.securityContext.seccompProfile: localhostProfile"),
]


def problem_text(config, root=None, stack: str = "dev") -> str:
    """The program's text; run in project `root`, it places problems in its stack file."""
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, mocks=mocks, stack=stack, project_dir=root) if root else run_program(config, mocks=mocks)
    assert mocks.resources == []  # nothing registered
    return str(info.value)


@pytest.mark.parametrize("security, expected", BAD_SECURITY)
def test_a_bad_security_context_is_refused_with_its_path(security, expected):
    text = problem_text(with_(knsScheduler={**KNS, "securityContext": security}))
    assert f"  - {expected}" in text, text


def test_kns_validate_refuses_a_bad_security_context_key_with_the_programs_line(tmp_path):
    import yaml

    config = with_(knsScheduler={**KNS, "securityContext": {"runAsUsr": 1000}})
    root = tmp_path / "project"
    root.mkdir()
    (root / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    document = {"config": {f"kns:{k}": v for k, v in config.items()}}
    (root / "Pulumi.broken.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    done = subprocess.run([str(ROOT / "kns"), "validate", "--stack", "broken", "--project-dir", str(root)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    line = ': kns:knsScheduler.securityContext.runAsUsr: unknown key; did you mean "runAsUser"?'
    assert any(shown.startswith("  - Pulumi.broken.yaml:") and shown.endswith(line)
               for shown in done.stderr.splitlines()), done.stderr
    assert done.stderr.rstrip("\n") == problem_text(config, root, "broken")


# ---- JARVICE_KNS_DEFAULT_LIMIT_RANGE ------------------------------------------------------------


def limit_range_env(config) -> str:
    container = kns_container(config)
    value = next(e["value"] for e in container["env"] if e["name"] == "JARVICE_KNS_DEFAULT_LIMIT_RANGE")
    return base64.b64decode(value).decode()


def test_unset_limit_range_is_the_documented_default_byte_for_byte(run):
    container = pod_template(run.named(DEPLOY, "kns-scheduler"))["containers"][0]
    value = next(e["value"] for e in container["env"] if e["name"] == "JARVICE_KNS_DEFAULT_LIMIT_RANGE")
    assert base64.b64decode(value).decode() == DOCUMENTED_DEFAULT


def test_limit_range_is_encoded_in_the_kns_shape():
    text = limit_range_env(with_(knsScheduler={**KNS, "defaultLimitRange": {
        "default": {"cpu": 2, "memory": "4Gi"}, "defaultRequest": {"cpu": "500m", "memory": 1024},
        "max": {"cpu": 8}}}))
    assert json.loads(text) == {"default": {"cpu": "2", "memory": "4Gi"},
                                "default_request": {"cpu": "500m", "memory": "1Gi"},
                                "max": {"cpu": "8"}, "type": "Container"}
    assert list(json.loads(text)) == ["default", "default_request", "max", "type"]  # min only when set
    assert "defaultRequest" not in text


def test_the_kns_documents_snake_case_key_reads_as_default_request():
    # Like every key, the field's Python name is accepted too: a block copied from the KNS
    # documentation means what it says there.
    text = limit_range_env(with_(knsScheduler={**KNS, "defaultLimitRange": {"default_request": {"cpu": 1}}}))
    assert json.loads(text) == {"default_request": {"cpu": "1"}, "type": "Container"}


def test_limit_range_min_and_type():
    text = limit_range_env(with_(knsScheduler={**KNS, "defaultLimitRange": {"min": {"memory": "64Mi"}, "type": "Pod"}}))
    assert json.loads(text) == {"min": {"memory": "64Mi"}, "type": "Pod"}


@pytest.mark.parametrize("limit_range, expected", [
    ({"defaults": {"cpu": 1}}, "kns:knsScheduler.defaultLimitRange.defaults: unknown key"),
    ({"default": {"cpu": "2x"}}, 'kns:knsScheduler.defaultLimitRange.default: cpu: "2x" is not a quantity'),
    ({"default": {"cpu": 1}, "defaultRequest": {"cpu": 2}}, "kns:knsScheduler.defaultLimitRange: cpu: defaultRequest 2 is more than default 1"),
    ({"type": "Node"}, "kns:knsScheduler.defaultLimitRange.type: "),
    ({"type": "Pod", "default": {"cpu": 1}}, "kns:knsScheduler.defaultLimitRange: default and defaultRequest are only for type Container"),
])
def test_a_bad_limit_range_is_refused_with_its_path(limit_range, expected):
    text = problem_text(with_(knsScheduler={**KNS, "defaultLimitRange": limit_range}))
    assert f"  - {expected}" in text, text


# ---- the exceptions user workloads keep, and the CronJob deadline --------------------------------


def annotation(resource) -> list[str]:
    return resource.metadata.get("annotations", {}).get("kube-score/ignore", "").split(",")


def test_user_workloads_carry_only_the_exceptions_their_pods_need(run):
    # Each entry's namespace has its NetworkPolicy (kns:network, isolated by default).
    assert annotation(run.named(JOB, "plain")) == [
        "container-ephemeral-storage-request-and-limit", "container-image-pull-policy",
        "container-security-context-readonlyrootfilesystem", "container-security-context-user-group-id"]
    # imagePullPolicy Always and storage set: those two checks pass and are not ignored.
    assert annotation(run.named(CRONJOB, "pulled")) == [
        "container-security-context-readonlyrootfilesystem", "container-security-context-user-group-id"]
    assert set(annotation(run.named(CRONJOB, "primed"))) <= manifests.WORKLOAD_LINT_EXCEPTIONS
    # With the network left to the site, no pod of it has a NetworkPolicy.
    unisolated = run_program(with_(network={"isolation": "none"}))
    assert annotation(unisolated.named(JOB, "plain"))[-1] == "pod-networkpolicy"
    assert annotation(unisolated.named(CRONJOB, "pulled"))[-1] == "pod-networkpolicy"


def test_the_schedulers_carry_their_documented_exceptions(run):
    assert annotation(run.named(DEPLOY, "kns-packing")) == [""]  # nothing to except: its namespace is isolated
    assert annotation(run.named(DEPLOY, "kns-scheduler")) == ["pod-probes-identical", "deployment-replicas"]
    two = run_program(with_(knsScheduler={**KNS, "replicas": 2}))
    assert annotation(two.named(DEPLOY, "kns-scheduler")) == ["pod-probes-identical"]
    unisolated = run_program(with_(network={"isolation": "none"}))
    assert annotation(unisolated.named(DEPLOY, "kns-packing")) == ["pod-networkpolicy"]
    assert annotation(unisolated.named(DEPLOY, "kns-scheduler")) == ["pod-networkpolicy", "pod-probes-identical",
                                                                     "deployment-replicas"]


def test_an_entrys_own_kube_score_ignore_is_kept():
    jobs = [{**BASE["jobs"][0], "annotations": {"kube-score/ignore": "container-resources"}}]
    job = run_program(with_(jobs=jobs)).named(JOB, "plain")
    assert annotation(job)[0] == "container-resources" and "container-image-pull-policy" in annotation(job)
    job = run_program(with_(jobs=jobs, network={"isolation": "none"})).named(JOB, "plain")
    assert annotation(job)[0] == "container-resources" and "pod-networkpolicy" in annotation(job)


def test_cronjobs_get_a_default_starting_deadline(run):
    assert run.named(CRONJOB, "primed").inputs["spec"]["startingDeadlineSeconds"] == 3600
    assert run.named(CRONJOB, "pulled").inputs["spec"]["startingDeadlineSeconds"] == 120
    assert manifests.DEFAULT_STARTING_DEADLINE_SECONDS == 3600


def test_the_restricted_settings_are_one_definition():
    assert specs.RESTRICTED_CONTAINER == KnsScheduler().security_context.manifest()
    assert wait.SECURITY_CONTEXT == specs.RESTRICTED_CONTAINER
