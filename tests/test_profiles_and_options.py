"""Profiles and overrides (RStudio launcher style), Nodepool options, credentials (PanDA Harvester
style): docs/profiles.md and docs/options.md."""

from __future__ import annotations

import json

import pulumi
import pytest

from config import rules
from config.errors import ConfigError
from config.loader import parse_config
from kns_testing.program import ROOT, RecordingMocks, run_program, secret_value

CLUSTER = {"name": "kns-test", "renderDir": "out"}
POOLS = [
    {"name": "a100", "role": "gpu", "nodes": ["g1"], "gpu": {"vendor": "nvidia", "perNode": 8}},
    {"name": "mi300", "role": "gpu", "nodes": ["m1"], "gpu": {"vendor": "amd", "perNode": 8}},
]
JOB = "kubernetes:batch/v1:Job"
CRON = "kubernetes:batch/v1:CronJob"
QUOTA = "kubernetes:core/v1:ResourceQuota"
LR = "kubernetes:core/v1:LimitRange"
SECRET = "kubernetes:core/v1:Secret"


def parse(jobs, profiles=None, **extra):
    raw = {"cluster": CLUSTER, "nodePools": POOLS, "jobs": jobs, **extra}
    if profiles is not None:
        raw["profiles"] = profiles
    return parse_config(raw, project_dir=ROOT, environ={}, secret_keys=frozenset({"credentials", "keycloakClientSecret"}))


def problems(jobs, profiles=None, **extra) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(jobs, profiles, **extra)
    return [str(p) for p in info.value.problems]


def run(jobs, profiles=None, schedules=(), **extra):
    cfg = {"cluster": CLUSTER, "nodePools": POOLS, "jobs": jobs, "schedules": list(schedules), **extra}
    if profiles is not None:
        cfg["profiles"] = profiles
    return run_program(cfg, secret_keys=("credentials",))


def pod(resource):
    spec = resource.inputs["spec"]
    if "jobTemplate" in spec:
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


ALICE = {"name": "j", "user": "alice", "groups": ["ml"], "image": "r-session:4.4"}


# ---- profile rules: order, defaults, maxima ----------------------------------------------


def test_later_matching_rules_win_in_file_order_not_by_specificity():
    entry = {**ALICE, "cpu": 4}
    # the user rule comes first, so the later group rule wins
    assert problems([entry], {"*": {"maxCpu": 1}, "alice": {"maxCpu": 8}, "@ml": {"maxCpu": 2}}) == [
        'kns:jobs[j].cpu: 4 CPU is over maxCpu 2 of profile rule "@ml"'
    ]
    # reordered, the user rule wins
    assert parse([entry], {"*": {"maxCpu": 1}, "@ml": {"maxCpu": 2}, "alice": {"maxCpu": 8}}).jobs[0].cpu == "4"


def test_rules_for_other_users_and_groups_do_not_apply():
    assert parse([{**ALICE, "cpu": 64}], {"bob": {"maxCpu": 1}, "@physics": {"maxCpu": 1}}).jobs[0].cpu == "64"


def test_defaults_fill_unset_fields_only():
    profiles = {"*": {"defaultCpu": 2, "defaultMemory": 4096, "defaultImage": "r-session:4.4", "defaultGpus": {"nvidia": 1}}}
    cfg = parse([{"name": "bare", "user": "u"}, {"name": "set", "image": "x:1", "cpu": "500m", "memory": "1Gi", "gpus": 0}], profiles)
    bare, explicit = cfg.jobs
    assert (bare.cpu, bare.memory, bare.image, bare.gpus) == ("2", "4Gi", "r-session:4.4", 1)
    assert (explicit.cpu, explicit.memory, explicit.image, explicit.gpus) == ("500m", "1Gi", "x:1", 0)


def test_default_gpus_are_per_vendor():
    profiles = {"*": {"defaultGpus": {"nvidia": 2, "amd": 1}}}
    cfg = parse([{"name": "n", "image": "i"}, {"name": "a", "image": "i", "gpuVendor": "amd"}], profiles)
    assert [j.gpus for j in cfg.jobs] == [2, 1]


