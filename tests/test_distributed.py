"""Distributed entries (contract section 12, docs/distributed.md) under Pulumi mocks: what
`workers`, `topology` and `kns:queueing.waitForPodsReady` produce, read through the objects
the program registers, and every bad input a path-qualified config error through both the
program and `./kns validate`, nothing registered."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from config import rules
from kns_cli import explain
from kns_testing import apiserver
from kns_testing.doors import expected_text, program_text, refused, validate_text
from kns_testing.program import ROOT, run_program
from plan.stackplan import plan_stack

JOB = "kubernetes:batch/v1:Job"
CRON = "kubernetes:batch/v1:CronJob"
SERVICE = "kubernetes:core/v1:Service"
LEVELS = ["example.com/block", "example.com/rack", "kubernetes.io/hostname"]
CONFIG: dict[str, Any] = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [
        {"name": "a100", "role": "gpu", "gpu": {"vendor": "nvidia", "perNode": 8},
         "nodes": ["g1", "g2", "g3", "g4", "g5"], "topology": {"levels": LEVELS}},
        {"name": "cpu", "role": "compute", "nodes": ["c1"]},
    ],
    "queueing": {"enabled": True, "install": True, "waitForPodsReady": "5m"},
    "queues": [{"name": "research", "quota": {"a100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 40},
                                              "cpu": {"cpu": 8, "memory": "16Gi"}}}],
    "jobs": [
        {"name": "train", "user": "ann", "image": "pytorch:2", "cpu": 8, "memory": "64Gi", "gpus": 8, "pool": "a100",
         "workers": 4, "queue": "research", "topology": {"level": "example.com/rack"},
         "env": {"NCCL_DEBUG": "INFO"}},
        {"name": "loose", "user": "bob", "image": "busybox:1.37", "cpu": 1, "memory": 256, "pool": "cpu", "workers": 3,
         "leaderPort": 23456, "restartWorkers": "individually", "backoffLimit": 2},
        {"name": "single", "user": "bob", "image": "busybox:1.37", "cpu": 1, "memory": 256, "pool": "cpu"},
    ],
    "schedules": [
        {"name": "nightly", "user": "ann", "image": "pytorch:2", "cpu": 8, "memory": "64Gi", "gpus": 8,
         "pool": "a100", "workers": 2, "queue": "research", "schedule": "30 2 * * *", "warmUpMinutes": 10},
    ],
}


@pytest.fixture(scope="module")
def run():
    return run_program(CONFIG)


def job(run, name: str) -> dict[str, Any]:
    return run.named(JOB, name).inputs


def pod(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]
    return (spec["jobTemplate"]["spec"] if "jobTemplate" in spec else spec)["template"]


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


def test_every_object_passes_the_api_servers_rules(run):
    assert apiserver.problems(run.resources) == []


def test_n_workers_are_one_indexed_job_of_n_completions_run_at_once(run):
    spec = job(run, "train")["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    single = job(run, "single")["spec"]
    assert "completionMode" not in single and "parallelism" not in single


def test_a_headless_service_named_after_the_entry_selects_the_workers_and_names_them(run):
    service = run.named(SERVICE, "train-workers").inputs
    metadata = service["metadata"]
    assert (metadata["name"], metadata["namespace"]) == ("train", "kns-train")
    assert metadata["labels"] == {"kns.io/job": "train", "kns.io/owner": "ann", "kns.io/cluster": "kns-test",
                                  "app.kubernetes.io/managed-by": "pulumi"}
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    template = pod(job(run, "train"))
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert template["spec"]["subdomain"] == "train"
    assert sorted(r.name for r in run.of_type(SERVICE) if r.name.endswith("-workers")) == [
        "loose-workers", "nightly-workers", "train-workers"]  # none for `single`


def test_every_worker_is_told_the_workers_its_index_and_the_leader_before_its_own_env(run):
    container = pod(job(run, "train"))["spec"]["containers"][0]
    index = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert env(container) == {
        "KNS_JOB_NAME": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}},
        "KNS_WORKERS": "4", "KNS_WORKER_INDEX": index, "KNS_LEADER": "$(KNS_JOB_NAME)-0.train.kns-train.svc",
        "WORLD_SIZE": "4", "RANK": index, "MASTER_ADDR": "$(KNS_LEADER)", "MASTER_PORT": str(rules.LEADER_PORT_DEFAULT),
        "NCCL_DEBUG": "INFO"}
    assert [e["name"] for e in container["env"]][-1] == "NCCL_DEBUG"  # may refer to the program's
    assert env(pod(job(run, "loose"))["spec"]["containers"][0])["MASTER_PORT"] == "23456"


def test_the_quota_holds_all_workers_and_the_service_and_the_runner_may_read_the_endpoints(run):
    hard = run.named("kubernetes:core/v1:ResourceQuota", "train-quota").inputs["spec"]["hard"]
    assert (hard["pods"], hard["services"], hard["requests.nvidia.com/gpu"], hard["limits.cpu"]) == ("4", "1", "32", "32")
    limits = run.named("kubernetes:core/v1:LimitRange", "train-defaults").inputs["spec"]["limits"][0]
    assert limits["max"] == {"cpu": "8", "memory": "64Gi"}  # per container: per worker
    rules_ = run.named("kubernetes:rbac.authorization.k8s.io/v1:Role", "train-runner").inputs["rules"]
    assert {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"]} in rules_
    assert any("endpoints" in r["resources"] for r in rules_)


def test_a_failed_worker_fails_the_job_unless_workers_restart_individually(run):
    assert job(run, "train")["spec"]["backoffLimit"] == 0
    loose = job(run, "loose")["spec"]
    assert loose["backoffLimitPerIndex"] == 2 and "backoffLimit" not in loose


def test_queued_workers_are_one_suspended_job_whose_pods_kueue_admits_together(run):
    manifest = job(run, "train")
    assert manifest["spec"]["suspend"] is True and manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert manifest["spec"]["parallelism"] == 4  # Kueue's Job integration: one pod set of 4


def test_wait_for_pods_ready_configures_the_installed_kueue_and_rolls_its_controller(run):
    config_map = next(r for r in run.resources if r.type == "kubernetes:core/v1:ConfigMap"
                      and r.inputs["metadata"]["name"] == "kueue-manager-config")
    config = yaml.safe_load(config_map.inputs["data"]["controller_manager_config.yaml"])
    assert config["waitForPodsReady"] == {"timeout": "5m"}
    deployment = next(r for r in run.resources if r.type == "kubernetes:apps/v1:Deployment"
                      and r.inputs["metadata"]["namespace"] == "kueue-system")
    assert "kns.io/kueue-config" in deployment.inputs["spec"]["template"]["metadata"]["annotations"]


def test_a_test_s_kueue_process_runs_the_settings_the_program_renders(monkeypatch, tmp_path):
    """The e2e Kueue (kns_testing/kueue.py) gets waitForPodsReady from the program's own
    rendering of kns:queueing, not from a value the test passes: here a stack with
    install false (the process is the Kueue) renders 5m, and only the owned fields go in."""
    from types import SimpleNamespace

    from kns_testing import kueue as kueue_testing
    calls = []
    monkeypatch.setattr(kueue_testing, "build_kueue", lambda: "bin")
    monkeypatch.setattr(kueue_testing, "script", lambda *args, **_: calls.append(args))
    stack = {f"kns:{key}": value for key, value in CONFIG.items()}
    stack["kns:queueing"] = {"enabled": True, "install": False, "waitForPodsReady": "7m"}
    rendered = kueue_testing.program_configuration(stack)
    assert rendered["waitForPodsReady"] == {"timeout": "7m"} and "integrations" in rendered
    kueue_testing.start_kueue(SimpleNamespace(state=tmp_path), configuration=rendered)
    ((name, *args),) = calls
    assert name == "kueue-process.sh" and args[:3] == [str(tmp_path), "--frameworks", "batch/job"]
    extra = yaml.safe_load(open(args[args.index("--config-extra") + 1]).read())
    assert extra == {"waitForPodsReady": {"timeout": "7m"}}
    calls.clear()
    kueue_testing.start_kueue(SimpleNamespace(state=tmp_path), configuration={"integrations": {}})
    assert "--config-extra" not in calls[0]


def test_a_pool_topology_is_a_kueue_topology_its_flavor_names_and_the_entry_asks_a_level(run):
    topology = run.named("kubernetes:kueue.x-k8s.io/v1beta2:Topology", "topology-a100").inputs
    assert topology["spec"]["levels"] == [{"nodeLabel": level} for level in LEVELS]
    flavor = run.named("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "resourceflavor-a100").inputs
    assert flavor["spec"]["topologyName"] == "a100"
    assert run.named("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "resourceflavor-cpu").inputs["spec"].get(
        "topologyName") is None
    annotations = pod(job(run, "train"))["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == "example.com/rack"
    preferred = copy.deepcopy(CONFIG)
    preferred["jobs"][0]["topology"]["mode"] = "preferred"
    annotations = pod(run_program(preferred).named(JOB, "train").inputs)["metadata"]["annotations"]
    assert annotations == {"kueue.x-k8s.io/podset-preferred-topology": "example.com/rack"}


def test_a_prescaled_distributed_schedule_holds_every_worker_at_the_wait(run):
    cron = run.named(CRON, "nightly").inputs
    spec = cron["spec"]["jobTemplate"]["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    template = spec["template"]["spec"]
    assert [c["name"] for c in template["initContainers"]] == ["kns-wait"]  # in every worker's pod
    assert template["subdomain"] == "nightly"
    assert run.named(SERVICE, "nightly-workers").inputs["spec"]["selector"] == {"kns.io/job": "nightly"}


def _explained(config: dict[str, Any], name: str) -> str:
    from config.loader import check_config
    from plan.planner import plan_checked
    checked = check_config(config, project_dir=ROOT, environ={})
    plans = plan_checked(checked).entries
    return explain.render_text(explain.explain(plan_stack(checked.config, plans), [name]))


def test_explain_shows_the_workers_their_totals_the_leader_and_warns_without_a_queue():
    text = _explained(CONFIG, "loose")
    assert "workers:        3 (Indexed Job, Service loose; leader loose-0.loose.kns-loose.svc:23456; each worker " \
           "retried on its own)" in text
    assert "warning: 3 workers without a queue start as they fit, not together" in text
    assert "all 3 workers      cpu=3 memory=768Mi" in text
    queued = _explained(CONFIG, "train")
    assert "without a queue" not in queued and "all 4 workers" in queued
    assert "topology:       example.com/rack (required: all workers within one example.com/rack domain)" in queued
    assert "leader <the run's Job>-0.nightly.kns-nightly.svc:29500" in _explained(CONFIG, "nightly")


# ---- bad input ----------------------------------------------------------------------------

def entry(**keys: Any) -> dict[str, Any]:
    return {"name": "w", "user": "bob", "image": "busybox:1.37", "cpu": 1, "memory": 256, "pool": "cpu",
            "workers": 2, **keys}


def with_jobs(*jobs: dict[str, Any], **changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(CONFIG)
    config["jobs"], config["schedules"] = list(jobs), []
    config.update(changes)
    return config


W = "kns:jobs[w]"
BAD = {
    "workers 0": (entry(workers=0), [f"{W}.workers: 0 is invalid: input should be greater than or equal to 1"]),
    "workers negative": (entry(workers=-2), [f"{W}.workers: -2 is invalid: input should be greater than or equal to 1"]),
    "workers over 1000": (entry(workers=1001), [f"{W}.workers: 1001 is invalid: input should be less than or equal "
                                                "to 1000"]),
    "workers a float": (entry(workers=2.5), [f"{W}.workers: 2.5 is invalid: input should be a valid integer"]),
    "workers a string": (entry(workers="4"), [f'{W}.workers: "4" is invalid: input should be a valid integer']),
    "workers with parallelism and completions": (
        entry(parallelism=2, completions=2), [f"{W}.parallelism: {rules.WORKERS_DERIVE.message}",
                                              f"{W}.completions: {rules.WORKERS_DERIVE.message}"]),
    "leaderPort on one worker": (entry(workers=1, leaderPort=80), [f"{W}.leaderPort: {rules.WORKERS_ONLY.message}"]),
    "backoffLimit with whole-Job failure": (entry(backoffLimit=3), [f"{W}.backoffLimit: {rules.WORKERS_BACKOFF.message}"]),
    "a podSpec with hostname and subdomain": (
        {"name": "w", "workers": 2, "pool": "cpu", "podSpec": {"hostname": "h", "subdomain": "s", "containers": [
            {"name": "c", "image": "busybox:1.37", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}},
        [f"{W}.podSpec.hostname: {rules.WORKERS_POD_NAMES.message}",
         f"{W}.podSpec.subdomain: {rules.WORKERS_POD_NAMES.message}"]),
    "an env name the program sets": (
        entry(env={"RANK": "0"}), [f"{W}.env.RANK: is set by the program for every worker "
                                   f"({', '.join(rules.WORKER_ENV)})"]),
    "an override of completionMode": (
        entry(jsonOverrides=[{"path": "/spec/completionMode", "value": "NonIndexed"}]),
        [f'{W}.jsonOverrides[0]: /spec/completionMode: is "Indexed", set by workers; overrides may not change it']),
    "an override of completions": (
        entry(jsonOverrides=[{"path": "/spec/completions", "value": 1}]),
        [f"{W}.jsonOverrides[0]: /spec/completions: is 2, set by workers; overrides may not change it"]),
    "an override of parallelism": (
        entry(jsonOverrides=[{"path": "/spec/parallelism", "value": 3}]),
        [f"{W}.jsonOverrides[0]: /spec/parallelism: is 2, set by workers; overrides may not change it"]),
    "an override of the subdomain": (
        entry(jsonOverrides=[{"path": "/spec/template/spec/subdomain", "value": "x"}]),
        [f'{W}.jsonOverrides[0]: /spec/template/spec/subdomain: is "w", set by workers (the Service that names the '
         'workers); overrides may not change it']),
    "an override of a worker variable": (
        entry(jsonOverrides=[{"path": "/spec/template/spec/containers/0/env/1/value", "value": "9"}]),
        [f"{W}.jsonOverrides[0]: /spec/template/spec/containers/0/env: KNS_WORKERS: set by workers for every worker; "
         "overrides may not change them"]),
    "topology without a queue": (
        entry(pool="a100", gpus=8, topology={"level": "example.com/rack"}),
        [f"{W}.topology: {rules.TOPOLOGY_NEEDS_QUEUE.message}"]),
    "topology on a pool without levels": (
        entry(queue="research", topology={"level": "example.com/rack"}),
        [f'{W}.topology: {rules.TOPOLOGY_NEEDS_POOL.message} (pool "cpu" declares none)']),
    "topology at an undeclared level": (
        entry(pool="a100", gpus=8, queue="research", topology={"level": "example.com/zone"}),
        [f'{W}.topology: "example.com/zone" is not a level of pool "a100" (levels: {", ".join(LEVELS)})']),
    "the topology annotation written by hand": (
        entry(annotations={"kueue.x-k8s.io/podset-required-topology": "example.com/rack"}),
        [f"{W}.annotations.kueue.x-k8s.io/podset-required-topology: is set by the program from topology: "
         "{level, mode}; use that"]),
    "per-worker GPUs above perNode": (
        entry(pool="a100", gpus=16, queue="research"),
        [f'{W}.gpus: 16 GPUs do not fit on one node of pool "a100" (perNode: 8)']),
}


@pytest.mark.parametrize("job_entry, lines", list(BAD.values()), ids=list(BAD))
def test_a_bad_distributed_entry_is_a_config_error_through_both_doors(tmp_path, capsys, job_entry, lines):
    refused(tmp_path, capsys, with_jobs(job_entry), lines)


def test_workers_that_can_never_fit_their_queue_are_refused(tmp_path, capsys):
    config = with_jobs(entry(pool="a100", gpus=8, cpu=8, memory="64Gi", workers=6, queue="research"))
    text = program_text(config)
    assert "kns:jobs[w]" in text and "nvidia.com/gpu" in text and "48" in text, text
    assert validate_text(tmp_path, config, capsys) == text
    assert run_program(with_jobs(entry(pool="a100", gpus=8, cpu=8, memory="64Gi", workers=5, queue="research")))


@pytest.mark.parametrize("pool, line", [
    ({"name": "p", "role": "compute", "nodes": ["n"], "topology": {"levels": ["example.com/rack"]}},
     f"kns:nodePools[p].topology.levels: {rules.TOPOLOGY_ENDS_WITH_HOST.message}"),
    ({"name": "p", "role": "compute", "nodes": ["n"],
      "topology": {"levels": ["example.com/rack", "example.com/rack", "kubernetes.io/hostname"]}},
     'kns:nodePools[p].topology.levels[1]: "example.com/rack" is already level 0'),
    ({"name": "p", "role": "compute", "nodes": ["n"], "topology": {"levels": []}},
     "kns:nodePools[p].topology.levels: [] is invalid: list should have at least 1 item after validation, not 0"),
    ({"name": "p", "role": "compute", "autoscale": {"nodeClassRef": {"group": "karpenter.kwok.sh",
                                                                       "kind": "KWOKNodeClass", "name": "d"}},
      "topology": {"levels": ["kubernetes.io/hostname"]}},
     f"kns:nodePools[p].topology: {rules.TOPOLOGY_ON_AUTOSCALED.message}"),
])
def test_a_bad_pool_topology_is_a_config_error_through_both_doors(tmp_path, capsys, pool, line):
    config = {"cluster": {"name": "kns-test", "renderDir": "out"}, "nodePools": [pool]}
    refused(tmp_path, capsys, config, [line])


@pytest.mark.parametrize("queueing, line", [
    ({"enabled": True, "install": False, "waitForPodsReady": "5m"},
     f"kns:queueing.waitForPodsReady: {rules.WAIT_NEEDS_INSTALL.message}"),
    ({"enabled": True, "waitForPodsReady": "5 minutes"},
     f'kns:queueing.waitForPodsReady: "5 minutes" is not {rules.WAIT_FOR_PODS_READY.message}'),
    ({"enabled": True, "waitForPodsReady": "0s"},
     f'kns:queueing.waitForPodsReady: "0s" is not {rules.WAIT_FOR_PODS_READY.message}'),
])
def test_a_bad_wait_for_pods_ready_is_a_config_error_through_both_doors(tmp_path, capsys, queueing, line):
    config = {"cluster": {"name": "kns-test", "renderDir": "out"}, "queueing": queueing}
    text = program_text(config)
    assert text == expected_text([line]) or line in text, text
    assert validate_text(tmp_path, config, capsys) == text


def test_a_profile_bounds_the_workers_and_each_worker_by_its_maxima(tmp_path, capsys):
    config = with_jobs(entry(workers=8, cpu=2), profiles={"*": {"maxWorkers": 4, "maxCpu": 2}})
    refused(tmp_path, capsys, config, ['kns:jobs[w].workers: 8 workers are over maxWorkers 4 of profile rule "*"'])
    fine = with_jobs(entry(workers=4, cpu=2), profiles={"*": {"maxWorkers": 4, "maxCpu": 2}})
    assert run_program(fine).named(JOB, "w").inputs["spec"]["parallelism"] == 4


def test_the_worked_example_is_what_the_program_and_explain_make():
    """docs/distributed.md: its stack config is valid, and the explain lines it shows are
    the program's."""
    page = (ROOT / "docs" / "distributed.md").read_text()
    example = page.split("## Worked example", 1)[1]
    stack = yaml.safe_load("config:\n" + example.split("```yaml\n", 1)[1].split("```", 1)[0])["config"]
    config = {key.removeprefix("kns:"): value for key, value in stack.items()}
    config["cluster"] = {"name": "kns-docs", "renderDir": "out"}
    shown = example.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    lines = _explained(config, "llm-train").splitlines()
    assert [line for line in shown if line not in lines] == []
    done = run_program(config)
    assert done.named(JOB, "llm-train").inputs["spec"]["parallelism"] == 4
    nightly = done.named(CRON, "nightly-eval").inputs
    assert nightly["metadata"]["annotations"]["kns.io/warm-up-minutes"] == "10"
    assert nightly["spec"]["jobTemplate"]["spec"]["completions"] == 2


