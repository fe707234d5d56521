"""Kueue's fair share, switched on by the program (`kns:queueing.fairSharing`, a queue's
`admissionMode: usageBased`; docs/queueing.md, "Fair share"): what the installed Kueue's
Configuration and the ClusterQueues carry, read back from what the program registers
(the recording mocks), and the bad inputs both doors refuse with their paths."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from config import rules
from kns_testing.doors import program_text, refused, validate_text
from kns_testing.kueue import program_configuration
from kns_testing.program import run_program
from plan import kueue_install

CLUSTER = {"name": "kns-fair", "renderDir": "build/manifests/fair"}
POOLS = [{"name": "a100", "role": "gpu", "nodes": ["gpu-1", "gpu-2"], "gpu": {"vendor": "nvidia", "perNode": 8}}]
CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


def stack(fair: Any = None, **queue: Any) -> dict[str, Any]:
    queueing: dict[str, Any] = {"enabled": True}
    if fair is not None:
        queueing["fairSharing"] = fair
    return {"cluster": CLUSTER, "nodePools": POOLS, "queueing": queueing,
            "queues": [{"name": "physics", "quota": {"a100": {"nvidia.com/gpu": 8}}, **queue},
                       {"name": "bio", "quota": {"a100": {"nvidia.com/gpu": 8}}}]}


def installed(config: dict[str, Any]) -> dict[str, Any]:
    return program_configuration({f"kns:{k}": v for k, v in config.items()})


def cluster_queues(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in run_program(config).resources if r.type == CQ}


def test_fair_sharing_on_with_a_stated_half_life_when_none_is_given():
    """Kueue's own half-life is 0 when left out, which orders nothing (kueue#11134): the
    program always writes one."""
    config = installed(stack({"admission": {}}, admissionMode="usageBased"))
    assert config["fairSharing"] == {}
    assert config["admissionFairSharing"] == {"usageHalfLifeTime": rules.USAGE_HALF_LIFE_DEFAULT}
    assert rules.USAGE_HALF_LIFE_DEFAULT == "168h"


def test_every_setting_given_reaches_kueue_s_configuration():
    config = installed(stack({"preemptionStrategies": ["LessThanInitialShare"],
                              "admission": {"usageHalfLife": "24h", "samplingInterval": "1m",
                                            "resourceWeights": {"nvidia.com/gpu": 4, "cpu": 0.5}}},
                             admissionMode="usageBased"))
    assert config["fairSharing"] == {"preemptionStrategies": ["LessThanInitialShare"]}
    assert config["admissionFairSharing"] == {"usageHalfLifeTime": "24h", "usageSamplingInterval": "1m",
                                              "resourceWeights": {"nvidia.com/gpu": 4.0, "cpu": 0.5}}
    assert set(kueue_install.OWNED_FIELDS) >= {"fairSharing", "admissionFairSharing"}


def test_without_fair_sharing_kueue_keeps_its_own_settings():
    config = installed(stack())
    assert "fairSharing" not in config and "admissionFairSharing" not in config


def test_a_usage_based_queue_orders_its_entries_by_usage_and_the_others_do_not():
    specs = cluster_queues(stack({"admission": {}}, admissionMode="usageBased", fairSharingWeight=2))
    assert specs["physics"]["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    assert specs["physics"]["fairSharing"] == {"weight": "2"}
    assert "admissionScope" not in specs["bio"]


@pytest.mark.parametrize("config,lines", [
    (stack(admissionMode="usageBased"),
     [f"kns:queues[physics].admissionMode: {rules.USAGE_BASED_NEEDS_ADMISSION.message}"]),
    (stack({"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}, admissionMode="usageBased"),
     [f"kns:queues[physics].admissionMode: {rules.USAGE_BASED_NEEDS_ADMISSION.message}"]),
    ({**stack({"admission": {}}), "queueing": {"enabled": True, "install": False, "fairSharing": {"admission": {}}}},
     [f"kns:queueing.fairSharing: {rules.FAIR_SHARING_NEEDS_INSTALL.message}"]),
    (stack({"admission": {"usageHalfLife": "0s"}}),
     [f'kns:queueing.fairSharing.admission.usageHalfLife: "0s" is not {rules.USAGE_HALF_LIFE.message}']),
    (stack({"admission": {"samplingInterval": "5 minutes"}}),
     [f'kns:queueing.fairSharing.admission.samplingInterval: "5 minutes" is not '
      f"{rules.USAGE_SAMPLING_INTERVAL.message}"]),
], ids=["usage based without admission", "fair sharing without admission", "not installed", "half-life 0",
        "interval not a duration"])
def test_bad_fair_sharing_is_refused_by_both_doors_with_its_path(tmp_path, capsys, config, lines):
    refused(tmp_path, capsys, config, lines)


@pytest.mark.parametrize("fair,where", [
    ({"preemptionStrategies": ["Greedy"]}, "kns:queueing.fairSharing.preemptionStrategies"),
    ({"admission": {"resourceWeights": {"nvidia.com/gpu": -1}}},
     "kns:queueing.fairSharing.admission.resourceWeights"),
    ({"admission": {"resourceWeights": {"not a resource!": 1}}},
     "kns:queueing.fairSharing.admission.resourceWeights"),
    ({"admision": {}}, "kns:queueing.fairSharing"),
], ids=["unknown strategy", "negative weight", "bad resource", "misspelt key"])
def test_malformed_fair_sharing_names_its_path(tmp_path, capsys, fair, where):
    text = program_text(stack(fair))
    assert f"  - {where}" in text and text.count("\n  - ") == 1, text
    assert validate_text(tmp_path, stack(fair), capsys) == text


def test_the_documented_example_is_what_the_program_installs():
    """docs/queueing.md's "Fair share" example: its config, and the Configuration fields shown."""
    from kns_testing.program import ROOT
    text = (ROOT / "docs" / "queueing.md").read_text()
    section = text.split("## Fair share", 1)[1]
    given, rendered = (yaml.safe_load(block) for block in section.split("```yaml\n")[1:3]
                       for block in [block.split("```", 1)[0]])
    config = {key.removeprefix("kns:"): value for key, value in given["config"].items()}
    full = {**stack(), **config, "cluster": CLUSTER, "nodePools": POOLS}
    installed_config = installed(full)
    assert {key: installed_config[key] for key in rendered} == rendered


def test_with_a_kueue_of_the_site_s_own_a_usage_based_queue_is_the_site_s_to_configure():
    """install: false: the program does not write Kueue's Configuration, so it cannot know
    whether admission fair sharing is on there; the queue still asks for it."""
    config = stack(admissionMode="usageBased")
    config["queueing"] = {"enabled": True, "install": False}
    assert cluster_queues(config)["physics"]["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