def test_maxima_name_the_entry_field_and_rule():
    profiles = {"*": {"maxCpu": 4, "maxMemory": "8Gi", "maxGpus": {"nvidia": 2, "amd": 0}}}
    found = problems([
        {"name": "big", "image": "i", "cpu": 2, "cpuLimit": 6, "memory": "16Gi"},
        {"name": "gpu", "image": "i", "gpus": 3},
        {"name": "amd", "image": "i", "gpus": 1, "gpuVendor": "amd"},
    ], profiles)
    assert found == [
        'kns:jobs[big].cpuLimit: 6 CPU is over maxCpu 4 of profile rule "*"',
        'kns:jobs[big].memory: 16Gi memory is over maxMemory 8Gi of profile rule "*"',
        'kns:jobs[gpu].gpus: 3 nvidia GPUs are over maxGpus.nvidia 2 of profile rule "*"',
        'kns:jobs[amd].gpus: 1 amd GPUs are over maxGpus.amd 0 of profile rule "*"',
    ]


def test_no_profiles_means_no_limits():
    assert parse([{"name": "j", "image": "i", "cpu": 256, "memory": "2Ti", "gpus": 8}]).jobs[0].gpus == 8


# ---- images ------------------------------------------------------------------------------


def test_image_allow_list_applies_only_when_unknown_images_are_refused():
    profiles = {"*": {"images": ["r-session:4.4", "r-session:4.5"], "allowUnknownImages": False, "defaultImage": "r-session:4.4"},
                "@power": {"allowUnknownImages": True}}
    assert problems([{"name": "j", "image": "evil:latest"}], profiles) == [
        'kns:jobs[j].image: "evil:latest" is not an image profile rule "*" allows '
        "(allowUnknownImages: false; images: r-session:4.4, r-session:4.5)"
    ]
    cfg = parse([{"name": "ok", "image": "r-session:4.5"}, {"name": "dflt"},
                 {"name": "power", "groups": ["power"], "image": "anything:1"}], profiles)
    assert [j.image for j in cfg.jobs] == ["r-session:4.5", "r-session:4.4", "anything:1"]


def test_images_list_alone_does_not_restrict():
    assert parse([{"name": "j", "image": "other:1"}], {"*": {"images": ["a:1"]}}).jobs[0].image == "other:1"


# ---- placement ---------------------------------------------------------------------------


def test_placement_constraints_free_and_fixed():
    profiles = {"*": {"placementConstraints": ["node", "region:us", "region:eu"]}}
    cfg = parse([{"name": "j", "image": "i", "placement": {"node": "n-17", "region": "eu"}}], profiles)
    assert cfg.jobs[0].placement == {"node": "n-17", "region": "eu"}
    assert problems([{"name": "j", "image": "i", "placement": {"region": "apac", "rack": "r1"}}], profiles) == [
        'kns:jobs[j].placement.region: "region: apac" is not a placement profile rule "*" offers (offered: node, region:eu, region:us)',
        'kns:jobs[j].placement.rack: "rack: r1" is not a placement profile rule "*" offers (offered: node, region:eu, region:us)',
    ]


def test_placement_becomes_node_selector():
    result = run([{"name": "j", "image": "i", "placement": {"region": "eu"}}], {"*": {"placementConstraints": ["region:eu"]}})
    assert pod(result.named(JOB, "j"))["nodeSelector"] == {"region": "eu"}


# ---- ratios, privileged, overrides from profiles -----------------------------------------


