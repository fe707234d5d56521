"""Bad input on the newest surfaces (sites, budgets, reservations, DRA pools) through both
doors: no input crashes either, every name that becomes a URN or a Kubernetes object is
unique across the kinds that share it, a problem that follows from another is not a line
of its own, and a setting that would do nothing is refused (docs/validation.md)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from config.errors import ConfigError
from config.loader import check_config
from kns_testing import gpus, reserving
from kns_testing.budgets import doc_blocks
from kns_testing.doors import both, problem_at, project
from kns_testing.sites import EAST_KUBECONFIG, site
from plan.planner import plan_checked

ROOT = Path(__file__).resolve().parent.parent


def site_project(tmp_path: Path, change: Callable[[dict], Any] = lambda c: None) -> Path:
    """docs/multicluster.md's shape of site as a project: east's kubeconfig a file beside
    the stack (a secret's text is not readable offline), no credentials."""
    config = site()
    config["workers"][0]["kubeconfig"] = "kubeconfigs/east.yaml"
    config.pop("credentials")
    config["jobs"][0].pop("credentials")
    change(config)
    text = yaml.safe_dump({"config": {f"kns:{k}": v for k, v in config.items()}}, sort_keys=False)
    return project(tmp_path, text, {"kubeconfigs/east.yaml": EAST_KUBECONFIG})


# ---- no input crashes either door ---------------------------------------------------------


def seeds() -> dict[str, dict]:
    budgets = {k.split(":", 1)[1]: v for k, v in doc_blocks()[0].items()}
    reserved = reserving.doc_example()[0]
    for config in (budgets, reserved):
        config["cluster"] = {"name": "hpc", "renderDir": "out"}
    return {"site": site(), "budgets": budgets, "reservations": reserved, "gpus": gpus.doc_example()}


SEEDS = seeds()
BROKEN = {"left out": None, "empty mapping": {}, "empty list": [], "text": "x", "zero": 0, "off": {"enabled": False}}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_no_section_left_out_or_of_the_wrong_shape_crashes_the_checks(seed):
    """Each section of each worked example left out, emptied or of the wrong shape: the
    checks and planning both doors run end in the config or in its problems, never in an
    exception (a site without kns:queueing was a KeyError on a worker's name)."""
    crashed = []
    for key in SEEDS[seed]:
        for how, value in BROKEN.items():
            config = copy.deepcopy(SEEDS[seed])
            if value is None:
                del config[key]
            else:
                config[key] = copy.deepcopy(value)
            try:
                plan_checked(check_config(config, project_dir=ROOT, environ={},
                                          secret_keys=frozenset({"workers", "credentials", "keycloakClientSecret"})))
            except ConfigError:
                pass
            except Exception as exc:  # noqa: BLE001 - what the test looks for
                crashed.append(f"kns:{key} {how}: {type(exc).__name__}: {exc}")
    assert crashed == []


@pytest.mark.parametrize("queueing", ["off", "left out"])
def test_a_site_without_queueing_is_one_problem_in_both_doors(tmp_path, capsys, queueing):
    def change(config):
        if queueing == "off":
            config["queueing"] = {"enabled": False}
        else:
            del config["queueing"]
    lines = both(capsys, site_project(tmp_path, change))
    assert problem_at(lines, "kns:workers").startswith("workers run the queued entries MultiKueue dispatches")


# ---- one name, one object -----------------------------------------------------------------


def test_a_worker_named_like_the_cluster_is_refused_before_an_entry_stack_meets_it(tmp_path, capsys):
    """An entry stack registers each cluster's provider at its top: `site-kubernetes` twice."""
    lines = both(capsys, site_project(tmp_path, lambda c: c["workers"][1].update(name="site")))
    assert problem_at(lines, "kns:workers[site].name").startswith(
        'its Kubernetes provider in an entry stack is named "site-kubernetes", like the Kubernetes provider in an '
        "entry stack of kns:cluster")


def test_a_namespace_two_kinds_derive_is_refused_at_the_later_one():
    """Two kinds, one Kubernetes object: an entry's `<prefix><entry>` or the system
    namespace meets a budget's `<prefix>budget-<name>`."""
    budget = SEEDS["budgets"]["budgets"][0]["name"]
    taken = f"budget-{budget}"

    def entry(config):
        config["jobs"][0]["name"] = taken

    def system(config):
        config["cluster"]["systemNamespace"] = f"kns-{taken}"

    for change, path, what in ((entry, f"kns:jobs[{taken}].name", "Namespace"),
                               (system, f"kns:budgets[{budget}].name", "Namespace")):
        config = copy.deepcopy(SEEDS["budgets"])
        change(config)
        with pytest.raises(ConfigError) as refused:
            plan_checked(check_config(config, project_dir=ROOT, environ={},
                                      secret_keys=frozenset({"credentials", "keycloakClientSecret"})))
        found = {p.path: p.message for p in refused.value.problems}
        assert list(found) == [path], found
        assert f'is named "kns-{taken}", like the' in found[path]


# ---- one mistake, one line ----------------------------------------------------------------

BROKEN_WORKERS = {
    "a name that is no DNS label": (lambda w: w.update(name="West_1"), "kns:workers[West_1]"),
    "both context and kubeconfig": (lambda w: w.update(kubeconfig="kubeconfigs/east.yaml"), "kns:workers[west]"),
    "neither context nor kubeconfig": (lambda w: w.pop("context"), "kns:workers[west]"),
    "an http apiServer": (lambda w: w.update(apiServer="http://10.2.0.1"), "kns:workers[west]"),
    "an apiServer without a host": (lambda w: w.update(apiServer="https://"), "kns:workers[west]"),
    "a misspelt nodePools": (lambda w: w.update(nodepools=w.pop("nodePools")), "kns:workers[west]"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_WORKERS))
def test_a_queue_naming_a_broken_workers_pool_points_at_the_worker(tmp_path, capsys, case):
    """The queue's quota for west-gpu follows from the worker's problem: it says so, at the
    worker's path, instead of calling the pool unknown."""
    change, at = BROKEN_WORKERS[case]
    lines = both(capsys, site_project(tmp_path, lambda c: change(c["workers"][1])))
    assert problem_at(lines, "kns:queues[research].quota.west-gpu") == (
        f'node pool "west-gpu" is invalid (its problems are listed under {at})')
    own = [line for line in lines if line.startswith(at)]
    assert len(own) == 1 and len(lines) == 2, lines


MERGED = {
    "an anchor's keys": "base: &base\n  user: bob\n  image: busybox:1.37\njobs:\n  - name: merged\n    <<: *base\n",
    "a flow mapping": "jobs:\n  - name: merged\n    user: bob\n    <<: {image: busybox:1.37}\n",
    "a schedule's": "schedules:\n  - name: merged\n    user: bob\n    image: busybox:1.37\n    <<: {schedule: '0 1 * * *'}\n",
}


@pytest.mark.parametrize("case", sorted(MERGED))
def test_a_merge_key_is_one_problem_not_also_what_it_would_have_given(tmp_path, capsys, case):
    from kns_testing.doors import job_file, stack_text, with_job_files
    lines = both(capsys, project(tmp_path, stack_text(with_job_files), job_file("merged.yaml", MERGED[case])))
    mine = [line for line in lines if "[merged]" in line]
    assert [line.split(": ", 1)[1] for line in mine] == ["uses a merge key (<<); write the keys out"], lines


def reservation_config() -> dict:
    config = copy.deepcopy(SEEDS["reservations"])
    for queue in config["queues"]:  # the page's example is refused for its queue's size first
        for quota in queue["quota"].values():
            quota["nvidia.com/gpu"] = min(int(quota.get("nvidia.com/gpu", 0)), 16)
    return config


def misspell(section: str, name: str, key: str) -> Callable[[dict], None]:
    def change(config):
        item = next(i for i in config[section] if i["name"] == name)
        item[key.upper() if len(key) < 4 else key[:-1]] = item.pop(key)
    return change


@pytest.mark.parametrize("section, name, key", [
    ("reservations", "course", "schedule"), ("reservations", "challenge", "pool"), ("reservations", "maint", "name"),
    ("schedules", "lab", "schedule"), ("jobs", "train-llm", "name"), ("jobs", "train-llm", "user"),
    ("queues", None, "name"),
])
def test_a_misspelt_key_is_one_line_and_what_names_its_item_points_at_it(section, name, key):
    """Not also "<key> is required", nor "names no entry/reservation" where the item is only
    invalid: the misspelt key's line, and at most the consequence that points at it."""
    config = reservation_config()
    name = name or config[section][0]["name"]
    misspell(section, name, key)(config)
    with pytest.raises(ConfigError) as refused:
        plan_checked(check_config(config, project_dir=ROOT, environ={},
                                  secret_keys=frozenset({"credentials", "keycloakClientSecret"})))
    found = [(p.path, p.message) for p in refused.value.problems]
    own = [(path, message) for path, message in found if path.startswith(f"kns:{section}[{name}]")]
    assert len(own) == 1 and own[0][1].startswith("unknown key; did you mean"), found
    others = [message for path, message in found if (path, message) not in own]
    assert all(f"its problems are listed under kns:{section}[{name}]" in m for m in others), found


# ---- settings that would do nothing -------------------------------------------------------


@pytest.mark.parametrize("setting, value", [("waitForPodsReady", "5m"), ("fairSharing", {}),
                                            ("multiKueue", {"workerLostTimeout": "20m"})])
@pytest.mark.parametrize("enabled", [False, None])
def test_a_kueue_setting_with_queueing_off_is_refused(tmp_path, capsys, setting, value, enabled):
    from kns_testing.doors import stack_text

    def change(config):
        for key in ("queues", "priorities", "profiles"):
            config.pop(key, None)
        for entry in config["jobs"] + config["schedules"]:
            entry.pop("queue", None)
            entry.pop("priority", None)
        config["queueing"] = {setting: value, **({"enabled": enabled} if enabled is not None else {})}
    lines = both(capsys, project(tmp_path, stack_text(change)))
    assert problem_at(lines, f"kns:queueing.{setting}") == (
        "has no effect: queueing is off (kns:queueing.enabled is false); set enabled: true, or remove it")
    assert len(lines) == 1, lines


def test_a_namespace_entry_on_a_site_is_refused(tmp_path, capsys):
    lines = both(capsys, site_project(tmp_path, lambda c: c["jobs"].append(
        {"name": "scratch", "type": "namespace", "user": "bob"})))
    assert problem_at(lines, "kns:jobs[scratch].type").startswith(
        "a namespace entry holds pods started by hand on the cluster it is on, which on a site is the manager")
    assert len(lines) == 1, lines


@pytest.mark.parametrize("server, says", [
    ("https://10.2.0.1:99999", "port is not a port number"), ("https://10.2.0.1:0", "port is 0"),
    ("https://10.2.0.1:http", "port is not a port number"), (" https://10.2.0.1:6443", "has a blank in it"),
    ("https://10.2.0.1:6443\t", "has a blank in it"), ("https://west.example .org", "has a blank in it"),
])
def test_an_api_server_no_client_could_dial_is_refused(tmp_path, capsys, server, says):
    lines = both(capsys, site_project(tmp_path, lambda c: c["workers"][1].update(apiServer=server)))
    assert says in problem_at(lines, "kns:workers[west].apiServer"), lines


def test_the_pages_example_lines_are_the_programs(tmp_path, capsys):
    """docs/validation.md's block for these classes, line by line, from the cases it shows."""
    text = (ROOT / "docs" / "validation.md").read_text()
    section = text[text.index("### One mistake, one line; sites"):]
    documented = section.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    cases = [lambda c: c["workers"][1].pop("context"),
             lambda c: c["workers"][1].update(name="site"),
             lambda c: c["jobs"].append({"name": "scratch", "type": "namespace", "user": "bob"}),
             lambda c: c["workers"][1].update(apiServer="https://10.2.0.1:99999")]
    shown = []
    for i, change in enumerate(cases):
        lines = both(capsys, site_project(tmp_path / str(i), change))
        # the queue's pointer at the broken worker is shown once, for the first
        shown += [line for line in lines if not line.startswith("kns:queues") or i == 0]
    assert shown == documented


def test_a_workers_pool_whose_name_is_misspelt_is_pointed_at_by_the_queue(tmp_path, capsys):
    def change(config):
        pool = config["workers"][1]["nodePools"][0]
        pool["nmae"] = pool.pop("name")
    lines = both(capsys, site_project(tmp_path, change))
    assert problem_at(lines, "kns:workers[west].nodePools[west-gpu].nmae") == 'unknown key; did you mean "name"?'
    assert problem_at(lines, "kns:queues[research].quota.west-gpu") == (
        'node pool "west-gpu" is invalid (its problems are listed under kns:workers[west].nodePools[west-gpu])')
