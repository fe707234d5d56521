"""A cluster that does not answer is said before an engine runs (kns_cli/reach.py): a
preview of it would show every object as to create, and the update after it would fail."""

from __future__ import annotations

import socket

import yaml

from config.loader import check_config
from kns_cli import reach
from kns_testing.doors import write_project
from kns_testing.fake_pulumi import Fake, split_config, stack_calls
from kns_testing.program import ROOT
from kns_testing.sites import site


def kubeconfig(path, server: str) -> str:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def closed_port() -> int:
    """A port nothing listens on: one the system just gave and took back."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def checked(config: dict):
    result = check_config(config, project_dir=ROOT, environ={}, secret_keys=frozenset({"credentials", "workers"}))
    assert result.problems.items == [], result.problems.items
    return result.config


def test_each_cluster_that_does_not_answer_is_named_with_its_server(tmp_path):
    port = closed_port()
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up = listening.getsockname()[1]
        config = site(cluster={"name": "site", "kubeconfig": kubeconfig(tmp_path / "m.yaml", f"https://127.0.0.1:{up}")})
        config["workers"][0]["kubeconfig"] = kubeconfig(tmp_path / "east.yaml", f"https://127.0.0.1:{port}")
        config["workers"][1]["kubeconfig"] = kubeconfig(tmp_path / "west.yaml", f"https://127.0.0.1:{up}")
        del config["workers"][1]["context"]
        lines = reach.unanswered(checked(config), tmp_path, {})
    assert lines == [f"worker east (https://127.0.0.1:{port}) did not answer (Connection refused): the engine cannot "
                     "read what it holds, so its objects show as to create, and an update fails on them"]


def test_a_rendered_stack_reaches_no_cluster_and_is_not_probed(tmp_path):
    config = site(cluster={"name": "site", "renderDir": str(tmp_path / "out")})
    assert reach.unanswered(checked(config), tmp_path, {}) == []


def test_make_preview_says_it_before_the_engine_runs(tmp_path, capsys):
    fake = Fake(tmp_path)
    port = closed_port()
    config = split_config(cluster={"name": "kns-dev", "kubeconfig": kubeconfig(tmp_path / "k.yaml",
                                                                              f"https://127.0.0.1:{port}")})
    write_project(fake.project, config, "dev")
    code, out, calls = fake.run(capsys, "preview")
    warning = f"kns: warning: cluster kns-dev (https://127.0.0.1:{port}) did not answer (Connection refused)"
    assert any(line.startswith(warning) for line in fake.err.splitlines()), fake.err
    assert calls and stack_calls(fake)  # a warning: the preview still runs
