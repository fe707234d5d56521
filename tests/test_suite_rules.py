"""Rules the test suite holds itself to (issue 44), checked over tests/, bench/ and
kns_testing/ so that a weakness fixed once does not come back elsewhere:

- no assertion compares an expression with itself (it cannot fail);
- no wait of a test (tests/, kns_testing/) for a condition has a fixed number of seconds as
  its bound: bounds come from what the test
  configures and the run's pace (kns_testing/pace.py `slack`);
- no watch of the cluster outside kns_testing/watch.py, whose watches resume or fail the
  test when their stream ends (a bare `kubectl --watch` that ended would let every "this
  never happened" check pass);
- no module imports a test module: what tests share lives in kns_testing/ (issue 64).
"""

from __future__ import annotations

import ast
from pathlib import Path

from kns_testing.program import ROOT

SOURCES = sorted([*(ROOT / "tests").glob("*.py"), *(ROOT / "bench").glob("*.py"), *(ROOT / "kns_testing").glob("*.py")])


def parsed(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def self_comparisons(tree: ast.AST) -> list[str]:
    return [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(ast.dump(left) == ast.dump(right)
                    for left, right in zip([node.left, *node.comparators], node.comparators))]


def fixed_wait_bounds(tree: ast.AST) -> list[str]:
    """`x.wait(what, <bound>)` (a condition waited for; a process's `wait(timeout=)` is no
    such wait) whose bound is, or adds, a bare number."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "wait" \
                and node.args:
            bounds = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "timeout")]
            for bound in bounds:
                parts = [bound.left, bound.right] if isinstance(bound, ast.BinOp) else [bound]
                if any(isinstance(part, ast.Constant) and isinstance(part.value, (int, float)) for part in parts):
                    found.append(f"line {node.lineno}: {ast.unparse(bound)}")
    return found


def watches(path: Path) -> list[str]:
    return [f"line {number}" for number, line in enumerate(path.read_text().splitlines(), 1)
            if '"--watch"' in line or "'--watch'" in line or "watch=1" in line]


def imports_of_tests(tree: ast.AST) -> list[str]:
    """Every import of a test module (`from tests.test_x import`, `from .test_x import`,
    `from tests import test_x`, `import tests.test_x`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: {a.name}" for a in node.names if a.name.startswith("tests.test_")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith("tests.test_") or (node.level and module.startswith("test_")) or (
                    module == "tests" or (node.level and not module)) and any(
                    a.name.startswith("test_") for a in node.names):
                found.append(f"line {node.lineno}: {'.' * node.level}{module}")
    return found


def test_no_assertion_compares_an_expression_with_itself():
    found = {str(p.relative_to(ROOT)): hits for p in SOURCES if (hits := self_comparisons(parsed(p)))}
    assert found == {}
    assert self_comparisons(ast.parse("assert f(a) == f(a)")) == ["f(a) == f(a)"]
    assert self_comparisons(ast.parse("assert f(a) == [1, 2]")) == []


def test_no_e2e_wait_has_a_fixed_bound():
    found = {str(p.relative_to(ROOT)): hits for p in SOURCES
             if p.parent.name != "bench" and (hits := fixed_wait_bounds(parsed(p)))}
    assert found == {}
    assert fixed_wait_bounds(ast.parse("c.wait(f, 120)")) == ["line 1: 120"]
    assert fixed_wait_bounds(ast.parse("c.wait(f, left + 60, every=2)")) == ["line 1: left + 60"]
    assert fixed_wait_bounds(ast.parse("c.wait(f, slack(left, floor=60))")) == []
    assert fixed_wait_bounds(ast.parse("process.wait(timeout=900)")) == []


def test_the_cluster_is_watched_only_through_the_resuming_watch():
    found = {str(p.relative_to(ROOT)): hits for p in SOURCES
             if p.name not in ("watch.py", "test_suite_rules.py", "test_watch.py") and (hits := watches(p))}
    assert found == {}


def test_no_module_imports_a_test_module():
    found = {str(p.relative_to(ROOT)): hits for p in SOURCES if (hits := imports_of_tests(parsed(p)))}
    assert found == {}
    assert imports_of_tests(ast.parse("from tests.test_a import f\nfrom .test_b import g\n"
                                         "from tests import test_c\nimport tests.test_d")) == [
        "line 1: tests.test_a", "line 2: .test_b", "line 3: tests", "line 4: tests.test_d"]
    assert imports_of_tests(ast.parse("from kns_testing.doors import refused\nfrom tests.conftest import lane")) == []
