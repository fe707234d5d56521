"""Autoscaled pools (docs/autoscaling.md): one Karpenter NodePool per pool, placement like a
static pool, the NodePool valid against the pinned Karpenter CRD, and every bad `autoscale`
a path-qualified config error through the program and `./kns validate` alike, with nothing
registered. The same NodePools meet the real API server and Karpenter in tests/test_e2e.py.
"""

from __future__ import annotations

import copy
import pathlib
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from config import names, rules
from kns_testing import apiserver
from kns_testing import tokens
from kns_testing.autoscale import AWS_CLASS, CONFIG, KWOK_CLASS, autoscaled_pool, requirement
from kns_testing.doors import expected_text, program_text, refused, validate_text
from kns_testing.program import run_program

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
PATCH = "kubernetes:core/v1:NodePatch"


@pytest.fixture(scope="module")
def run():
    return run_program(CONFIG)


def nodepool(run, name: str) -> dict[str, Any]:
    return apiserver.manifest(run.named(NODEPOOL, name))


def pod_template(run, kind: str, name: str) -> dict[str, Any]:
    spec = run.named(f"kubernetes:batch/v1:{kind}", name).inputs["spec"]
    return (spec["jobTemplate"]["spec"] if kind == "CronJob" else spec)["template"]


def test_an_autoscaled_pool_is_one_nodepool_whose_template_carries_the_pool(run):
    burst = nodepool(run, "burst")
    assert burst["apiVersion"] == "karpenter.sh/v1" and burst["kind"] == "NodePool"
    assert burst["metadata"]["name"] == "burst" and burst["metadata"]["labels"]["kns.io/cluster"] == "kns-test"
    template = burst["spec"]["template"]
    assert template["metadata"]["labels"] == {"team": "ml", "kns.io/pool": "burst", "kns.io/cluster": "kns-test"}
    assert template["spec"]["taints"] == [{"key": "kns.io/burst", "effect": "NoSchedule"}]  # no empty value
    assert template["spec"]["nodeClassRef"] == KWOK_CLASS
    assert template["spec"]["requirements"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"], "minValues": 1},
    ]
    assert template["spec"]["expireAfter"] == "Never"
    assert burst["spec"]["limits"] == {"cpu": "64", "memory": "256Gi"}
    assert burst["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "45s"}
    assert burst["spec"]["weight"] == 10


def test_a_gpu_pool_template_has_the_gpu_and_vcluster_rules_and_its_count_where_the_provider_labels_it(run):
    h100 = nodepool(run, "h100")["spec"]
    labels = h100["template"]["metadata"]["labels"]
    assert labels["nvidia.com/gpu"] == "present" and labels["node-role.jarvice.io/jarvice-vcluster"] == "true"
    taints = {(t["key"], t["value"], t["effect"]) for t in h100["template"]["spec"]["taints"]}
    assert taints == {("nvidia.com/gpu", "present", "NoSchedule"),
                      ("node-role.jarvice.io/jarvice-vcluster", "true", "NoSchedule")}
    assert h100["template"]["spec"]["requirements"] == [
        {"key": rules.GPU_COUNT_LABELS["karpenter.k8s.aws"], "operator": "In", "values": ["4"]}]
    assert h100["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"}
    # kwok labels no GPU count: no requirement, the workload's request steers Karpenter
    kwok = nodepool(run, "kwok-gpu")["spec"]
    assert kwok["template"]["spec"]["requirements"] == []
    assert ("amd.com/gpu", "present", "NoSchedule") in {
        (t["key"], t["value"], t["effect"]) for t in kwok["template"]["spec"]["taints"]}


def test_static_pools_keep_their_patches_and_autoscaled_ones_have_none(run):
    assert sorted(r.name for r in run.of_type(PATCH)) == ["static.n1", "static.n2"]
    assert sorted(r.name for r in run.of_type(NODEPOOL)) == ["burst", "h100", "kwok-gpu"]
    component = run.named(tokens.NODE_POOL, "burst")
    assert [r.name for r in run.of_type(NODEPOOL) if r.name == component.name]


def test_workloads_on_an_autoscaled_pool_get_its_placement_and_keep_their_node(run):
    for kind, name in (("Job", "burst-job"), ("CronJob", "warm")):
        template = pod_template(run, kind, name)
        spec = template["spec"]
        assert spec["nodeSelector"] == {"kns.io/pool": "burst"}
        assert spec["tolerations"] == [{"key": "kns.io/burst", "operator": "Equal", "value": "", "effect": "NoSchedule"}]
        assert template["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    static = pod_template(run, "Job", "static-job")
    assert "karpenter.sh/do-not-disrupt" not in (static["metadata"].get("annotations") or {})
    gpu = pod_template(run, "Job", "train")["spec"]
    assert gpu["nodeSelector"] == {"kns.io/pool": "h100"}
    assert {t["key"] for t in gpu["tolerations"]} == {"nvidia.com/gpu", "node-role.jarvice.io/jarvice-vcluster"}


def test_a_pod_without_a_pool_keeps_its_node_wherever_it_lands():
    """A pod without a pool may land on an autoscaled pool (an untainted one, a queue's
    flavor, its own nodeSelector): Karpenter must not consolidate its node either. In a
    stack without autoscaled pools nothing is added."""
    entries = [{"name": "anywhere", "user": "bob", "image": "busybox:1.37"},
               {"name": "own-selector", "user": "bob",
                "podSpec": {"nodeSelector": {"kns.io/pool": "burst"},
                            "tolerations": [{"key": "kns.io/burst", "operator": "Exists", "effect": "NoSchedule"}],
                            "containers": [{"name": "c", "image": "busybox:1.37",
                                            "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}]
    done = run_program({**CONFIG, "jobs": CONFIG["jobs"] + entries})
    key = next(iter(names.DO_NOT_DISRUPT))
    for name in ("anywhere", "own-selector"):
        assert pod_template(done, "Job", name)["metadata"]["annotations"][key] == "true", name
    static_only = {**CONFIG, "nodePools": [CONFIG["nodePools"][0]], "jobs": entries[:1], "schedules": []}
    bare = pod_template(run_program(static_only), "Job", "anywhere")
    assert key not in (bare["metadata"].get("annotations") or {})


def test_the_primer_pod_asks_for_the_whole_workload_on_the_pool(run):
    """What makes Karpenter provision at primer time: the primed pod is the workload's pod,
    with its full requests, the pool's selector and tolerations, from the first minute."""
    crons = run.of_type("kubernetes:batch/v1:CronJob")
    warm = [c for c in crons if c.inputs["metadata"]["name"].startswith("warm")]
    assert [c.inputs["spec"]["schedule"] for c in warm] == ["50 5 * * *"]
    spec = warm[0].inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["name"] == "kns-wait"
    workload = spec["containers"][0]["resources"]["requests"]
    assert workload["cpu"] == "6" and workload["memory"] == "4Gi"
    assert spec["nodeSelector"] == {"kns.io/pool": "burst"}


def test_stack_outputs_show_autoscaled_pools(run):
    pools = run.outputs["nodePools"]
    assert pools["static"] == {"nodes": ["n1", "n2"], "taints": []}
    assert pools["burst"] == {
        "nodes": [], "taints": [{"key": "kns.io/burst", "value": "", "effect": "NoSchedule"}],
        "autoscale": {"nodePool": "burst", "limits": {"cpu": "64", "memory": "256Gi"}},
    }
    assert pools["h100"]["autoscale"] == {"nodePool": "h100", "limits": {"nvidia.com/gpu": "16"}}


# ---- every NodePool the program emits is one the CRD accepts ----------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool=autoscaled_pool())
def test_every_nodepool_the_program_emits_is_valid_against_the_karpenter_crd(pool):
    done = run_program({"cluster": {"name": "kns-test", "renderDir": "out"}, "nodePools": [pool]})
    emitted = done.of_type(NODEPOOL)
    assert len(emitted) == 1
    assert apiserver.problems(done.resources) == []


def test_the_crd_check_can_fail(run):
    """The validator above refuses what the CRD refuses (a control: it is not vacuous)."""
    broken = copy.deepcopy(run.named(NODEPOOL, "burst"))
    broken.inputs["spec"]["weight"] = 101
    broken.inputs["spec"]["disruption"]["consolidationPolicy"] = "Sometimes"
    del broken.inputs["spec"]["template"]["spec"]["nodeClassRef"]
    found = apiserver.problems([broken])
    assert len(found) == 3, found


# ---- bad input: a path-qualified config error, nothing registered -------------------------

POOL = "kns:nodePools[p]"
AUTO = POOL + ".autoscale"


def bad(pool_change=None, auto_change=None, **auto_keys) -> dict[str, Any]:
    pool = {"name": "p", "role": "compute", "autoscale": {"nodeClassRef": dict(KWOK_CLASS), **auto_keys}}
    if auto_change:
        auto_change(pool["autoscale"])
    if pool_change:
        pool_change(pool)
    return {"cluster": {"name": "kns-test", "renderDir": "out"}, "nodePools": [pool]}


def _set(key, value):
    return lambda d: d.__setitem__(key, value)


def _drop(key):
    return lambda d: d.pop(key, None)


OPERATOR_MSG = ("input should be 'In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt', 'Gte' or 'Lte'")
CASES = [
    # nodes and autoscale: exactly one
    ("both", bad(pool_change=_set("nodes", ["n1"])), POOL, rules.NODES_OR_AUTOSCALE.message),
    ("neither", bad(pool_change=_drop("autoscale")), POOL, rules.NODES_OR_AUTOSCALE.message),
    ("null autoscale", bad(pool_change=_set("autoscale", None)), POOL, rules.NODES_OR_AUTOSCALE.message),
    # the node class reference
    ("no nodeClassRef", bad(auto_change=_drop("nodeClassRef")), AUTO + ".nodeClassRef", "is required"),
    ("no group", bad(auto_change=lambda a: a["nodeClassRef"].pop("group")), AUTO + ".nodeClassRef.group", "is required"),
    ("empty kind", bad(auto_change=lambda a: a["nodeClassRef"].update(kind="")), AUTO + ".nodeClassRef.kind",
     "at least 1 character"),
    ("empty name", bad(auto_change=lambda a: a["nodeClassRef"].update(name="")), AUTO + ".nodeClassRef.name",
     "at least 1 character"),
    ("group with a slash", bad(auto_change=lambda a: a["nodeClassRef"].update(group="karpenter.sh/v1")),
     AUTO + ".nodeClassRef.group", "is not an API group"),
    # requirements
    *[(f"operator {op}", bad(requirements=[{"key": "kubernetes.io/os", "operator": op, "values": ["linux"]}]),
       AUTO + ".requirements[0].operator", OPERATOR_MSG) for op in ("in", "Equals", "Matches", "")],
    ("In without values", bad(requirements=[{"key": "kubernetes.io/os", "operator": "In", "values": []}]),
     AUTO + ".requirements[0]", rules.IN_NEEDS_VALUES.message),
    ("In with values unset", bad(requirements=[{"key": "kubernetes.io/os", "operator": "In"}]),
     AUTO + ".requirements[0]", rules.IN_NEEDS_VALUES.message),
    *[(f"{op} {values}", bad(requirements=[{"key": "example.com/cores", "operator": op, "values": values}]),
       AUTO + ".requirements[0]", rules.NUMERIC_NEEDS_ONE_INTEGER.message)
      for op, values in (("Gt", ["a"]), ("Lt", []), ("Gte", ["1", "2"]), ("Lte", ["-1"]), ("Gt", ["1.5"]))],
    ("Exists with values", bad(requirements=[{"key": "example.com/x", "operator": "Exists", "values": ["a"]}]),
     AUTO + ".requirements[0]", rules.EXISTS_TAKES_NO_VALUES.message),
    ("minValues over values", bad(requirements=[{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"],
                                                 "minValues": 2}]),
     AUTO + ".requirements[0]", rules.MIN_VALUES_OVER_VALUES.message),
    ("minValues over 50", bad(requirements=[{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"],
                                             "minValues": 51}]),
     AUTO + ".requirements[0].minValues", "less than or equal to 50"),
    *[(f"restricted key {key}", bad(requirements=[{"key": key, "operator": "Exists"}]),
       AUTO + ".requirements[0]", "Karpenter keeps for itself" if "karpenter" in key else "a pool cannot")
      for key in ("karpenter.sh/foo", "sub.karpenter.sh/bar", "karpenter.sh")],
    ("hostname key", bad(requirements=[{"key": "kubernetes.io/hostname", "operator": "Exists"}]),
     AUTO + ".requirements[0]", "a pool cannot set or select it"),
    ("nodepool key", bad(requirements=[{"key": "karpenter.sh/nodepool", "operator": "Exists"}]),
     AUTO + ".requirements[0]", "set by Karpenter"),
    ("bad key", bad(requirements=[{"key": "Bad Key", "operator": "Exists"}]),
     AUTO + ".requirements[0]", "is not a valid key"),
    ("bad value", bad(requirements=[{"key": "example.com/x", "operator": "In", "values": ["-x-"]}]),
     AUTO + ".requirements[0]", "is not a valid label value"),
    ("capacity type", bad(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In",
                                         "values": ["cheap"]}]),
     AUTO + ".requirements[0]", "takes on-demand, spot, reserved"),
    ("101 requirements", bad(requirements=[{"key": f"example.com/k{i}", "operator": "Exists"} for i in range(101)]),
     AUTO + ".requirements", "at most 100 items"),
    # limits
    *[(f"limit {value!r}", bad(limits={"cpu": value}), AUTO + ".limits", "is not a quantity")
      for value in ("lots", "1x", "4 cores", "")],
    ("limit negative", bad(limits={"memory": -1}), AUTO + ".limits", "memory"),
    ("limit unknown resource", bad(limits={"gpus": 4}), AUTO + ".limits", "not a resource a node offers"),
    ("limit quota name", bad(limits={"requests.cpu": 4}), AUTO + ".limits", "not a resource a node offers"),
    # durations
    *[(f"consolidateAfter {value!r}", bad(consolidateAfter=value), AUTO + ".consolidateAfter", "is not a duration")
      for value in ("5 minutes", "1d", "30", "-30s", "never", "1.5h")],
    *[(f"expireAfter {value!r}", bad(expireAfter=value), AUTO + ".expireAfter", "is not a duration")
      for value in ("720", "30d", "forever", "1h 30m")],
    # other CRD bounds
    ("weight 0", bad(weight=0), AUTO + ".weight", "greater than or equal to 1"),
    ("weight 101", bad(weight=101), AUTO + ".weight", "less than or equal to 100"),
    ("consolidation policy", bad(consolidation="Always"), AUTO + ".consolidation", "WhenEmpty"),
    ("unknown key", bad(maxNodes=3), AUTO + ".maxNodes", ""),
    ("template label in karpenter.sh", bad(pool_change=_set("labels", {"karpenter.sh/team": "a"})),
     POOL + ".labels.karpenter.sh/team", "Karpenter keeps for itself"),
    ("template label hostname", bad(pool_change=_set("labels", {"kubernetes.io/hostname": "a"})),
     POOL + ".labels.kubernetes.io/hostname", "a pool cannot set or select it"),
    ("template label in the node class domain", bad(pool_change=_set("labels", {"karpenter.kwok.sh/x": "a"})),
     POOL + ".labels.karpenter.kwok.sh/x", "node class"),
    # what the pinned CRD or Karpenter would refuse of the NodePool as emitted
    ("a duration past Go's", bad(consolidateAfter="2562048h"), AUTO + ".consolidateAfter",
     "longer than Karpenter can read (a Go duration: at most 2562047h)"),
    ("an expiry past Go's", bad(expireAfter="9999999999m"), AUTO + ".expireAfter", "longer than Karpenter can read"),
    ("a node class name that is not an object name", bad(auto_change=lambda a: a["nodeClassRef"].update(name="My Class")),
     AUTO + ".nodeClassRef.name", "node class name"),
    ("100 requirements and the program's GPU one",
     bad(pool_change=lambda p: p.update(role="gpu", gpu={"vendor": "nvidia", "perNode": 8}),
         auto_change=lambda a: a.update(nodeClassRef=dict(AWS_CLASS)),
         requirements=[{"key": f"example.com/k{i}", "operator": "Exists"} for i in range(100)]),
     AUTO + ".requirements", "the one the program adds for gpu.perNode (karpenter.k8s.aws/instance-gpu-count)"),
    # limits no node fits under (rules.LIMIT_BELOW_ONE_NODE)
    *[(f"limit {key} 0", bad(limits={key: 0}), AUTO + f".limits.{key}", rules.LIMIT_BELOW_ONE_NODE.message)
      for key in ("cpu", "memory", "pods", "nodes")],
    ("GPU limit under one node", bad(pool_change=lambda p: p.update(role="gpu", gpu={"vendor": "nvidia", "perNode": 8}),
                                     limits={"nvidia.com/gpu": 4}),
     AUTO + ".limits.nvidia.com/gpu", "fewer GPUs than one node of the pool has (gpu.perNode 8)"),
    # keys in the node class provider's domain that the provider never sets (rules.PROVIDER_LABELS)
    *[(f"requirement key {key} of {group}",
       bad(auto_change=lambda a, g=group, k=kind: a["nodeClassRef"].update(group=g, kind=k),
           requirements=[{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                         {"key": key, "operator": "Exists"}]),
       AUTO + ".requirements[1].key", f"keeps for the labels it sets from the instance type, and it sets no such label{hint}")
      for group, kind, key, hint in (
          ("karpenter.k8s.aws", "EC2NodeClass", "karpenter.k8s.aws/instance-famly",
           '; did you mean "karpenter.k8s.aws/instance-family"?'),
          ("karpenter.k8s.aws", "EC2NodeClass", "karpenter.k8s.aws/zone", ""),
          ("karpenter.k8s.aws", "EC2NodeClass", "gpu.karpenter.k8s.aws/instance-gpu-count", ""),
          ("karpenter.azure.com", "AKSNodeClass", "karpenter.azure.com/gpu-count", ""),
          ("karpenter.kwok.sh", "KWOKNodeClass", "karpenter.kwok.sh/instance-gpu-count", ""))],
    ("template label of AWS it never sets",
     bad(auto_change=lambda a: a["nodeClassRef"].update(AWS_CLASS),
         pool_change=_set("labels", {"karpenter.k8s.aws/team": "a"})),
     POOL + ".labels.karpenter.k8s.aws/team", "it sets no such label"),
    ("taint twice", bad(pool_change=_set("taints", [{"key": "a/b", "value": "1", "effect": "NoSchedule"},
                                                    {"key": "a/b", "value": "2", "effect": "NoSchedule"}])),
     POOL + ".taints", 'two taints with key "a/b"'),
]


@pytest.mark.parametrize("config,path,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_autoscale_is_a_config_error_through_both_doors(tmp_path, capsys, config, path, fragment):
    text = program_text(config)
    lines = [line[4:] for line in text.splitlines()[1:]]
    assert any(line.startswith(path + ": ") and fragment in line for line in lines), (path, fragment, text)
    assert validate_text(tmp_path, config, capsys) == text
    assert expected_text(lines) == text


def test_an_override_cannot_take_do_not_disrupt_from_a_pod_on_an_autoscaled_pool(tmp_path, capsys):
    """Karpenter may consolidate the node of a pod without it: a primed pod would lose its
    warm node, a running one its work (docs/autoscaling.md)."""
    config = copy.deepcopy(CONFIG)
    key = next(iter(names.DO_NOT_DISRUPT))
    pointer = "/spec/template/metadata/annotations/" + key.replace("/", "~1")
    for entry in config["jobs"] + config["schedules"]:
        if entry["name"] in ("burst-job", "warm"):
            entry["jsonOverrides"] = [{"path": pointer, "value": "false"}]
    refused(tmp_path, capsys, config, [
        f'kns:jobs[burst-job].jsonOverrides[0]: {pointer}: is "true", set by the program (the pod keeps the node its '
        'autoscaled pool made for it); overrides may not change it',
        f'kns:schedules[warm].jsonOverrides[0]: {pointer}: is "true", set by the program (the pod keeps the node its '
        'autoscaled pool made for it); overrides may not change it',
    ])


def test_an_entry_on_an_invalid_pool_points_at_the_pool_not_at_an_unknown_one(tmp_path, capsys):
    config = bad(consolidateAfter="5 minutes")
    config["jobs"] = [{"name": "j", "image": "busybox:1.37", "pool": "p"},
                      {"name": "k", "image": "busybox:1.37", "pool": "nowhere"}]
    text = program_text(config)
    lines = [line[4:] for line in text.splitlines()[1:]]
    assert lines == [
        f'{AUTO}.consolidateAfter: "5 minutes" is {rules.DURATION_OR_NEVER.message}',
        'kns:jobs[j].pool: node pool "p" is invalid (its problems are listed under kns:nodePools[p])',
        'kns:jobs[k].pool: no node pool named "nowhere" (pools: none are defined)',
    ]
    assert validate_text(tmp_path, config, capsys) == text


def test_the_kwok_stage_for_primed_pods_reads_what_the_wait_container_carries():
    """scripts/kwok/pod-complete-primed.yaml models the wait for the e2e tests: it must name
    the wait container and the environment plan/wait.py gives it."""
    import yaml as yaml_

    from kns_testing.program import ROOT
    from plan import wait

    stage = yaml_.safe_load((ROOT / "scripts" / "kwok" / "pod-complete-primed.yaml").read_text())
    selector = stage["spec"]["selector"]["matchExpressions"]
    assert {"key": ".spec.initContainers.[].name", "operator": "In", "values": [wait.NAME]} in selector
    container = wait.wait_container(5, "Europe/Paris")
    env = {e["name"] for e in container["env"]}
    expression = stage["spec"]["delay"]["durationFrom"]["expressionFrom"]
    assert {"KNS_LEAD_SECONDS", "KNS_TZ_OFFSETS"} <= env
    assert all(f'"{name}"' in expression for name in ("KNS_LEAD_SECONDS", "KNS_TZ_OFFSETS", wait.NAME))


# ---- entries no node of their autoscaled pool could hold ---------------------------------

FIT = {
    "a pod over the cpu limit": (
        lambda c: c["jobs"][0].update(cpu=80),
        'kns:jobs[burst-job].pool: pool "burst" could never get a node for its pod, which asks cpu 80, more than '
        "autoscale.limits.cpu 64 allows all its nodes together: Karpenter would never create one"),
    "a pod over the memory limit (a prescaled schedule)": (
        lambda c: c["schedules"][0].update(memory="300Gi"),
        'kns:schedules[warm].pool: pool "burst" could never get a node for its pod, which asks memory 300Gi, more '
        "than autoscale.limits.memory 256Gi allows all its nodes together: Karpenter would never create one"),
    "placement that differs from the pool's label": (
        lambda c: c["jobs"][0].update(placement={"team": "ops"}),
        'kns:jobs[burst-job].pool: pool "burst" could never get a node for its pod, which asks the node selector '
        "team=ops, but every node of the pool has team=ml: Karpenter would never create one"),
    "a node selector key the pool neither sets nor requires": (
        lambda c: c["jobs"][0].update(nodeSelector={"disk": "ssd"}),
        'kns:jobs[burst-job].pool: pool "burst" could never get a node for its pod, which asks the node selector '
        "disk=ssd, a label no node of the pool carries (the pool neither sets it in labels nor requires it): "
        "Karpenter would never create one"),
    "a podSpec node selector its requirement rules out": (
        lambda c: [c["schedules"][0].pop(k) for k in ("image", "cpu", "memory")] and c["schedules"][0].update(
            podSpec={"nodeSelector": {"kubernetes.io/arch": "arm64"}, "containers": [
                {"name": "main", "image": "busybox:1.37", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}),
        'kns:schedules[warm].pool: pool "burst" could never get a node for its pod, which asks the node selector '
        "kubernetes.io/arch=arm64, which its requirement kubernetes.io/arch In [amd64] rules out: Karpenter would "
        "never create one"),
}


@pytest.mark.parametrize("change, line", list(FIT.values()), ids=list(FIT))
def test_an_entry_no_node_of_its_autoscaled_pool_could_hold_is_refused(tmp_path, capsys, change, line):
    config = copy.deepcopy(CONFIG)
    change(config)
    text = program_text(config)
    assert text == expected_text([line])
    assert validate_text(tmp_path, config, capsys) == text


def test_a_gpu_count_requirement_below_the_entrys_gpus_is_refused(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["nodePools"][2]["autoscale"]["requirements"] = [
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In", "values": ["1", "2"]}]
    text = program_text(config)
    assert text == expected_text([
        'kns:jobs[train].pool: pool "h100" could never get a node for its pod, which asks 4 nvidia.com/gpu, more than '
        "its requirements let a node have (karpenter.k8s.aws/instance-gpu-count at most 2): Karpenter would never "
        "create one"])
    assert validate_text(tmp_path, config, capsys) == text


@pytest.mark.parametrize("operator, values", [("Lte", ["4"]), ("Lt", ["5"]), ("In", ["4", "8"]), ("Gt", ["2"])])
def test_a_gpu_count_requirement_that_leaves_room_is_taken(operator, values):
    config = copy.deepcopy(CONFIG)
    config["nodePools"][2]["autoscale"]["requirements"] = [
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": operator, "values": values}]
    assert run_program(config).named(tokens.NODE_POOL, "h100") is not None


@pytest.mark.parametrize("requirement, label", [
    ({"key": "kns.io/pool", "operator": "In", "values": ["other"]}, "kns.io/pool=p"),
    ({"key": "team", "operator": "NotIn", "values": ["ml"]}, "team=ml"),
    ({"key": "team", "operator": "DoesNotExist"}, "team=ml"),
    ({"key": "kns.io/cluster", "operator": "In", "values": ["kns-other"]}, "kns.io/cluster=kns-test"),
    ({"key": "nvidia.com/gpu", "operator": "DoesNotExist"}, "nvidia.com/gpu=present"),
    ({"key": "tier", "operator": "Gt", "values": ["5"]}, "tier=3"),
])
def test_a_requirement_that_contradicts_the_pools_own_labels_is_refused(tmp_path, capsys, requirement, label):
    def change(pool):
        pool["labels"] = {"team": "ml", "tier": "3"}
        if requirement["key"] == "nvidia.com/gpu":
            pool.update(role="gpu", gpu={"vendor": "nvidia", "perNode": 1})
    config = bad(pool_change=change, requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                                   requirement])
    key, value = label.split("=")
    shown = f"{requirement['key']} {requirement['operator']}" + (
        f" [{', '.join(requirement['values'])}]" if requirement.get("values") else "")
    refused(tmp_path, capsys, config, [f"{AUTO}.requirements[1]: {shown} contradicts the label {label} the pool puts "
                                       "on every node it creates: Karpenter would create none"])


@pytest.mark.parametrize("group, kind, key", [
    ("karpenter.k8s.aws", "EC2NodeClass", "karpenter.k8s.aws/instance-family"),
    ("karpenter.k8s.aws", "EC2NodeClass", "karpenter.k8s.aws/capacity-reservation-type"),
    ("karpenter.azure.com", "AKSNodeClass", "karpenter.azure.com/sku-family"),
    ("karpenter.kwok.sh", "KWOKNodeClass", "karpenter.kwok.sh/instance-cpu"),
    ("example.com", "CustomNodeClass", "example.com/rack-kind"),
])
def test_a_requirement_on_a_label_the_provider_sets_is_taken(group, kind, key):
    """The provider's well-known labels (and any key of a provider the program does not know)
    are requirements Karpenter takes; the NodePool passes the pinned CRD."""
    config = bad(auto_change=lambda a: a["nodeClassRef"].update(group=group, kind=kind),
                 requirements=[{"key": key, "operator": "Exists"}])
    pool = run_program(config).named(NODEPOOL, "p")
    assert apiserver.manifest(pool)["spec"]["template"]["spec"]["requirements"] == [{"key": key, "operator": "Exists"}]
    assert apiserver.problems([pool]) == []


def test_a_template_label_the_provider_sets_is_taken():
    config = bad(auto_change=lambda a: a["nodeClassRef"].update(AWS_CLASS),
                 pool_change=_set("labels", {"karpenter.k8s.aws/instance-category": "g"}))
    labels = apiserver.manifest(run_program(config).named(NODEPOOL, "p"))["spec"]["template"]["metadata"]["labels"]
    assert labels["karpenter.k8s.aws/instance-category"] == "g"


def test_a_node_selector_on_a_label_the_provider_never_sets_is_refused(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["jobs"][0]["nodeSelector"] = {"karpenter.kwok.sh/instance-gpu": "1"}
    refused(tmp_path, capsys, config, [
        'kns:jobs[burst-job].pool: pool "burst" could never get a node for its pod, which asks the node selector '
        "karpenter.kwok.sh/instance-gpu=1, a label the node class's provider (karpenter.kwok.sh) never sets on its "
        "nodes: Karpenter would never create one"])


@pytest.mark.parametrize("requirement", [
    {"key": "kns.io/pool", "operator": "In", "values": ["p"]}, {"key": "team", "operator": "Exists"},
    {"key": "tier", "operator": "Lt", "values": ["5"]}, {"key": "team", "operator": "NotIn", "values": ["ops"]},
])
def test_a_requirement_the_pools_own_labels_meet_is_taken(requirement):
    config = bad(pool_change=lambda pool: pool.update(labels={"team": "ml", "tier": "3"}), requirements=[requirement])
    assert run_program(config).named(tokens.NODE_POOL, "p") is not None


@pytest.mark.parametrize("selector", [{"karpenter.sh/capacity-type": "spot"}, {"kubernetes.io/arch": "amd64"},
                                      {"karpenter.kwok.sh/instance-family": "c"}, {"team": "ml"},
                                      {"topology.kubernetes.io/zone": "zone-a"}, {"karpenter.sh/nodepool": "burst"}])
def test_a_node_selector_some_node_of_the_pool_matches_is_taken(selector):
    config = copy.deepcopy(CONFIG)
    config["jobs"][0]["nodeSelector"] = selector
    assert run_program(config).named(tokens.NODE_POOL, "burst") is not None


def test_the_provider_labels_documented_are_the_ones_the_program_takes():
    text = (pathlib.Path(__file__).parent.parent / "docs" / "autoscaling.md").read_text()
    section = text.split("### Labels each provider sets", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for group, labels in re.findall(r"^\| `([a-z0-9.]+)` \| (.+) \|$", section, re.M):
        documented[group] = tuple(f"{group}/{name}" for name in re.findall(r"`([^`]+)`", labels))
    assert documented == rules.PROVIDER_LABELS