def test_request_ratios_set_requests_from_limits():
    result = run([{**ALICE, "cpuLimit": 4, "memoryLimit": "8Gi"}], {"@ml": {"cpuRequestRatio": 0.25, "memoryRequestRatio": 0.5}})
    resources = pod(result.named(JOB, "j"))["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
    assert result.named(QUOTA, "j-quota").inputs["spec"]["hard"]["requests.cpu"] == "1"


def test_privileged_refusal_names_the_rule_that_forbids_it():
    profiles = {"@ml": {"allowPrivileged": True}, "alice": {"allowPrivileged": False}}
    assert problems([{**ALICE, "privileged": True}], profiles) == [
        'kns:jobs[j].privileged: needs a profile with allowPrivileged: true (profile rule "alice" sets it false)'
    ]


def test_profile_overrides_apply_before_the_entry_ones():
    profiles = {"*": {"jsonOverrides": [
        {"path": "/spec/template/spec/priorityClassName", "value": "batch-low"},
        {"path": "/spec/backoffLimit", "value": 1},
    ]}}
    result = run([{"name": "j", "image": "i", "jsonOverrides": [{"path": "/spec/backoffLimit", "value": 5}]}], profiles)
    job = result.named(JOB, "j").inputs
    assert job["spec"]["template"]["spec"]["priorityClassName"] == "batch-low"
    assert job["spec"]["backoffLimit"] == 5


# ---- jsonOverrides -----------------------------------------------------------------------


LIMITED = {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}


@pytest.fixture
def limits_not_required(tmp_path, monkeypatch):
    """A site whose policy pack does not require limits (docs/policy.md): containers
    without them run, and the LimitRange fills them in at admission."""
    settings = tmp_path / "policy-config.json"
    settings.write_text('{"containers-have-limits": "disabled"}')
    monkeypatch.setenv("KNS_POLICY_CONFIG", str(settings))


def test_overrides_set_and_add_values():
    overrides = [
        {"path": "/spec/template/spec/hostname", "value": "trainer"},
        {"path": "/spec/template/spec/containers/0/securityContext/runAsUser", "value": 1000},
        {"path": "/spec/template/spec/containers/-", "value": {"name": "sidecar", "image": "busybox", **LIMITED}},
        {"path": "/metadata/annotations/example.com~1team", "value": "ml"},
    ]
    job = run([{"name": "j", "image": "i", "jsonOverrides": overrides}]).named(JOB, "j").inputs
    spec = job["spec"]["template"]["spec"]
    assert spec["hostname"] == "trainer"
    assert spec["containers"][0]["securityContext"] == {"runAsUser": 1000}
    assert spec["containers"][1] == {"name": "sidecar", "image": "busybox", **LIMITED}
    assert job["metadata"]["annotations"]["example.com/team"] == "ml"


def test_the_same_override_serves_a_schedule():
    schedule = {"name": "s", "image": "i", "schedule": "0 3 * * *",
                "jsonOverrides": [{"path": "/spec/template/spec/hostname", "value": "nightly"}]}
    cron = run([], schedules=[schedule]).named(CRON, "s").inputs
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["hostname"] == "nightly"


@pytest.mark.parametrize(
    "path, message",
    [
        ("/spec/template/spec/containers/5/image", 'index 5 is past the end of a list of 1 at "/spec/template/spec/containers/5"'),
        ("/spec/template/spec/restartPolicy/x", '"/spec/template/spec/restartPolicy" holds a str, not an object or list'),
        ("/spec/template/spec/containers/first/image", '"first" is not a list index at "/spec/template/spec/containers/first"'),
        ("/metadata/name", "may not be overridden: names and kinds derive from the entry"),
        ("spec/backoffLimit", 'is not a JSON pointer (RFC 6901: it starts with "/")'),
    ],
)
def test_invalid_pointers_are_config_errors_and_nothing_is_registered(path, message):
    mocks = RecordingMocks()
    cfg = {"cluster": CLUSTER, "jobs": [{"name": "j", "image": "i", "jsonOverrides": [{"path": path, "value": 1}]}]}
    with pytest.raises(pulumi.RunError) as info:
        run_program(cfg, mocks=mocks)
    lines = str(info.value).splitlines()[1:]
    assert any(line.startswith("  - kns:jobs[j].jsonOverrides[0]") and message in line for line in lines), lines
    assert mocks.resources == []


def test_override_problems_are_reported_with_the_other_problems():
    cfg = {"cluster": CLUSTER, "jobs": [
        {"name": "a", "image": "i", "memory": "12Qi"},
        {"name": "b", "image": "i", "jsonOverrides": [{"path": "/spec/template/spec/containers/3", "value": {}}]},
    ]}
    with pytest.raises(pulumi.RunError) as info:
        run_program(cfg)
    lines = str(info.value).splitlines()
    assert lines[0].endswith("2 problems; nothing was applied:")
    assert lines[2].startswith("  - kns:jobs[b].jsonOverrides[0]: ")


# ---- Nodepool options --------------------------------------------------------------------


def test_pod_spec_is_used_verbatim_with_our_placement_where_it_is_silent(limits_not_required):
    spec = {"containers": [
        {"name": "main", "image": "ubuntu:jammy", "command": ["/bin/sh", "-c"], "args": ["sleep 30"],
         "resources": {"limits": {"cpu": "2", "memory": "2Gi"}}},
        {"name": "db", "image": "postgres:17", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
    ], "schedulerName": "my-scheduler"}
    result = run([{"name": "j", "user": "u", "pool": "a100", "podSpec": spec, "labels": {"team": "x"}}])
    job = result.named(JOB, "j").inputs
    template = job["spec"]["template"]
    # verbatim, but for the limits admission would give db: the LimitRange defaults, written in
    db = dict(spec["containers"][1], resources={"requests": {"cpu": "500m", "memory": "512Mi"},
                                                "limits": {"cpu": "1", "memory": "1Gi"}})
    assert template["spec"]["containers"] == [spec["containers"][0], db]
    assert template["spec"]["schedulerName"] == "my-scheduler"  # the spec's own wins
    assert template["spec"]["nodeSelector"] == {"kns.io/pool": "a100"}
    assert template["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert template["spec"]["restartPolicy"] == "Never"
    assert template["metadata"]["labels"] == {"team": "x", "kns.io/job": "j", "kns.io/owner": "u"}
    # LimitRange max per container, quota per pod: 2 + 0.5 CPU
    assert result.named(LR, "j-defaults").inputs["spec"]["limits"][0]["max"] == {"cpu": "2", "memory": "2Gi"}
    hard = result.named(QUOTA, "j-quota").inputs["spec"]["hard"]
    assert hard["requests.cpu"] == "2500m" and hard["requests.memory"] == "2560Mi"
    assert hard["limits.cpu"] == "3" and hard["limits.memory"] == "3Gi"  # the db's limits default to 1 CPU, 1Gi


def test_pod_spec_gpus_are_placed_like_gpus():
    spec = {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"amd.com/gpu": "2", "cpu": 1,
                                                                                "memory": "1Gi"}}}]}
    result = run([{"name": "j", "podSpec": spec}])
    template = pod(result.named(JOB, "j"))
    assert template["nodeSelector"] == {"kns.io/pool": "mi300"}
    assert result.named(QUOTA, "j-quota").inputs["spec"]["hard"]["requests.amd.com/gpu"] == "2"


