"""The config loader without the Pulumi runtime: parsing, defaults, every rejection."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from config.errors import ConfigError
from config.loader import parse_config
from config.models import KnsScheduler, PackingScheduler
from kns_testing.program import ROOT, dev_stack_config

CLUSTER = {"name": "kns-test", "renderDir": "out"}
GPU_POOL = {"name": "a100", "role": "gpu", "nodes": ["g1"], "gpu": {"vendor": "nvidia", "perNode": 8}}


def parse(raw, project_dir: Path = ROOT, **kwargs):
    return parse_config(raw, project_dir=project_dir, environ={}, **kwargs)


def problems(raw, **kwargs) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(raw, **kwargs)
    return [str(p) for p in info.value.problems]


def test_dev_stack_parses_with_its_job_file():
    cfg = parse(dev_stack_config())
    assert cfg.cluster.render_dir == "build/manifests/dev"
    assert cfg.cluster.forbidden_contexts
    assert {p.role for p in cfg.node_pools} >= {"vcluster", "gpu"}
    assert len(cfg.jobs) >= 3 and any(j.gpus for j in cfg.jobs)
    assert len(cfg.schedules) >= 2
    # entries from jobs/research.yaml are loaded and remember where they came from
    assert cfg.paths["genomics-align"] == "jobs/research.yaml:jobs[genomics-align]"
    assert cfg.paths["hourly-sync"] == "jobs/research.yaml:schedules[hourly-sync]"


def test_defaults_follow_the_contract():
    cfg = parse({"cluster": {"name": "c"}, "jobs": [{"name": "j", "image": "busybox"}],
                 "schedules": [{"name": "s", "image": "busybox", "schedule": "0 * * * *"}]})
    assert cfg.cluster.namespace_prefix == "kns-"
    assert cfg.cluster.system_namespace == "kns-system"
    assert cfg.packing_scheduler == PackingScheduler()
    assert cfg.packing_scheduler.name == "kns-packing" and cfg.packing_scheduler.enabled
    assert cfg.kns_scheduler.enabled is False
    assert cfg.jobs[0].ttl_hours == 24
    assert cfg.schedules[0].time_zone == "Etc/UTC"


def test_quantities_are_normalised_and_bare_numbers_are_mib():
    cfg = parse({"cluster": CLUSTER, "jobs": [{"name": "j", "image": "i", "cpu": 0.5, "memory": 512, "storage": 2048, "memoryLimit": "1Gi"}]})
    job = cfg.jobs[0]
    assert (job.cpu, job.memory, job.storage, job.memory_limit) == ("500m", "512Mi", "2Gi", "1Gi")


def test_camel_case_keys_and_snake_case_are_both_accepted():
    cfg = parse({"cluster": CLUSTER, "jobs": [{"name": "j", "image": "i", "ttlHours": 2, "backoff_limit": 1}]})
    assert cfg.jobs[0].ttl_hours == 2 and cfg.jobs[0].backoff_limit == 1


def test_kns_scheduler_defaults_from_reference_000():
    kns = KnsScheduler()
    assert kns.vcluster_spawn_delay == 300
    assert kns.init_image == "us-docker.pkg.dev/jarvice/images/init-kns"
    assert kns.gotty_image_tag == "n1.3.0"
    assert kns.keep_vclusters is False and kns.allow_gotty_shell is False
    # the documented JSON, byte for byte: {"default":{"cpu": 1, ...
    assert kns.encoded_limit_range().startswith("eyJkZWZhdWx0Ijp7ImNwdSI6IDEs")


# Each bad input: the config, and the exact path-qualified line the user must see.
BAD_INPUTS = {
    "bad quantity": (
        {"jobs": [{"name": "train-resnet", "image": "i", "memory": "12Qi"}]},
        'kns:jobs[train-resnet].memory: "12Qi" is not a quantity',
    ),
    "duplicate name": (
        {"jobs": [{"name": "dup", "image": "i"}], "schedules": [{"name": "dup", "image": "i", "schedule": "0 * * * *"}]},
        'kns:schedules[dup].name: "dup" is already used by an earlier entry, kns:jobs[dup]; names are unique across jobs and schedules',
    ),
    "unknown pool": (
        {"jobs": [{"name": "j", "image": "i", "pool": "gpus"}]},
        'kns:jobs[j].pool: no node pool named "gpus" (pools: a100)',
    ),
    "GPUs without a GPU pool": (
        {"nodePools": [], "jobs": [{"name": "j", "image": "i", "gpus": 2}]},
        "kns:jobs[j].gpus: requests 2 nvidia GPUs but no node pool has role gpu with vendor nvidia",
    ),
    "GPUs of another vendor": (
        {"jobs": [{"name": "j", "image": "i", "gpus": 1, "gpuVendor": "amd"}]},
        "kns:jobs[j].gpus: requests 1 amd GPUs but no node pool has role gpu with vendor amd",
    ),
    "bad cron": (
        {"schedules": [{"name": "s", "image": "i", "schedule": "61 * * * *"}]},
        'kns:schedules[s].schedule: "61 * * * *" is not a valid cron expression',
    ),
    "six-field cron": (
        {"schedules": [{"name": "s", "image": "i", "schedule": "0 30 2 * * *"}]},
        'kns:schedules[s].schedule: "0 30 2 * * *" has 6 fields (a seconds field is not supported); a schedule needs exactly 5',
    ),
    "both warmUpMinutes and primerSchedule": (
        {"schedules": [{"name": "s", "image": "i", "schedule": "0 3 * * *", "warmUpMinutes": 10, "primerSchedule": "50 2 * * *"}]},
        "kns:schedules[s].primerSchedule: set warmUpMinutes or primerSchedule, not both",
    ),
    "bad name": (
        {"jobs": [{"name": "Train_ResNet", "image": "i"}]},
        'kns:jobs[Train_ResNet].name: "Train_ResNet" is not a DNS-1123 label',
    ),
    "too long name": (
        {"jobs": [{"name": "a" * 41, "image": "i"}]},
        f'kns:jobs[{"a" * 41}].name: "{"a" * 41}" is 41 characters long; at most 40 are allowed',
    ),
    "unknown key": (
        {"jobs": [{"name": "j", "image": "i", "memroy": "1Gi"}]},
        'kns:jobs[j].memroy: unknown key; did you mean "memory"?',
    ),
    "negative CPU": (
        {"jobs": [{"name": "j", "image": "i", "cpu": -2}]},
        "kns:jobs[j].cpu: -2 must not be negative",
    ),
    "forbidden context": (
        {"cluster": {"name": "c", "context": "jarvice-upstream", "forbiddenContexts": ["jarvice-upstream"]}},
        'kns:cluster.context: "jarvice-upstream" is listed in forbiddenContexts',
    ),
    "unknown top-level key": (
        {"job": []},
        'kns:job: unknown key; did you mean "kns:jobs"?',
    ),
    "bad time zone": (
        {"schedules": [{"name": "s", "image": "i", "schedule": "0 3 * * *", "timeZone": "Europe/Pariss"}]},
        'kns:schedules[s].timeZone: "Europe/Pariss" is not an IANA time zone',
    ),
    "more GPUs than a node has": (
        {"jobs": [{"name": "j", "image": "i", "gpus": 9, "pool": "a100"}]},
        'kns:jobs[j].gpus: 9 GPUs do not fit on one node of pool "a100" (perNode: 8)',
    ),
    "GPU pool without gpu spec": (
        {"nodePools": [{"name": "g", "role": "gpu", "nodes": ["n"]}]},
        'kns:nodePools[g]: role "gpu" needs gpu: {vendor: nvidia|amd, perNode: N}',
    ),
    "node in two pools": (
        {"nodePools": [GPU_POOL, {"name": "vc", "role": "vcluster", "nodes": ["g1"]}]},
        'kns:nodePools[vc].nodes: node "g1" is already in pool "a100"; a node belongs to one pool',
    ),
    "bad taint effect": (
        {"nodePools": [{"name": "c", "role": "compute", "nodes": ["n"], "taints": [{"key": "k", "effect": "Never"}]}]},
        "kns:nodePools[c].taints[0].effect: \"Never\" is invalid: input should be 'NoSchedule', 'PreferNoSchedule' or 'NoExecute'",
    ),
    "request over limit": (
        {"jobs": [{"name": "j", "image": "i", "cpu": 4, "cpuLimit": 2}]},
        "kns:jobs[j].cpu: cpu 4 is more than cpuLimit 2",
    ),
    "missing image": (
        {"jobs": [{"name": "j"}]},
        "kns:jobs[j].image: is required (no matching profile rule sets defaultImage)",
    ),
    "privileged without a profile": (
        {"jobs": [{"name": "j", "image": "i", "privileged": True}]},
        "kns:jobs[j].privileged: needs a profile with allowPrivileged: true (no profile rule matches)",
    ),
    "unknown dynamic label placeholder": (
        {"jobs": [{"name": "j", "image": "i", "dynamicLabels": {"who": "{owner}"}}]},
        "kns:jobs[j].dynamicLabels.who: unknown placeholder {owner}; use {name} {user} {groups} {cluster} {stack}",
    ),
    "secret key stored in plain text": (
        {"keycloakClientSecret": "hunter2"},
        "kns:keycloakClientSecret: must be a secret: set it with `pulumi config set --secret kns:keycloakClientSecret ...`",
    ),
    "memory string without a unit is bytes": (
        {"jobs": [{"name": "j", "image": "i", "memory": "4096"}]},
        'kns:jobs[j].memory: "4096" is only 4096 bytes; write a number for MiB (4096) or a unit ("4Gi")',
    ),
    "namespace of the system": (
        {"cluster": {"name": "c", "renderDir": "x", "systemNamespace": "kns-batch"}, "jobs": [{"name": "batch", "image": "i"}]},
        'kns:jobs[batch].name: its namespace "kns-batch" is kns:cluster.systemNamespace',
    ),
    "reserved namespace": (
        {"cluster": {"name": "c", "renderDir": "x", "namespacePrefix": ""}, "jobs": [{"name": "kube-system", "image": "i"}]},
        'kns:jobs[kube-system].name: its namespace "kube-system" is reserved by Kubernetes',
    ),
    "node selector takes the pool label": (
        {"jobs": [{"name": "j", "image": "i", "nodeSelector": {"kns.io/pool": "a100"}}]},
        "kns:jobs[j].nodeSelector.kns.io/pool: nodeSelector cannot set kns.io/pool; use pool (it also adds the pool's tolerations)",
    ),
    "missing cluster": (
        {"cluster": None},
        "kns:cluster: is required (at least {name: ...})",
    ),
}


def _with_base(raw):
    merged = {"cluster": CLUSTER, "nodePools": [GPU_POOL], **raw}
    if merged.get("cluster") is None:
        del merged["cluster"]
    return merged


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_reported_with_its_path(case):
    raw, expected = BAD_INPUTS[case]
    found = problems(_with_base(raw), secret_keys=frozenset())
    assert any(line.startswith(expected) for line in found), found


def test_every_problem_is_reported_at_once():
    raw = _with_base({
        "jobs": [
            {"name": "train-resnet", "image": "i", "memory": "12Qi", "cpu": -1},
            {"name": "ok", "image": "i", "pool": "nope"},
        ],
        "schedules": [{"name": "s", "image": "i", "schedule": "* * * * * *", "warmUpMinutes": 5, "primerSchedule": "0 * * * *"}],
    })
    with pytest.raises(ConfigError) as info:
        parse(raw)
    message = str(info.value)
    assert message.startswith("kns-platform: invalid configuration, 5 problems; nothing was applied:")
    for expected in (
        'kns:jobs[train-resnet].memory: "12Qi" is not a quantity',
        "kns:jobs[train-resnet].cpu: -1 must not be negative",
        'kns:jobs[ok].pool: no node pool named "nope"',
        "kns:schedules[s].schedule:",
        "kns:schedules[s].primerSchedule: set warmUpMinutes or primerSchedule, not both",
    ):
        assert expected in message
    assert "Traceback" not in message


def test_entries_without_a_usable_name_are_named_by_position():
    found = problems(_with_base({"jobs": [{"image": "i"}]}))
    assert "kns:jobs[0].name: is required" in found


def test_job_file_problems_name_the_file(tmp_path):
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "a.yaml").write_text(textwrap.dedent("""
        jobs:
          - name: fine
            image: busybox
          - name: broken
            image: busybox
            cpu: lots
        extra: 1
    """))
    found = problems({"cluster": CLUSTER, "jobFiles": ["team/*.yaml", "missing/*.yaml"]}, project_dir=tmp_path)
    assert found == [
        "team/a.yaml:8:extra: unknown key; a job file has jobs: and schedules:",
        f'kns:jobFiles[1]: "missing/*.yaml" matches no file (relative to {tmp_path})',
        'team/a.yaml:7:jobs[broken].cpu: "lots" is not a quantity',
    ]


def test_job_file_entries_are_validated_like_stack_entries(tmp_path):
    (tmp_path / "a.yaml").write_text("jobs:\n  - name: broken\n    image: busybox\n    cpu: lots\n")
    found = problems({"cluster": CLUSTER, "jobFiles": ["*.yaml"]}, project_dir=tmp_path)
    assert found == ['a.yaml:4:jobs[broken].cpu: "lots" is not a quantity']


def test_job_file_names_clash_with_stack_names(tmp_path):
    (tmp_path / "a.yaml").write_text("schedules:\n  - name: j\n    image: busybox\n    schedule: '0 * * * *'\n")
    found = problems({"cluster": CLUSTER, "jobs": [{"name": "j", "image": "i"}], "jobFiles": ["a.yaml"]}, project_dir=tmp_path)
    assert found == ['a.yaml:2:schedules[j].name: "j" is already used by an earlier entry, kns:jobs[j]; names are unique across jobs and schedules']


KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: jarvice-upstream
contexts:
- name: jarvice-upstream
  context: {cluster: up, user: admin}
- name: kns
  context: {cluster: kns, user: admin}
"""


