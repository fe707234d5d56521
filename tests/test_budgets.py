"""`kns:budgets` (contract section 17): the model and its checks through both doors, the
program and `./kns validate`, each problem with its path and nothing registered."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo
from typing import Any

import pytest

from config import rules
from config.loader import check_config
from kns_testing import tokens
from kns_testing.budgets import doc_blocks
from kns_testing.doors import refused
from kns_testing.program import ROOT, run_laid_out

CLUSTER = {"name": "kns-budget", "renderDir": "build/manifests/budget"}
POOLS = [{"name": "a100", "role": "gpu", "nodes": ["gpu-1"], "gpu": {"vendor": "nvidia", "perNode": 8}},
         {"name": "cpu", "role": "compute", "nodes": ["cpu-1"]}]
QUEUES = [{"name": "physics", "quota": {"a100": {"nvidia.com/gpu": 8, "cpu": 64}}},
          {"name": "bio", "quota": {"cpu": {"cpu": 32, "memory": "128Gi"}}}]
QUARTERLY = {"name": "physics-q", "queues": ["physics"], "limits": {"nvidia.com/gpu": 10000},
             "reset": "0 0 1 */3 *", "timeZone": "Europe/Paris"}


def stack(*budgets: dict[str, Any], queueing: bool = True) -> dict[str, Any]:
    return {"cluster": CLUSTER, "nodePools": POOLS, "queueing": {"enabled": queueing}, "queues": QUEUES,
            "budgets": list(budgets)}


def test_a_quarterly_budget_and_a_grant_are_read_with_their_periods():
    grant = {"name": "bio-grant", "queues": ["bio"], "limits": {"cpu": 200000, "memory": 5e5},
             "start": "2026-12-01T00:00:00+01:00", "end": "2027-06-01T00:00:00+02:00", "atLimit": "stop",
             "warnAt": [50, 90]}
    cfg = check_config(stack(QUARTERLY, grant), project_dir=ROOT, environ={}).config
    quarterly, bio = cfg.budgets
    assert (quarterly.at_limit, quarterly.warn_at) == ("hold", list(rules.BUDGET_WARN_AT_DEFAULT))
    period = quarterly.periods().at(datetime(2026, 11, 28, tzinfo=timezone.utc))
    assert (period.start.isoformat(), period.end.isoformat()) == ("2026-09-30T22:00:00+00:00",
                                                                  "2026-12-31T23:00:00+00:00")
    assert bio.at_limit == "stop" and bio.periods().at(datetime(2026, 11, 28, tzinfo=timezone.utc)) is None


@pytest.mark.parametrize("budget,lines", [
    ({**QUARTERLY, "queues": ["phyiscs"]},
     ['kns:budgets[physics-q].queues: no queue named "phyiscs"; did you mean "physics"?']),
    ({**QUARTERLY, "limits": {"memory": 10}},
     ['kns:budgets[physics-q].limits: "memory" is counted by none of its queues (cpu, nvidia.com/gpu): '
      f"{rules.BUDGET_RESOURCE_COUNTED.message}"]),
    ({**QUARTERLY, "limits": {"nvidia.com/gpu": 0}},
     ["kns:budgets[physics-q].limits.nvidia.com/gpu: 0 is invalid: input should be greater than 0"]),
    ({**QUARTERLY, "reset": "0 0 31 2 *"},
     ['kns:budgets[physics-q].reset: "0 0 31 2 *" never fires: February has no day 31; Kubernetes would accept it '
      "and never run it"]),
    ({**QUARTERLY, "timeZone": "Europe/Pari"},
     ['kns:budgets[physics-q].timeZone: "Europe/Pari" is not an IANA time zone (for example "Europe/Paris" or '
      '"Etc/UTC")']),
    ({**QUARTERLY, "start": "2026-12-01T00:00:00+01:00"},
     [f"kns:budgets[physics-q]: {rules.BUDGET_PERIOD_ONE.message}", "kns:budgets[physics-q].end: a grant needs start and end"]),
    ({key: value for key, value in QUARTERLY.items() if key not in ("reset", "timeZone")},
     [f"kns:budgets[physics-q]: {rules.BUDGET_PERIOD_ONE.message}"]),
    ({**{k: v for k, v in QUARTERLY.items() if k not in ("reset", "timeZone")}, "start": "2027-01-01T00:00:00+01:00",
      "end": "2026-12-01T00:00:00+01:00"},
     ["kns:budgets[physics-q].end: 2026-12-01T00:00:00+01:00 is not after start 2027-01-01T00:00:00+01:00"]),
    ({**{k: v for k, v in QUARTERLY.items() if k != "reset"}, "start": "2026-12-01T00:00:00+01:00",
      "end": "2027-01-01T00:00:00+01:00"},
     [f"kns:budgets[physics-q].timeZone: {rules.BUDGET_GRANT_ZONE.message}"]),
    ({**QUARTERLY, "queues": ["physics", "physics"]}, ["kns:budgets[physics-q].queues: lists physics twice"]),
], ids=["unknown queue", "resource not counted", "limit 0", "never fires", "zone", "both periods", "no period",
        "start after end", "zone of a grant", "queue twice"])
def test_a_bad_budget_is_refused_by_both_doors_with_its_path(tmp_path, capsys, budget, lines):
    refused(tmp_path, capsys, stack(budget), lines)


def test_budgets_need_queueing_and_unique_names(tmp_path, capsys):
    refused(tmp_path, capsys, {**stack(QUARTERLY, QUARTERLY), "queues": [], "queueing": {"enabled": False}},
            ["kns:budgets: " + rules.BUDGETS_NEED_QUEUEING.message,
             'kns:budgets[physics-q].queues: no queue named "physics" (queues: none)',
             'kns:budgets[physics-q].name: "physics-q" names another budget too; budget names are unique'])


# ---- what a budget becomes, under the program's own run (mocks) ------------------------------

CRON = "kubernetes:batch/v1:CronJob"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
PROGRAM_QUEUES = [{"name": "physics", "quota": {"a100": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}}},
                  {"name": "bio", "quota": {"cpu": {"cpu": 32, "memory": "128Gi"}}}]
PROGRAM = {"kns:cluster": CLUSTER, "kns:nodePools": [{**POOLS[0], "nodes": ["gpu-1", "gpu-2"]}, POOLS[1]],
           "kns:queueing": {"enabled": True}, "kns:queues": PROGRAM_QUEUES,
           "kns:reservations": [{"name": "course", "pool": "a100", "nodes": 1, "schedule": "0 9 * * 1",
                                 "duration": "2h", "entries": ["train"]}],
           "kns:budgets": [QUARTERLY, {"name": "bio-grant", "queues": ["bio"], "limits": {"cpu": 200000},
                                       "start": "2026-12-01T00:00:00+01:00", "end": "2027-06-01T00:00:00+02:00",
                                       "atLimit": "stop", "countEveryMinutes": 15}],
           "kns:jobs": [{"name": "train", "user": "ann", "image": "busybox:1.37", "gpus": 2, "cpu": 4,
                         "memory": 4096, "pool": "a100", "queue": "physics", "reservation": "course"},
                        {"name": "fold", "user": "bob", "image": "busybox:1.37", "cpu": 4, "memory": 4096,
                         "pool": "cpu", "queue": "bio"}]}


@pytest.fixture(scope="module")
def run():
    from kns_testing.program import run_program
    return run_program(PROGRAM)


def counter_specs(run) -> dict[str, dict[str, Any]]:
    import json
    return {r.metadata["namespace"]: json.loads(
        r.inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"])
        for r in run.of_type(CRON) if r.metadata["name"] == "counter"}


def test_each_budget_is_a_component_with_its_counter_told_its_budget(run):
    components = [r for r in run.resources if r.type == tokens.BUDGET]
    assert sorted(r.name for r in components) == ["budget-bio-grant", "budget-physics-q"]
    specs = counter_specs(run)
    assert set(specs) == {"kns-budget-physics-q", "kns-budget-bio-grant"}
    physics = specs["kns-budget-physics-q"]
    assert physics["queues"] == ["physics"] and physics["limits"] == {"nvidia.com/gpu": 10000}
    assert physics["period"] == {"reset": "0 0 1 */3 *", "zone": "Europe/Paris"} and physics["atLimit"] == "hold"
    # The reservation's use by the budget's entries is charged to it (docs/budgets.md).
    assert physics["reserved"] == {"kns-res-course": ["kns-train"]}
    assert specs["kns-budget-bio-grant"]["period"] == {"start": "2026-12-01T00:00:00+01:00",
                                                       "end": "2027-06-01T00:00:00+02:00"}
    schedules = {r.metadata["namespace"]: r.inputs["spec"]["schedule"] for r in run.of_type(CRON)
                 if r.metadata["name"] == "counter"}
    assert schedules == {"kns-budget-physics-q": "*/5 * * * *", "kns-budget-bio-grant": "*/15 * * * *"}


def test_the_output_budgets_says_each_period_and_its_next_reset(run):
    out = run.outputs["budgets"]
    assert out["bio-grant"]["nextReset"] is None and out["bio-grant"]["limits"] == {"cpu": 200000}
    after = datetime.fromisoformat(out["physics-q"]["nextReset"])
    assert after > datetime.now(timezone.utc) and after.astimezone(ZoneInfo("Europe/Paris")).hour == 0
    assert after.astimezone(ZoneInfo("Europe/Paris")).day == 1
    assert out["physics-q"]["queues"] == ["physics"]


def test_the_counters_rbac_names_what_it_writes(run):
    roles = {(r.metadata.get("namespace"), r.metadata["name"]): r.inputs["rules"]
             for r in [*run.of_type(ROLE), *run.of_type(CLUSTER_ROLE)] if "kns.io/budget" in r.metadata["labels"]}
    assert roles[(None, "kns-budget-physics-q")] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get", "patch"],
         "resourceNames": ["physics"]}]
    own = roles[("kns-budget-physics-q", "counter")]
    assert own == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch", "create"],
                    "resourceNames": ["ledger"]}]
    assert roles[("default", "kns-budget-physics-q")] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]


def test_the_counter_carries_its_code_and_runs_from_that_layout_alone(run, tmp_path):
    """The ConfigMap's files, laid out as the pod mounts them, import and compute in a
    Python that sees nothing of this project (isolated mode, only the layout on its path)."""
    from plan import budget_counter
    (cron,) = [r.inputs for r in run.of_type(CRON) if r.metadata["namespace"] == "kns-budget-physics-q"]
    (code,) = [r.inputs for r in run.of_type(CONFIG_MAP) if r.metadata.get("namespace") == "kns-budget-physics-q"]
    assert code["data"]["counter.py"] == open(budget_counter.__file__).read()
    probe = ("import json, os; import counter; from datetime import datetime, timezone;"
             "p = counter.budget_periods(json.loads(os.environ['KNS_BUDGET'])).at(datetime(2026, 11, 28, tzinfo=timezone.utc));"
             "import tzdata; print(p.start.isoformat(), os.path.dirname(tzdata.__file__))")
    done = run_laid_out(cron, code, tmp_path, probe)
    assert done.returncode == 0, done.stderr
    start, zones = done.stdout.split()
    assert start == "2026-09-30T22:00:00+00:00" and zones == str(tmp_path / "tzdata")


def test_the_counter_container_is_hardened(run):
    for cron in [r.inputs for r in run.of_type(CRON) if r.metadata["name"] == "counter"]:
        pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = pod["containers"]
        context = container["securityContext"]
        assert context["runAsUser"] > 0 and context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]} and context["readOnlyRootFilesystem"] is True
        assert "ephemeral-storage" in container["resources"]["limits"]


def test_an_entry_whose_job_is_gone_before_the_next_count_is_refused(tmp_path, capsys):
    job = {"name": "quick", "user": "ann", "image": "busybox:1.37", "gpus": 1, "pool": "a100", "queue": "physics",
           "ttlHours": 0.05}
    refused(tmp_path, capsys, {**stack(QUARTERLY), "queues": PROGRAM_QUEUES,
                               "jobs": [job, {**job, "name": "slow", "ttlHours": 0.1}]},
            ["kns:jobs[quick].ttlHours: 0.05 h is shorter than budget physics-q's counting interval (5 min): "
             + rules.BUDGET_TTL_COUNTED.message])


def test_a_counting_interval_that_does_not_divide_an_hour_is_refused(tmp_path, capsys):
    refused(tmp_path, capsys, stack({**QUARTERLY, "countEveryMinutes": 7}),
            ["kns:budgets[physics-q].countEveryMinutes: 7 is invalid: input should be 1, 2, 3, 4, 5, 6, 10, "
             "12, 15, 20, 30 or 60"])


# ---- docs/budgets.md's example ---------------------------------------------------------------


def test_the_pages_example_exports_what_it_shows_and_is_refused_as_it_says(monkeypatch, tmp_path, capsys):
    from chrono import clock
    from kns_testing.program import run_program
    config, documented, texts = doc_blocks()
    config["kns:cluster"] = {"name": "hpc-prod", "renderDir": "out"}  # no cluster to reach
    monkeypatch.setattr(clock, "now", lambda: datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc))
    assert run_program(config).outputs["budgets"] == documented
    plain = {k.split(":", 1)[1]: v for k, v in config.items()}
    plain["budgets"][0]["limits"] = {"amd.com/gpu": 5000}
    refused(tmp_path, capsys, plain, [line.strip()[2:] for line in texts[0].splitlines()[1:]])
    assert texts[0].splitlines()[0] == "kns-platform: invalid configuration, 1 problem; nothing was applied:"


def test_the_pages_ttl_refusal_is_the_programs():
    from kns_testing.doors import checked
    config, _, texts = doc_blocks()
    plain = {k.split(":", 1)[1]: v for k, v in config.items()}
    plain["cluster"] = {"name": "hpc-prod", "renderDir": "out"}
    plain["jobs"].append({**plain["jobs"][0], "name": "quick", "ttlHours": 0.05})
    assert checked(plain) == [texts[1].strip()]