def test_the_timeline_and_the_queues_count_the_workers(tmp_path, capsys):
    from kns_cli import cli
    from kns_testing.doors import write_project
    root = write_project(tmp_path / "project", CONFIG)
    svg = tmp_path / "t.svg"
    assert cli.main(["timeline", "--stack", "case", "--project-dir", str(root), "--start", "2026-01-01T00:00:00Z",
                     "--hours", "24", "--output", str(svg)]) == 0
    assert "\u00b7 2 workers" in svg.read_text()
    capsys.readouterr()
    assert cli.main(["queues", "--stack", "case", "--project-dir", str(root)]) == 0
    out = capsys.readouterr().out
    gpus = next(line.split() for line in out.splitlines() if line.split()[:2] == ["a100", "nvidia.com/gpu"])
    assert gpus[2:5] == ["40", "0", "48"], out  # 4 workers x 8 of train, 2 x 8 of nightly


def test_the_failing_worker_stage_is_the_one_kwok_plays_on_the_pods_it_matches():
    """kwok plays one stage of those that match a pod, at random among equal weights
    (v0.8.0, lifecycle.Match). Worker 1 of the e2e's fail-3 matches pod-fail-worker and
    pod-complete-after (it carries a run-for, as every worker of its Job): only a weight
    above all the others' makes it fail on every run, not on about half of them."""
    stages = {path.stem: yaml.safe_load(path.read_text()) for path in (ROOT / "scripts" / "kwok").glob("*.yaml")}
    fail = stages.pop("pod-fail-worker")["spec"]
    keys = {e["key"] for e in fail["selector"]["matchExpressions"]}
    assert '.metadata.annotations["kns.io/e2e-fail-worker"]' in keys
    assert fail.get("weight", 0) > 0 and "weightFrom" not in fail
    assert all(s["spec"].get("weight", 0) == 0 and "weightFrom" not in s["spec"] for s in stages.values()), stages