def test_forbidden_current_context_of_an_inline_kubeconfig():
    raw = {"cluster": {"name": "c", "kubeconfig": KUBECONFIG, "forbiddenContexts": ["jarvice-upstream"]}}
    found = problems(raw)
    assert found == [
        'kns:cluster: the kubeconfig\'s current context "jarvice-upstream" is listed in forbiddenContexts: '
        "set kns:cluster.context to the dedicated KNS cluster"
    ]


def test_forbidden_current_context_of_the_ambient_kubeconfig(tmp_path):
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    raw = {"cluster": {"name": "c", "forbiddenContexts": ["jarvice-upstream"]}}
    with pytest.raises(ConfigError, match="current context \"jarvice-upstream\""):
        parse_config(raw, project_dir=ROOT, environ={"KUBECONFIG": str(path)})
    # choosing the dedicated context explicitly is fine
    raw["cluster"]["context"] = "kns"
    assert parse_config(raw, project_dir=ROOT, environ={"KUBECONFIG": str(path)}).cluster.context == "kns"


def test_kubeconfig_path_is_relative_to_the_project(tmp_path):
    (tmp_path / "kube.yaml").write_text(KUBECONFIG)
    raw = {"cluster": {"name": "c", "kubeconfig": "kube.yaml", "forbiddenContexts": ["jarvice-upstream"]}}
    with pytest.raises(ConfigError, match="current context"):
        parse(raw, project_dir=tmp_path)
    raw["cluster"]["kubeconfig"] = "nope.yaml"
    assert problems(raw, project_dir=tmp_path) == [
        'kns:cluster.kubeconfig: "nope.yaml" is neither kubeconfig text nor an existing file'
    ]


