"""Autoscaled node pools (Karpenter, docs/autoscaling.md): a stack holding each kind, and
hypothesis strategies of a pool."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from config import names, rules


KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}


AWS_CLASS = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}


CONFIG: dict[str, Any] = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [
        {"name": "static", "role": "compute", "nodes": ["n1", "n2"]},
        {"name": "burst", "role": "compute", "labels": {"team": "ml"},
         "taints": [{"key": "kns.io/burst", "effect": "NoSchedule"}],
         "autoscale": {"nodeClassRef": KWOK_CLASS,
                       "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                        {"key": "karpenter.sh/capacity-type", "operator": "In",
                                         "values": ["on-demand", "spot"], "minValues": 1}],
                       "limits": {"cpu": 64, "memory": 262144}, "consolidation": "WhenEmpty",
                       "consolidateAfter": "45s", "expireAfter": "Never", "weight": 10}},
        {"name": "h100", "role": "gpu", "vcluster": True, "gpu": {"vendor": "nvidia", "perNode": 4},
         "autoscale": {"nodeClassRef": AWS_CLASS, "limits": {"nvidia.com/gpu": 16}}},
        {"name": "kwok-gpu", "role": "gpu", "gpu": {"vendor": "amd", "perNode": 2},
         "autoscale": {"nodeClassRef": KWOK_CLASS}},
    ],
    "jobs": [
        {"name": "burst-job", "user": "bob", "image": "busybox:1.37", "cpu": 4, "memory": 2048, "pool": "burst"},
        {"name": "static-job", "user": "bob", "image": "busybox:1.37", "pool": "static"},
        {"name": "train", "user": "ann", "image": "pytorch:2", "cpu": 8, "memory": "32Gi", "gpus": 4, "pool": "h100"},
    ],
    "schedules": [
        {"name": "warm", "user": "bob", "image": "busybox:1.37", "cpu": 6, "memory": 4096, "pool": "burst",
         "schedule": "0 6 * * *", "timeZone": "Etc/UTC", "warmUpMinutes": 10},
    ],
}


_label_name = st.from_regex(r"\A[a-z][a-z0-9]{0,8}\Z")


_value = st.from_regex(r"\A[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?\Z")


_duration = st.lists(st.tuples(st.integers(0, 999), st.sampled_from("smh")), min_size=1, max_size=3).map(
    lambda parts: "".join(f"{n}{u}" for n, u in parts))


@st.composite
def requirement(draw) -> dict[str, Any]:
    operator = draw(st.sampled_from(rules.REQUIREMENT_OPERATORS))
    key = draw(st.sampled_from(["kubernetes.io/arch", "topology.kubernetes.io/zone", "karpenter.sh/capacity-type",
                                "example.com/tier"]) | _label_name)
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    if operator in rules.NUMERIC_OPERATORS:
        return {"key": key, "operator": operator, "values": [str(draw(st.integers(0, 10**6)))]}
    values = draw(st.lists(_value, min_size=1, max_size=4, unique=True))
    if key == "karpenter.sh/capacity-type":
        values = ["spot", *values]
    item = {"key": key, "operator": operator, "values": values}
    if operator == "In" and draw(st.booleans()):
        item["minValues"] = draw(st.integers(1, len(values)))
    return item


@st.composite
def autoscaled_pool(draw) -> dict[str, Any]:
    role = draw(st.sampled_from(["compute", "gpu", "vcluster", "system"]))
    gpu = ({"vendor": draw(st.sampled_from(["nvidia", "amd"])), "perNode": draw(st.integers(1, 16))}
           if role == "gpu" else None)
    auto: dict[str, Any] = {"nodeClassRef": draw(st.sampled_from([KWOK_CLASS, AWS_CLASS]))}
    if draw(st.booleans()):
        auto["requirements"] = draw(st.lists(requirement(), max_size=5))
    if draw(st.booleans()):
        # at least one node's worth: a limit no node fits under is refused (test above)
        amounts = {"cpu": st.integers(1, 4096) | st.sampled_from(["500m", "1.5", "64"]),
                   "memory": st.integers(1, 10**6) | st.sampled_from(["2Gi", "1.5Ti", "4096Mi"]),
                   "pods": st.integers(1, 4096), "nodes": st.integers(1, 100)}
        if gpu is not None:  # a GPU limit on a pool not tainted for that GPU is refused (tests/test_policy.py)
            amounts[names.gpu_resource_name(gpu["vendor"])] = st.integers(16 * gpu["perNode"], 256)
        chosen = draw(st.lists(st.sampled_from(sorted(amounts)), unique=True, max_size=3))
        auto["limits"] = {name: draw(amounts[name]) for name in chosen}
    if draw(st.booleans()):
        auto["consolidation"] = draw(st.sampled_from(["WhenEmpty", "WhenEmptyOrUnderutilized"]))
    if draw(st.booleans()):
        auto["consolidateAfter"] = draw(_duration | st.just("Never"))
    if draw(st.booleans()):
        auto["expireAfter"] = draw(_duration | st.just("Never"))
    if draw(st.booleans()):
        auto["weight"] = draw(st.integers(rules.WEIGHT_MIN, rules.WEIGHT_MAX))
    pool: dict[str, Any] = {"name": "p", "role": role, "autoscale": auto,
                            "labels": draw(st.dictionaries(_label_name, _value, max_size=3)),
                            "taints": draw(st.lists(st.fixed_dictionaries(
                                {"key": _label_name.map(lambda n: "example.com/" + n),
                                 "effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])},
                                optional={"value": _value}), max_size=2, unique_by=lambda t: (t["key"], t["effect"])))}
    if role == "gpu":
        pool["gpu"] = gpu
        pool["vcluster"] = draw(st.booleans())
    # a requirement on a key the template labels set may contradict them (refused, a test below)
    auto["requirements"] = [r for r in auto.get("requirements", []) if r["key"] not in pool["labels"]]
    return pool
