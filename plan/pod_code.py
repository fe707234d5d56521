"""The code of the platform's own pods (the reservation switch, the budget counters), as a
ConfigMap they mount: their script and the modules it imports, as they are in this
source tree, and the zones it computes in from the pinned tz database (the image's own is
never read: its containers set PYTHONTZPATH empty). Pure."""

from __future__ import annotations

import ast
import base64
import functools
import sys
from importlib import resources
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent.parent
CODE_DIR = "/kns"
IMAGE = "python:3.11.13-slim-bookworm"


def _key(path: str) -> str:
    """A ConfigMap key for a file path (keys cannot hold "/")."""
    return path.replace("/", ".")


def _module_path(name: str) -> str | None:
    """The source path of project module `name` ("chrono.calendar"), None when it is no
    module of this tree (a package's own `__init__` is shipped empty, so never counted)."""
    path = name.replace(".", "/") + ".py"
    return path if (SOURCE / path).is_file() else None


def _imports(path: str) -> set[str]:
    """The project modules `path` imports, at any depth of its code; an import of anything
    else than the standard library or a project module is refused (the pod's image has
    only the standard library)."""
    package = path.split("/")[:-1]
    found: set[str] = set()

    def project(name: str, what: str) -> None:
        module = _module_path(name)
        if module:
            found.add(module)
        elif (SOURCE / name.replace(".", "/")).is_dir():
            raise ValueError(f"{path} imports {what} from the package {name}, whose __init__ the pod does not carry")
        elif name.split(".")[0] not in sys.stdlib_module_names:
            raise ValueError(f"{path} imports {name}, which the pod's image (the standard library only) does not have")

    for node in ast.walk(ast.parse((SOURCE / path).read_text(), path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                project(alias.name, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else node.module or ""
            if base == "__future__":
                continue
            for alias in node.names:
                if _module_path(f"{base}.{alias.name}"):
                    found.add(_module_path(f"{base}.{alias.name}"))
                else:
                    project(base, alias.name)
    return found


def imported_modules(script_source: str) -> tuple[str, ...]:
    """Every project module `script_source` needs, followed through their own imports: what
    its pod must carry, so an import added to a shared module is shipped with it."""
    seen: set[str] = set()
    todo = [script_source]
    while todo:
        for module in _imports(todo.pop()) - seen:
            seen.add(module)
            todo.append(module)
    return tuple(sorted(seen - {script_source}))


@functools.lru_cache(maxsize=64)
def code_files(script: str, script_source: str,
               zones: tuple[str, ...]) -> tuple[dict[str, str], dict[str, bytes], list[dict[str, str]]]:
    """ConfigMap data, binary data and the items that lay them out under CODE_DIR: the
    script (from `script_source`) as `script`, every project module it imports (source
    paths such as "chrono/calendar.py") with its packages' `__init__.py` made empty, and
    `zones`."""
    modules = imported_modules(script_source)
    text: dict[str, str] = {script: (SOURCE / script_source).read_text()}
    paths = {script: script}
    packages: set[str] = set()
    for module in modules:
        text[_key(module)] = (SOURCE / module).read_text()
        paths[_key(module)] = module
        parts = module.split("/")[:-1]
        packages.update("/".join(parts[:depth]) + "/__init__.py" for depth in range(1, len(parts) + 1))
    for package in sorted(packages - set(modules)):
        text[_key(package)] = ""
        paths[_key(package)] = package
    text["tzdata.__init__.py"] = ""
    text["tzdata.zoneinfo.__init__.py"] = ""
    text["tzdata.zones"] = "".join(f"{z}\n" for z in zones)
    paths.update({"tzdata.__init__.py": "tzdata/__init__.py", "tzdata.zoneinfo.__init__.py": "tzdata/zoneinfo/__init__.py",
                  "tzdata.zones": "tzdata/zones"})
    binary: dict[str, bytes] = {}
    zone_packages = set()
    for zone in zones:
        parts = zone.split("/")
        binary["tzdata.zoneinfo." + ".".join(parts)] = resources.files("tzdata.zoneinfo").joinpath(*parts).read_bytes()
        paths["tzdata.zoneinfo." + ".".join(parts)] = "tzdata/zoneinfo/" + "/".join(parts)
        for depth in range(1, len(parts)):
            zone_packages.add("tzdata/zoneinfo/" + "/".join(parts[:depth]) + "/__init__.py")
    for package in sorted(zone_packages):
        text[_key(package)] = ""
        paths[_key(package)] = package
    items = [{"key": key, "path": paths[key]} for key in [*text, *binary]]
    return text, binary, items


def config_map(metadata: dict[str, Any], files: tuple[dict[str, str], dict[str, bytes], list[dict[str, str]]]
               ) -> dict[str, Any]:
    text, binary, _ = files
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": dict(text), "binaryData": {k: base64.b64encode(v).decode() for k, v in binary.items()}}


def volume(config_map_name: str, files: tuple[dict[str, str], dict[str, bytes], list[dict[str, str]]]
           ) -> dict[str, Any]:
    """The pod's volume of that ConfigMap, laid out (a copy: the cached items are shared)."""
    return {"name": "code", "configMap": {"name": config_map_name, "items": [dict(i) for i in files[2]]}}


MOUNT = {"name": "code", "mountPath": CODE_DIR, "readOnly": True}
# Zones from the files the ConfigMap carries, never the image's.
NO_IMAGE_ZONES = {"name": "PYTHONTZPATH", "value": ""}
