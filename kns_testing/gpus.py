"""The worked example of docs/gpus.md as stack config."""

from __future__ import annotations

from typing import Any

import yaml

from kns_testing.program import ROOT


def doc_example() -> dict[str, Any]:
    """The worked example of docs/gpus.md, as stack config (its cluster rendered to files:
    there is no cluster to reach)."""
    text = (ROOT / "docs" / "gpus.md").read_text()
    example = text[text.index("## Example"):]
    stack = yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0])["config"]
    config = {k.split(":", 1)[1]: v for k, v in stack.items()}
    config["cluster"] = {"name": "kns-test", "renderDir": "out", "kubernetesVersion": "1.36"}
    return config
