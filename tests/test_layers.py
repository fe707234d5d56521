"""The import rules of the layers (docs/architecture.md), read from the source with `ast`.

Every import counts, at the top of a module or inside a function, so a later change cannot
quietly make config/ or plan/ need Pulumi, or the `kns` command need the components.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Package (or directory) -> the top-level modules its code may not import. A name that
# ends in "*" also forbids every module starting with it (pulumi, pulumi_kubernetes, ...).
FORBIDDEN = {
    # Time on the bottom floor: the standard library and tzdata only.
    "chrono": ("pulumi*", "config", "plan", "components", "kns_cli", "kns_testing", "tests", "tools", "bench", "policy",
               "matplotlib"),
    "config": ("pulumi*", "plan", "components", "kns_cli", "kns_testing", "tests", "tools", "bench", "policy",
               "matplotlib"),
    "plan": ("pulumi*", "components", "kns_cli", "kns_testing", "tests", "tools", "bench", "policy", "matplotlib"),
    "components": ("kns_cli", "kns_testing", "tests", "tools", "bench", "policy", "matplotlib"),
    "kns_cli": ("pulumi*", "components", "kns_testing", "tests", "tools", "bench", "policy"),
    "bench": ("tests",),
    # Shared test code is read by tests/ and bench/, never the other way round.
    "kns_testing": ("tests",),
}


def imported(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in `path`, relative ones resolved."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                module = ".".join(p for p in (base, node.module) if p)
                names = [module] if node.module else [f"{module}.{a.name}" if module else a.name for a in node.names]
            else:
                names = [node.module or ""]
            out += [(node.lineno, name) for name in names]
    return out


def _forbids(rule: str, top: str) -> bool:
    return top.startswith(rule[:-1]) if rule.endswith("*") else top == rule


def violations(root: Path) -> list[str]:
    """`file:line: layer imports module` for every import that breaks `FORBIDDEN`."""
    out = []
    for layer, rules in FORBIDDEN.items():
        for path in sorted((root / layer).rglob("*.py")):
            for line, module in imported(path, root):
                top = module.split(".")[0]
                if any(_forbids(rule, top) for rule in rules):
                    out.append(f"{path.relative_to(root)}:{line}: {layer} imports {module}")
    return out


def test_the_layers_keep_their_import_rules():
    assert violations(ROOT) == []


def test_every_layer_is_there():
    for layer in FORBIDDEN:
        assert list((ROOT / layer).glob("*.py")), f"{layer}/ has no module: is FORBIDDEN out of date?"


def test_a_broken_rule_is_reported(tmp_path):
    files = {
        "config/reader.py": "import os\nimport pulumi\n",
        "config/deep.py": "def f():\n    from pulumi.runtime import config\n",
        "config/up.py": "from .. import plan\nfrom . import names\n",
        "plan/planner.py": "from config import loader\nfrom components.workload import KnsWorkload\n",
        "plan/sub/x.py": "from ...components import cluster\n",
        "plan/k8s.py": "import pulumi_kubernetes as k8s\n",
        "plan/chart.py": "def f():\n    import matplotlib.pyplot as plt\n",
        "components/ok.py": "import pulumi\nfrom plan import model\nfrom config import names\n",
        "kns_cli/stack.py": "from components import wait\nfrom plan.model import WorkloadPlan\n",
        "bench/b.py": "from tests.test_e2e import Cluster\nfrom kns_testing.cluster import Cluster\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert violations(tmp_path) == [
        "config/deep.py:2: config imports pulumi.runtime",
        "config/reader.py:2: config imports pulumi",
        "config/up.py:1: config imports plan",
        "plan/chart.py:2: plan imports matplotlib.pyplot",
        "plan/k8s.py:1: plan imports pulumi_kubernetes",
        "plan/planner.py:2: plan imports components.workload",
        "plan/sub/x.py:1: plan imports components",
        "kns_cli/stack.py:1: kns_cli imports components",
        "bench/b.py:1: bench imports tests.test_e2e",
    ]
