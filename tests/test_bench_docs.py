"""The benchmark numbers the docs quote are the results file's (issue 44): docs/benchmarks.md
section 13 and docs/cli.md's table of `./kns up` costs are made from
bench/results/targeted_up.json, the committed results of bench/targeted_up.py."""

from __future__ import annotations

import importlib
import json
import sys

from kns_testing.program import ROOT

RESULTS = ROOT / "bench" / "results" / "targeted_up.json"


def bench_module(name: str):
    """The benchmark module bench/<name>.py."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "bench"))


def results(path):
    payload = json.loads(path.read_text())
    assert payload["status"] == "complete"
    return payload


def bench(name: str):
    """The benchmark module bench/<name>.py and its committed results."""
    return bench_module(name), results(ROOT / "bench" / "results" / f"{name}.json")


def doc_section(heading: str, until: str) -> str:
    """docs/benchmarks.md from `heading` to the next `until` (a heading's start)."""
    return (ROOT / "docs" / "benchmarks.md").read_text().split(heading)[1].split(until)[0]


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]


def targeted_up():
    return bench("targeted_up")[0]


def test_section_13_shows_the_committed_results():
    payload = json.loads(RESULTS.read_text())
    assert payload["status"] == "complete"
    rows = targeted_up().doc_rows(payload)
    section = doc_section("## 13.", "\n## ")
    shown = [line for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert shown == rows
    # like with like: both arms ran the same command and changed the same objects
    for result in payload["results"]:
        for step in ("add", "change", "remove"):
            pairs = [[run for run in result["runs"] if run["round"] == r and run["step"] == step]
                     for r in range(payload["rounds"])]
            assert all(len(pair) == 2 and pair[0]["changes"] == pair[1]["changes"] for pair in pairs), step
            assert {pair[0]["arm"] for pair in pairs} == {"targeted", "baseline"}  # the first arm alternates
        assert all(run["said"][0].startswith("kns up:") for run in result["runs"])


def test_cli_md_quotes_the_same_medians():
    payload = json.loads(RESULTS.read_text())
    text = (ROOT / "docs" / "cli.md").read_text()
    for result in payload["results"]:
        low, high = result["spread"]["all"]
        row = (f"| {result['entries']:,} | {result['entry_stacks']} | {result['median_ratio']['all']:.2f} | "
               f"{low:.2f} to {high:.2f} |")
        assert row in text, row


def test_section_14_shows_the_committed_full_up_results():
    """docs/benchmarks.md section 14 is bench/results/full_up.json, and that run proved what
    the section says of it: a no-change run started no engine, one changed entry only its
    entry stack's."""
    full_up, payload = bench("full_up")
    section = doc_section("## 14.", "\n## ").split("\n### ")[0]
    assert table_rows(section) == full_up.doc_rows(payload)
    for result in payload["results"]:
        split = result["entry stacks"]
        assert not any(ran for _, ran in split["no_change_reports"].values())
        changed = sorted(name for name, (_, ran) in split["one_changed_reports"].items() if ran)
        assert changed == [split["one_changed_stack"]]
        assert all(ran for _, ran in split["fresh_reports"].values())


def test_the_sdk_costs_table_shows_the_committed_program_end_results():
    """docs/benchmarks.md section 14, "The SDK's costs", is bench/results/program_end.json,
    whose arms ran the same command, planned the same steps and took turns going first."""
    program_end, payload = bench("program_end")
    section = doc_section("### The SDK's costs", "\n### ")
    assert table_rows(section) == program_end.doc_rows(payload)
    for result in payload["results"]:
        assert {run["steps"] for run in result["runs"]} == {result["steps"]}
        rounds = [[run["arm"] for run in result["runs"] if run["round"] == r] for r in range(payload["rounds"])]
        assert all(sorted(arms) == sorted(program_end.ARMS) for arms in rounds)
        assert len({arms[0] for arms in rounds}) == min(payload["rounds"], len(program_end.ARMS))


def test_the_engine_version_table_shows_the_committed_engine_version_results():
    """docs/benchmarks.md section 14, "A newer engine", is bench/results/engine_version.json:
    both engines ran the same commands on the same stacks, did the same steps and took turns
    going first."""
    engine_version, payload = bench("engine_version")
    section = doc_section("### A newer engine", "\n## ")
    assert table_rows(section) == engine_version.doc_rows(payload)
    assert len(payload["arms"]) == 2 and payload["arms"][0] != payload["arms"][1]
    for result in payload["results"]:
        for command in ("preview", "up"):
            assert {run[command]["steps"] for run in result["runs"]} == {result["steps"][command]}
        rounds = [[run["arm"] for run in result["runs"] if run["round"] == r] for r in range(payload["rounds"])]
        assert all(sorted(arms) == sorted(payload["arms"]) for arms in rounds)
        assert len({arms[0] for arms in rounds}) == min(payload["rounds"], 2)


def test_the_cold_builds_table_shows_the_committed_cold_builds_results():
    """docs/benchmarks.md section 15 is made of bench/results/cold_builds*.json: per round,
    one run of each arrangement of the same builds."""
    cold_builds = bench_module("cold_builds")
    section = doc_section("## 15. Cold builds", "\n## ")
    rows = []
    for path in sorted((ROOT / "bench" / "results").glob("cold_builds*.json")):
        payload = results(path)
        assert path.stem == cold_builds.results_name(payload["only"])
        for round_ in range(payload["rounds"]):
            assert sorted(run["arm"] for run in payload["runs"] if run["round"] == round_) == sorted(cold_builds.ARMS)
        rows += cold_builds.doc_rows(payload)
    assert rows and table_rows(section) == rows


def test_the_job_file_reading_table_shows_the_committed_yaml_read_results():
    """docs/benchmarks.md section 14, "Reading the job files", is bench/results/yaml_read.json,
    one measurement per size of both parsers in turn."""
    yaml_read, payload = bench("yaml_read")
    section = doc_section("### Reading the job files", "\n### ")
    assert table_rows(section) == yaml_read.doc_rows(payload)
    for result in payload["results"]:
        assert set(result["load"]) == set(result["check"]) == set(yaml_read.PARSERS)


def test_the_host_about_table_shows_the_committed_host_about_results():
    """docs/benchmarks.md, "The language host's About", is bench/results/host_about.json:
    every round ran both hosts."""
    host_about, payload = bench("host_about")
    section = doc_section("### The language host's About", "\n### ")
    assert table_rows(section) == host_about.doc_rows(payload)
    result = payload["result"]
    assert all(len(result[arm]["runs"]) == result["rounds"] for arm in ("earlier host", "this host"))


def test_section_16_shows_the_committed_budget_count_and_the_target_holds():
    """docs/benchmarks.md section 16 (bench/budget_count.py): its row is the results file's,
    both arms alternated, and the count costs at most twice the listing."""
    module, payload = bench("budget_count")
    section = doc_section("## 16.", "\n## ")
    assert table_rows(section) == module.doc_rows(payload)
    assert payload["workloads"] == 10000 and payload["median"]["ratio"] <= 2
    firsts = [run["order"][0] for run in payload["runs"]]
    assert set(firsts) == {"counter", "kubectl"} and all(a != b for a, b in zip(firsts, firsts[1:]))
