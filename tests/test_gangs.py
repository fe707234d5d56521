"""Every limit a gang meets, checked for all its workers at once (issue 49;
docs/distributed.md, "Limits a gang meets"; plan/fits.py): the pool (static: nodes x GPUs
per node and workers a node holds whole; DRA devices of the kind claimed), required
topology at the node level, an autoscaled pool's limits, the entry's own quota and
LimitRange after overrides; queued and not. Each refusal names the limit and its numbers
at its path, through the program and `./kns validate` alike with nothing registered;
`./kns explain` lists each limit with its headroom. Beyond gangs, the
same limits for every kind of workload, in one message per limit, said once."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from config import rules
from kns_cli.explain import explain, render_text
from kns_testing.doors import both, project, stack_text
from plan import fits
from plan.stackplan import plan_stack

A100 = {"name": "g8", "role": "gpu", "nodes": ["g8-1", "g8-2", "g8-3", "g8-4"], "gpu": {"vendor": "nvidia", "perNode": 8},
        "topology": {"levels": ["example.com/rack", "kubernetes.io/hostname"]}}
DRA = {"name": "mig", "role": "gpu", "nodes": ["m-1", "m-2"],
       "gpu": {"vendor": "nvidia", "perNode": 2, "allocation": "dra", "driver": "gpu.nvidia.com",
               "partitions": [{"profile": "1g.10gb", "perGpu": 7}]}}
BURST = {"name": "wide", "role": "compute",
         "autoscale": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                       "limits": {"cpu": "256", "memory": "1Ti"}}}
GPU_BURST = {"name": "agpu", "role": "gpu", "gpu": {"vendor": "nvidia", "perNode": 8},
             "autoscale": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                           "limits": {"cpu": "1000", "nvidia.com/gpu": "16"}}}
QUEUE = {"name": "gangs", "quota": {"g8": {"cpu": "1024", "memory": "8Ti", "nvidia.com/gpu": "128", "pods": "64"}}}


def entry(name: str, **fields) -> dict:
    return {"name": name, "user": "ann", "image": "busybox:1.37", "cpu": 1, "memory": "1Gi", **fields}


def lines_for(tmp_path, capsys, *jobs: dict) -> list[str]:
    def change(config):
        config["nodePools"] = [*config["nodePools"], copy.deepcopy(A100), copy.deepcopy(DRA), copy.deepcopy(BURST),
                               copy.deepcopy(GPU_BURST)]
        config["queues"] = [*config["queues"], copy.deepcopy(QUEUE)]
        config["jobs"] = [*config["jobs"], *(j for j in jobs if "schedule" not in j)]
        config["schedules"] = [*config["schedules"], *(j for j in jobs if "schedule" in j)]
        config["cluster"] = {**config["cluster"], "kubernetesVersion": "1.34"}
    return both(capsys, project(tmp_path, stack_text(change)))


def primed(name: str, **fields) -> dict:
    """A prescaled schedule (warmUpMinutes): its primed pods are held warm together."""
    return entry(name, schedule="30 2 * * *", timeZone="Europe/Paris", warmUpMinutes=10, **fields)


CASES = {
    "static pool, queued": (
        entry("train", cpu=8, memory="32Gi", gpus=8, pool="g8", workers=8, queue="gangs"),
        "kns:jobs[train].workers: 8 workers x 8 nvidia.com/gpu need 64 nvidia.com/gpu at once; pool \"g8\" has 32 "
        "(4 nodes x 8); at most 4 of the 8 workers at once: the gang never starts whole"),
    "static pool, not queued": (
        entry("train", cpu=8, memory="32Gi", gpus=8, pool="g8", workers=5),
        "kns:jobs[train].workers: 5 workers x 8 nvidia.com/gpu need 40 nvidia.com/gpu at once; pool \"g8\" has 32 "
        "(4 nodes x 8); at most 4 of the 5 workers at once: the gang never starts whole"),
    "static pool, a node holds fewer than its GPUs suggest": (
        entry("train", gpus=5, pool="g8", workers=5, queue="gangs"),
        "kns:jobs[train].workers: 5 workers x 5 nvidia.com/gpu need 25 nvidia.com/gpu at once; pool \"g8\" has 32 "
        "(4 nodes x 8); a node holds 1 worker; at most 4 of the 5 workers at once: the gang never starts whole"),
    "DRA partitions": (
        entry("slices", gpu={"count": 4, "partition": "1g.10gb"}, pool="mig", workers=8),
        "kns:jobs[slices].workers: 8 workers x 4 gpu.nvidia.com/1g.10gb need 32 gpu.nvidia.com/1g.10gb at once; "
        "pool \"mig\" has 28 (2 nodes x 14); a node holds 3 workers; at most 6 of the 8 workers at once: the gang "
        "never starts whole"),
    "topology at the node level": (
        entry("close", gpus=8, pool="g8", workers=4, queue="gangs", topology={"level": "kubernetes.io/hostname"}),
        "kns:jobs[close].topology: 4 workers x 8 nvidia.com/gpu need 32 nvidia.com/gpu at once; topology "
        "kubernetes.io/hostname puts all on one node, which has 8; at most 1 of the 4 workers at once: the gang "
        "never starts whole"),
    "autoscaled pool, cpu": (
        entry("many", cpu=8, memory="8Gi", pool="wide", workers=36),
        "kns:jobs[many].workers: 36 workers x 8 cpu need 288 cpu at once; pool \"wide\" may grow to 256 "
        "(autoscale.limits.cpu); at most 32 of the 36 workers at once: the gang never starts whole"),
    "autoscaled pool, GPUs": (
        entry("gpus", gpus=8, pool="agpu", workers=3),
        "kns:jobs[gpus].workers: 3 workers x 8 nvidia.com/gpu need 24 nvidia.com/gpu at once; pool \"agpu\" may grow "
        "to 16 (autoscale.limits.nvidia.com/gpu); at most 2 of the 3 workers at once: the gang never starts whole"),
    "entry quota, pods": (
        entry("q", pool="wide", workers=4, quota={"pods": "2"}),
        "kns:jobs[q].quota.pods: 4 workers need 4 pods at once; quota pods is 2; at most 2 of the 4 workers at "
        "once: the gang never starts whole"),
    "entry quota, services": (
        entry("q", pool="wide", workers=4, quota={"services": "0"}),
        "kns:jobs[q].quota.services: the workers' headless Service needs 1 service; quota services is 0: the gang "
        "never starts whole"),
    "entry quota, cpu": (
        entry("q", cpu=2, pool="wide", workers=4, queue=None, quota={"requests.cpu": "3"}),
        "kns:jobs[q].quota.requests.cpu: 4 workers x 2 requests.cpu need 8 requests.cpu at once; quota "
        "requests.cpu is 3; at most 1 of the 4 workers at once: the gang never starts whole"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_gang_over_one_limit_is_refused_at_its_place_through_both_doors(tmp_path, capsys, case):
    job, expected = CASES[case]
    job = {k: v for k, v in job.items() if v is not None}
    assert lines_for(tmp_path, capsys, job) == [expected]


def test_the_same_gangs_within_their_limits_are_accepted(tmp_path, capsys):
    jobs = [entry("train", cpu=8, memory="32Gi", gpus=8, pool="g8", workers=4, queue="gangs"),
            entry("packed", gpus=4, pool="g8", workers=8),
            entry("close", gpus=4, pool="g8", workers=2, queue="gangs", topology={"level": "kubernetes.io/hostname"}),
            entry("slices", gpu={"count": 4, "partition": "1g.10gb"}, pool="mig", workers=6),
            entry("many", cpu=8, memory="8Gi", pool="wide", workers=32),
            entry("q", cpu=2, pool="wide", workers=4, quota={"pods": "4", "requests.cpu": "8"})]
    assert lines_for(tmp_path, capsys, *jobs) == []


def test_every_limit_a_gang_breaks_is_reported_at_once(tmp_path, capsys):
    job = entry("big", cpu=8, memory="8Gi", gpus=8, pool="g8", workers=8, quota={"pods": "2", "services": "0"})
    found = lines_for(tmp_path, capsys, job)
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in found] == [
        "kns:jobs[big].workers", "kns:jobs[big].quota.pods", "kns:jobs[big].quota.services"]


def test_a_limit_range_override_under_a_worker_s_container_is_refused(tmp_path, capsys):
    job = entry("lr", cpu=2, pool="wide", workers=2, limitRange={"max": {"cpu": "1"}})
    assert lines_for(tmp_path, capsys, job) == [
        'kns:jobs[lr].limitRange.max.cpu: container "lr" limits 2, LimitRange max 1: the API server refuses each '
        "worker's pod"]


def test_explain_lists_each_limit_of_a_gang_with_its_headroom(tmp_path, capsys):
    from kns_cli.stack import load_stack
    job = entry("train", cpu=8, memory="32Gi", gpus=8, pool="g8", workers=3, queue="gangs")

    def change(config):
        config["nodePools"] = [*config["nodePools"], copy.deepcopy(A100)]
        config["queues"] = [*config["queues"], copy.deepcopy(QUEUE)]
        config["jobs"] = [*config["jobs"], job]
    root = project(tmp_path, stack_text(change))
    cfg, plans = load_stack(root, "case")
    facts = explain(plan_stack(cfg, plans), ["train"])
    limits = {(item["limit"], item["resource"]): item for item in facts["entries"][0]["workers"]["limits"]}
    assert limits[("pool", "nvidia.com/gpu")] | {} == {
        "limit": "pool", "resource": "nvidia.com/gpu", "needed": "24", "held": "32", "headroom": "8",
        "detail": 'pool "g8" has 32 (4 nodes x 8)'}
    assert limits[("queue", "nvidia.com/gpu")]["held"] == "128" and limits[("queue", "nvidia.com/gpu")]["headroom"] == "104"
    assert limits[("quota", "pods")]["needed"] == "3" and limits[("quota", "services")]["held"] == "1"
    text = render_text(facts)
    assert "limits the gang meets (all 3 workers at once):" in text
    assert any(line.split() == ["pool", "nvidia.com/gpu", "24", "32", "8"] for line in text.splitlines())


def test_a_prescaled_distributed_schedule_is_checked_for_its_warm_up(tmp_path, capsys):
    """The warm-up of a prescaled gang is the gang itself, fired early and held by its wait
    (docs/prescaling.md): the same limits hold, reported at the schedule."""
    def change(config):
        config["nodePools"] = [*config["nodePools"], copy.deepcopy(A100)]
        config["schedules"] = [*config["schedules"], {
            "name": "nightly-gang", "user": "ann", "image": "busybox:1.37", "cpu": 1, "memory": "1Gi", "gpus": 8,
            "pool": "g8", "workers": 6, "schedule": "30 2 * * *", "timeZone": "Europe/Paris", "warmUpMinutes": 10}]
    lines = both(capsys, project(tmp_path, stack_text(change)))
    assert lines == ["kns:schedules[nightly-gang].workers: 6 workers x 8 nvidia.com/gpu need 48 nvidia.com/gpu at "
                     "once; pool \"g8\" has 32 (4 nodes x 8); at most 4 of the 6 workers at once: the gang never "
                     "starts whole"]


# ---- beyond gangs: every kind of workload against the same limits (plan/fits.py) ----------


def test_each_limit_says_the_same_whatever_the_kind_of_workload(tmp_path, capsys):
    """The quota's `pods` for a gang, a prescaled schedule's primed pods and a job's one pod:
    one form per limit, each kind naming its pods and what becomes of it."""
    found = lines_for(tmp_path, capsys,
                      entry("gang", pool="wide", workers=4, quota={"pods": "2"}),
                      entry("one", pool="wide", quota={"pods": "0"}),
                      entry("many", pool="wide", parallelism=4, quota={"pods": "0"}),
                      primed("warm", pool="wide", parallelism=4, quota={"pods": "2"}))
    assert found == [
        "kns:jobs[gang].quota.pods: 4 workers need 4 pods at once; quota pods is 2; at most 2 of the 4 workers at "
        f"once: {rules.GANG_NEVER_WHOLE.message}",
        f"kns:jobs[one].quota.pods: its pod needs 1 pod; quota pods is 0: {rules.NEVER_RUNS.message}",
        f"kns:jobs[many].quota.pods: each of its pods needs 1 pod; quota pods is 0: {rules.NEVER_RUNS.message}",
        "kns:schedules[warm].quota.pods: 4 primed pods need 4 pods at once; quota pods is 2; at most 2 of the 4 "
        f"primed pods at once: {rules.WARM_UP_NEVER_WHOLE.message}"]


def test_a_limit_under_one_pod_is_said_once_where_the_pod_check_says_it(tmp_path, capsys):
    """One primed pod over the pool's Karpenter limits is plan/nodepools.py's (at `pool`);
    the run's pods together over them, each fitting alone, are the warm-up's (at
    `parallelism`): each said once. A prescaled schedule whose one pod is over its quota
    never runs at all."""
    found = lines_for(tmp_path, capsys,
                      primed("huge", cpu=300, memory="8Gi", pool="wide", parallelism=2),
                      primed("wide-run", cpu=100, memory="8Gi", pool="wide", parallelism=3),
                      primed("tight", cpu=2, pool="wide", parallelism=2, quota={"requests.cpu": "1"}))
    assert [line.split(": ")[0] for line in found] == [
        "kns:schedules[huge].pool", "kns:schedules[wide-run].parallelism", "kns:schedules[tight].quota.requests.cpu"]
    assert found[1].endswith('pool "wide" may grow to 256 (autoscale.limits.cpu); at most 2 of the 3 primed pods at '
                             f"once: {rules.WARM_UP_NEVER_WHOLE.message}")
    assert found[2] == ("kns:schedules[tight].quota.requests.cpu: 2 primed pods x 2 requests.cpu need 4 requests.cpu at "
                        "once; quota requests.cpu is 1; at most 0 of the 2 primed pods at once: "
                        f"{rules.NEVER_RUNS.message}")


def test_the_pods_each_kind_holds_at_once_and_the_field_it_is_said_at():
    """A gang's workers and a prescaled run's primed pods at once (at `workers`,
    `parallelism`); any other pod on its own; a required topology every pod of a run, as
    Kueue places the run whole."""
    from config.loader import check_config
    from kns_testing.program import ROOT, dev_stack_config
    from plan.planner import plan_all

    config = dev_stack_config()
    config["nodePools"] = [*config["nodePools"], copy.deepcopy(A100), copy.deepcopy(BURST)]
    config["queues"] = [*config["queues"], copy.deepcopy(QUEUE)]
    config["jobs"] = [*config["jobs"], entry("gang", pool="wide", workers=3), entry("one", pool="wide"),
                      entry("many", pool="wide", parallelism=5, completions=3),
                      entry("close", gpus=2, pool="g8", parallelism=6, queue="gangs",
                            topology={"level": "kubernetes.io/hostname"})]
    config["schedules"] = [*config["schedules"], primed("warm", pool="wide", parallelism=4)]
    checked = check_config(config, project_dir=ROOT, environ={})
    assert checked.problems.items == []
    cfg = checked.clean()
    plans, _ = plan_all(cfg)
    by_name = {p.entry.name: p for p in plans}
    assert {name: fits.kind_of(by_name[name]).together for name in ("gang", "one", "many", "close", "warm")} == {
        "gang": 3, "one": 1, "many": 1, "close": 1, "warm": 4}
    autoscaled = {name: [(l.pods, l.at) for l in fits.limits(cfg, by_name[name]) if l.limit == "autoscale limits"]
                  for name in ("gang", "one", "warm")}
    assert autoscaled == {"gang": [(3, "workers"), (3, "workers")], "one": [(1, "parallelism"), (1, "parallelism")],
                          "warm": [(4, "parallelism"), (4, "parallelism")]}
    topology = [l for l in fits.limits(cfg, by_name["close"]) if l.limit == "topology"]
    assert [(l.pods, l.needed, l.held, l.at_once) for l in topology] == [(6, 12, 8, 4)]
    assert fits.message(topology[0], fits.kind_of(by_name["close"])) == (
        "6 pods x 2 nvidia.com/gpu need 12 nvidia.com/gpu at once; topology kubernetes.io/hostname puts all on one "
        f"node, which has 8; at most 4 of the 6 pods at once: {rules.NEVER_RUNS.message}")


def test_a_site_s_entry_asking_topology_is_refused_and_a_single_cluster_s_is_not():
    """Kueue admits a Job that asks topology only on a flavor naming a Topology: on a
    MultiKueue site the manager admits on its one flavor, which names none."""
    from config.loader import check_config
    from plan.planner import plan_all
    from kns_testing.program import ROOT
    from kns_testing.sites import SECRETS, site

    config = site(jobs=[{"name": "close", "image": "busybox:1.36", "cpu": "1", "memory": "1Gi", "queue": "research",
                         "pool": "west-cpu", "workers": 2, "topology": {"level": "example.com/rack"}}])
    config["workers"][1]["nodePools"][1]["topology"] = {"levels": ["example.com/rack", "kubernetes.io/hostname"]}
    config["queues"][0]["quota"]["west-cpu"] = {"cpu": "8", "memory": "32Gi"}
    checked = check_config(config, project_dir=ROOT, secret_keys=frozenset(SECRETS), environ={})
    assert checked.problems.items == []
    cfg = checked.clean()
    plans, _ = plan_all(cfg)
    assert [(p.path, p.message) for p in fits.fit_problems(cfg, plans)] == [(
        "kns:jobs[close].topology",
        'queue "research" admits on the manager\'s one flavor "kns-multikueue" (a MultiKueue site), which names no '
        f"Topology: {rules.TOPOLOGY_NEEDS_TOPOLOGY_FLAVOR.message}")]
    assert fits.topology_problem(dataclasses.replace(cfg, workers=[]), plans[0]) is None
