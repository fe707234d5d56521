"""What a platform pod's code ConfigMap carries (plan/pod_code.py): every project module its
script imports, at any depth, and nothing its image cannot import."""

from __future__ import annotations

import pytest

from plan import pod_code


def tree(tmp_path, monkeypatch, files: dict[str, str]) -> None:
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    monkeypatch.setattr(pod_code, "SOURCE", tmp_path)


def test_the_modules_a_module_imports_are_carried_whatever_the_form_of_the_import(tmp_path, monkeypatch):
    tree(tmp_path, monkeypatch, {
        "run.py": "import json\nfrom a import one\nimport b.two\n",
        "a/__init__.py": "", "a/one.py": "from . import three\nfrom .four import X\n",
        "a/three.py": "from datetime import datetime\n", "a/four.py": "X = 1\ndef f():\n    from b.five import Y\n",
        "b/__init__.py": "", "b/two.py": "", "b/five.py": "Y = 2\n", "b/unused.py": ""})
    assert pod_code.imported_modules("run.py") == ("a/four.py", "a/one.py", "a/three.py", "b/five.py", "b/two.py")
    text, _, items = pod_code.code_files("run.py", "run.py", ())
    assert {i["path"] for i in items} >= {"a/__init__.py", "b/__init__.py", "a/four.py", "b/five.py"}
    assert text["a.__init__.py"] == ""


@pytest.mark.parametrize("files, said", [
    ({"run.py": "import yaml\n"}, "run.py imports yaml, which the pod's image (the standard library only) does not have"),
    ({"run.py": "from a import helper\n", "a/__init__.py": "def helper(): pass\n"},
     "run.py imports helper from the package a, whose __init__ the pod does not carry"),
])
def test_an_import_the_pod_cannot_satisfy_is_refused_when_planned(tmp_path, monkeypatch, files, said):
    tree(tmp_path, monkeypatch, files)
    with pytest.raises(ValueError) as refused:
        pod_code.imported_modules("run.py")
    assert str(refused.value) == said
