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
from plan.planner import plan_checked
from tests import test_budgets, test_gpus, test_reservations
from tests.test_bad_input import both, problem_at, project
from tests.test_multicluster import EAST_KUBECONFIG, site

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
    budgets = {k.split(":", 1)[1]: v for k, v in test_budgets.doc_blocks()[0].items()}
    reserved = test_reservations.doc_example()[0]
    for config in (budgets, reserved):
        config["cluster"] = {"name": "hpc", "renderDir": "out"}
    return {"site": site(), "budgets": budgets, "reservations": reserved, "gpus": test_gpus.doc_example()}


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