def test_pod_spec_is_exclusive_with_container_fields():
    found = problems([{"name": "j", "image": "i", "cpu": 1, "podSpec": {"containers": [{"name": "c", "image": "i"}]}}])
    assert found == [f"kns:jobs[j].image: {rules.POD_SPEC_VERBATIM.message}", f"kns:jobs[j].cpu: {rules.POD_SPEC_VERBATIM.message}"]
    found = problems([{"name": "j", "podSpec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}])
    assert found == ['kns:jobs[j].podSpec.restartPolicy: "Always" cannot run as a Job (Never or OnFailure)']


def test_extra_resources_and_gpu_resource_are_requested_and_counted():
    result = run([{"name": "j", "image": "i", "gpus": 1, "gpuResource": "nvidia.com/mig-3g.20gb",
                   "extraResources": {"example.com/fpga": 2}, "pool": "a100"}])
    resources = pod(result.named(JOB, "j"))["containers"][0]["resources"]
    assert resources["requests"]["nvidia.com/mig-3g.20gb"] == "1" and resources["limits"]["example.com/fpga"] == "2"
    hard = result.named(QUOTA, "j-quota").inputs["spec"]["hard"]
    assert hard["requests.nvidia.com/mig-3g.20gb"] == "1" and hard["requests.example.com/fpga"] == "2"


def test_volumes_mounts_and_env_pass_through():
    job = {"name": "j", "image": "i", "volumes": [{"name": "scratch", "emptyDir": {}}],
           "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
           "env": {"A": "1", "TOKEN": {"valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}}}}
    spec = pod(run([job]).named(JOB, "j"))
    assert spec["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "scratch", "mountPath": "/scratch"}]
    assert spec["containers"][0]["env"] == [
        {"name": "A", "value": "1"}, {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}},
    ]


# ---- credentials -------------------------------------------------------------------------

CREDENTIALS = {
    "grid-proxy": {"x509up": "-----BEGIN PROXY----- s3cr3t-proxy-1 -----END-----"},
    "s3": {"access-key": "AKIA-s3cr3t-2", "secret-key": "s3cr3t-3"},
}


def test_credentials_become_secrets_mounted_read_only():
    result = run([{"name": "j", "image": "i", "credentials": ["grid-proxy", "s3"]}], credentials=CREDENTIALS)
    secrets = {r.name: r for r in result.of_type(SECRET)}
    assert set(secrets) == {"j-cred-grid-proxy", "j-cred-s3"}
    proxy = secrets["j-cred-grid-proxy"]
    assert proxy.metadata["name"] == "kns-cred-grid-proxy" and proxy.metadata["namespace"] == "kns-j"
    assert secret_value(proxy.inputs["stringData"]) == CREDENTIALS["grid-proxy"]
    spec = pod(result.named(JOB, "j"))
    assert spec["containers"][0]["volumeMounts"] == [{"name": "kns-credentials", "mountPath": "/credentials", "readOnly": True}]
    assert spec["volumes"] == [{"name": "kns-credentials", "projected": {
        "defaultMode": 0o440, "sources": [{"secret": {"name": "kns-cred-grid-proxy"}}, {"secret": {"name": "kns-cred-s3"}}],
    }}]


def test_credential_content_appears_in_no_other_resource():
    result = run([{"name": "j", "image": "i", "credentials": ["s3"], "credentialsMountPath": "/etc/s3"}],
                 credentials=CREDENTIALS)
    assert result.of_type(SECRET)
    for resource in result.resources:
        if resource.type != SECRET:
            text = json.dumps(resource.inputs)
            for files in CREDENTIALS.values():
                for content in files.values():
                    assert content not in text, resource.name
    assert json.dumps(result.outputs).count("s3cr3t") == 0


@pytest.mark.parametrize(
    "entry, credentials, expected",
    [
        ({"credentials": ["vault"]}, CREDENTIALS, 'kns:jobs[j].credentials: no credential set "vault" in kns:credentials (sets: grid-proxy, s3)'),
        ({"credentials": ["s3", "s3-copy"]}, {**CREDENTIALS, "s3-copy": {"access-key": "x"}},
         'kns:jobs[j].credentials: sets "s3" and "s3-copy" both have a file "access-key"'),
        ({"credentials": ["s3"], "credentialsMountPath": "creds"}, CREDENTIALS,
         'kns:jobs[j].credentialsMountPath: "creds" is not a mount path (an absolute path other than "/", '
         'without "." or ".." parts)'),
        ({}, {"Bad_Set": {"f": "x"}}, 'kns:credentials.Bad_Set: "Bad_Set" is not a DNS-1123 label'),
        ({}, {"ok": {"a/b": "x"}}, 'kns:credentials.ok: "a/b" is not a valid file name'),
    ],
)
def test_credential_errors(entry, credentials, expected):
    found = problems([{"name": "j", "image": "i", **entry}], credentials=credentials)
    assert any(line.startswith(expected) for line in found), found


def test_credentials_must_be_a_secret_config_key():
    raw = {"cluster": CLUSTER, "credentials": CREDENTIALS}
    with pytest.raises(ConfigError, match="kns:credentials: must be a secret"):
        parse_config(raw, project_dir=ROOT, environ={}, secret_keys=frozenset())


# ---- closing the gaps: nothing slips past a profile ----------------------------------------


def test_pod_spec_totals_are_held_to_the_maxima():
    spec = {"containers": [{"name": "a", "image": "i", "resources": {"limits": {"cpu": "3"}}},
                           {"name": "b", "image": "i", "resources": {"limits": {"cpu": "2", "memory": "16Gi"}}}]}
    assert problems([{"name": "j", "podSpec": spec}], {"*": {"maxCpu": 4, "maxMemory": "8Gi"}}) == [
        'kns:jobs[j].podSpec: 5 CPU is over maxCpu 4 of profile rule "*"',
        'kns:jobs[j].podSpec: 16Gi memory is over maxMemory 8Gi of profile rule "*"',
    ]


def test_gpu_limits_merge_vendor_by_vendor():
    profiles = {"*": {"maxGpus": {"nvidia": 2, "amd": 0}}, "@ml": {"maxGpus": {"nvidia": 4}}}
    assert problems([{**ALICE, "gpus": 1, "gpuVendor": "amd"}], profiles) == [
        'kns:jobs[j].gpus: 1 amd GPUs are over maxGpus.amd 0 of profile rule "*"'
    ]
    assert parse([{**ALICE, "gpus": 4}], profiles).jobs[0].gpus == 4  # nvidia raised by @ml


def test_node_selector_is_held_to_placement_constraints():
    assert problems([{"name": "j", "image": "i", "nodeSelector": {"region": "apac"}}],
                    {"*": {"placementConstraints": ["region:eu"]}}) == [
        'kns:jobs[j].nodeSelector.region: "region: apac" is not a placement profile rule "*" offers (offered: region:eu)'
    ]


def test_overrides_cannot_slip_an_image_or_placement_past_the_profile():
    profiles = {"*": {"images": ["ok:1"], "allowUnknownImages": False, "placementConstraints": ["region:eu"]}}
    for override, fragment in (
        ({"path": "/spec/template/spec/containers/0/image", "value": "evil:1"}, 'they set the image of container "j" to one that is not'),
        ({"path": "/spec/template/spec/nodeSelector/region", "value": "apac"}, 'they set nodeSelector "region" to a value that is not'),
    ):
        cfg = {"cluster": CLUSTER, "profiles": profiles,
               "jobs": [{"name": "j", "image": "ok:1", "jsonOverrides": [override]}]}
        with pytest.raises(pulumi.RunError) as info:
            run_program(cfg)
        assert f"kns:jobs[j].jsonOverrides: {fragment}" in str(info.value)
        assert "evil" not in str(info.value) and "apac" not in str(info.value)


def test_a_container_added_by_an_override_is_counted():
    sidecar = {"name": "sidecar", "image": "envoy:1", "resources": {"requests": {"cpu": "500m", "memory": "128Mi"},
                                                                      "limits": {"cpu": "500m", "memory": "128Mi"}}}
    result = run([{"name": "j", "image": "i", "cpu": 1, "memory": 512,
                   "jsonOverrides": [{"path": "/spec/template/spec/containers/-", "value": sidecar}]}])
    hard = result.named(QUOTA, "j-quota").inputs["spec"]["hard"]
    assert hard["requests.cpu"] == "1500m" and hard["limits.memory"] == "640Mi"


def test_an_override_through_a_missing_list_creates_the_list():
    job = run([{"name": "j", "image": "i",
                "jsonOverrides": [{"path": "/spec/template/spec/containers/0/args/-", "value": "--fast"}]}]).named(JOB, "j")
    assert pod(job)["containers"][0]["args"] == ["--fast"]


def test_profile_override_errors_name_the_rule():
    cfg = {"cluster": CLUSTER, "profiles": {"@ml": {"jsonOverrides": [{"path": "/metadata/name", "value": "x"}]}},
           "jobs": [ALICE]}
    with pytest.raises(pulumi.RunError) as info:
        run_program(cfg)
    assert 'kns:jobs[j].jsonOverrides (profile rule "@ml" jsonOverrides[0]): "/metadata/name" may not be overridden' in str(info.value)


def test_keys_a_namespace_entry_cannot_use_are_refused():
    found = problems([{"name": "n", "type": "namespace", "jsonOverrides": [{"path": "/spec/x", "value": 1}]},
                      {"name": "m", "image": "i", "credentialsMountPath": "/c"}])
    assert found == [
        f"kns:jobs[n].jsonOverrides: {rules.NAMESPACE_NO_WORKLOAD.message}",
        f"kns:jobs[m].credentialsMountPath: {rules.MOUNT_PATH_NEEDS_CREDENTIALS.message}",
    ]


def test_pod_spec_limit_range_covers_init_containers_and_unbounded_requests(limits_not_required):
    spec = {"initContainers": [{"name": "prep", "image": "i", "resources": {"limits": {"cpu": "4", "memory": "8Gi"}}}],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "3", "memory": "2Gi"}}}]}
    limits = run([{"name": "j", "podSpec": spec}]).named(LR, "j-defaults").inputs["spec"]["limits"][0]
    assert limits["max"] == {"cpu": "4", "memory": "8Gi"}
    # the main container's 3 CPU request would exceed the 1-CPU default limit at admission
    assert limits["default"] == {"cpu": "3", "memory": "2Gi"}


def test_native_sidecars_count_beside_the_containers_and_init_containers_after_the_sidecars_before_them():
    """Kubernetes' pod-requests rules, which the scheduler, quota admission and Kueue apply
    (docs/options.md, "Native sidecars"): an init container with `restartPolicy: Always`
    keeps running, so it adds to the containers; an ordinary init container needs its own
    amount on top of the sidecars started before it."""
    def container(name, cpu, memory, **extra):
        amounts = {"cpu": cpu, "memory": memory}
        return {"name": name, "image": "i", "resources": {"requests": amounts, "limits": amounts}, **extra}

    sidecar = container("proxy", "1", "1Gi", restartPolicy="Always")
    prep = container("prep", "2500m", "1Gi")
    main = container("c", "2", "2Gi")
    hard = {}
    for order, init in (("sidecar first", [sidecar, prep]), ("prep first", [prep, sidecar])):
        result = run([{"name": "j", "podSpec": {"initContainers": init, "containers": [main]}}])
        hard[order] = result.named(QUOTA, "j-quota").inputs["spec"]["hard"]
    # 2 + 1 running (3 CPU, 3Gi); prep after the sidecar starts with it: 1 + 2.5 CPU.
    assert {k: hard["sidecar first"][k] for k in ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory")} == {
        "requests.cpu": "3500m", "requests.memory": "3Gi", "limits.cpu": "3500m", "limits.memory": "3Gi"}
    # prep before the sidecar starts alone (2.5 CPU): the running pod's 3 CPU is the larger.
    assert {k: hard["prep first"][k] for k in ("requests.cpu", "requests.memory")} == {
        "requests.cpu": "3", "requests.memory": "3Gi"}


def test_credentials_mount_into_every_container_of_a_pod_spec():
    spec = {"containers": [{"name": "a", "image": "i", **LIMITED}, {"name": "b", "image": "i", **LIMITED}]}
    result = run([{"name": "j", "podSpec": spec, "credentials": ["s3"]}], credentials=CREDENTIALS)
    template = pod(result.named(JOB, "j"))
    assert all({"name": "kns-credentials", "mountPath": "/credentials", "readOnly": True} in c["volumeMounts"]
               for c in template["containers"])
    assert template["volumes"][0]["projected"]["sources"] == [{"secret": {"name": "kns-cred-s3"}}]


def test_dot_files_are_not_credential_file_names():
    assert any(line.startswith('kns:credentials.ok: ".." is not a valid file name')
               for line in problems([], credentials={"ok": {"..": "x"}}))


def test_overrides_cannot_raise_limits_past_the_maxima():
    cfg = {"cluster": CLUSTER, "profiles": {"*": {"maxCpu": 2}},
           "jobs": [{"name": "j", "image": "i", "cpu": 1,
                     "jsonOverrides": [{"path": "/spec/template/spec/containers/0/resources/limits/cpu", "value": "8"}]}]}
    with pytest.raises(pulumi.RunError) as info:
        run_program(cfg)
    assert 'kns:jobs[j].jsonOverrides: they raise the pod\'s cpu limit to 8, over maxCpu 2 of profile rule "*"' in str(info.value)


def test_a_pod_specs_own_node_selector_is_held_to_placement_constraints():
    spec = {"nodeSelector": {"region": "apac"}, "containers": [{"name": "c", "image": "i"}]}
    assert problems([{"name": "j", "podSpec": spec}], {"*": {"placementConstraints": ["region:eu"]}}) == [
        'kns:jobs[j].podSpec.nodeSelector.region: "region: apac" is not a placement profile rule "*" offers (offered: region:eu)'
    ]