def test_secret_keys_are_accepted_when_secret():
    cfg = parse({"cluster": CLUSTER, "keycloakClientSecret": "s3cr3t"}, secret_keys=frozenset({"keycloakClientSecret"}))
    assert cfg.keycloak_client_secret == "s3cr3t"


def test_namespace_prefix_must_leave_room_for_names():
    found = problems({"cluster": {"name": "c", "namespacePrefix": "x" * 30}})
    assert any("namespacePrefix" in line and "at most 63" in line for line in found)


def test_pool_reference_is_checked_even_when_the_entry_has_other_problems():
    found = problems(_with_base({"jobs": [{"name": "j", "image": "i", "memory": "12Qi", "pool": "nope"}]}))
    assert found == [
        'kns:jobs[j].memory: "12Qi" is not a quantity',
        'kns:jobs[j].pool: no node pool named "nope" (pools: a100)',
    ]


def test_a_job_file_named_by_two_globs_is_loaded_once(tmp_path):
    (tmp_path / "a.yaml").write_text("jobs:\n  - name: j\n    image: busybox\n")
    cfg = parse({"cluster": CLUSTER, "jobFiles": ["*.yaml", "a.yaml"]}, project_dir=tmp_path)
    assert [j.name for j in cfg.jobs] == ["j"]


def test_authored_order_is_restored_over_sorted_delivery():
    from config.source import restore_order

    authored = {"profiles": {"*": {"maxCpu": 1}, "alice": {"maxCpu": 8}, "@ml": {"maxCpu": 2}},
                "jobs": [{"name": "j", "env": {"B": "1", "A": "$(B)"}}]}
    delivered = {"profiles": {"*": {"maxCpu": 1}, "@ml": {"maxCpu": 2}, "alice": {"maxCpu": 8}},
                 "jobs": [{"env": {"A": "$(B)", "B": "1"}, "name": "j"}]}
    restored = restore_order(delivered, authored)
    assert list(restored["profiles"]) == ["*", "alice", "@ml"]
    assert list(restored["jobs"][0]["env"]) == ["B", "A"]
    # values always come from what the engine delivered
    assert restore_order({"a": 2, "b": 3}, {"b": 0, "a": 1}) == {"b": 3, "a": 2}
    # different key sets: delivered order is kept
    assert list(restore_order({"a": 1, "c": 2}, {"c": 0, "b": 0})) == ["a", "c"]
