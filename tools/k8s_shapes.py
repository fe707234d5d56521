"""Kubernetes' OpenAPI document -> config/k8s_shapes.json, the shapes of a pod spec and a Job.

    python -m tools.k8s_shapes [SWAGGER_JSON]

A build tool, not part of the program. SWAGGER_JSON is `api/openapi-spec/swagger.json` of
the module `k8s.io/kubernetes@v<KUBERNETES_VERSION>` (versions.env), which
scripts/linters.sh and scripts/cluster-build.sh download through the Go module proxy; by
default it is read from the Go module cache (`swagger_path()`). The file is written to
config/k8s_shapes.json; tests/test_pod_classes.py checks that the committed file is what
this writes, whenever the module is in the cache.

config/podspec.py reads the file to check a raw `podSpec`, and every Job as finally built
after `jsonOverrides`, before anything else reads them (docs/validation.md). The file keeps
what a shape check needs of every definition reachable from PodSpec and batch/v1 Job, and
nothing else (no descriptions):

- `properties`: field -> type, where a type is `"string"`, `"integer"`, `"number"`,
  `"boolean"`, `"object"` (any mapping), `"quantity"` (a string or a number),
  `"int-or-string"`, `"@<Definition>"`, `[<type>]` (a list of it) or `{"*": <type>}` (a
  mapping of names to it);
- `required`: the fields the API server requires;
- `listMapKeys`: field -> the keys that identify an item of a list of type `map` (the
  API server and server-side apply refuse two items with the same keys).

Definitions are named by the last part of their OpenAPI name (PodSpec, Container); the
tool refuses to write the file if two reachable definitions share that name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "config" / "k8s_shapes.json"
ROOTS = {"PodSpec": "io.k8s.api.core.v1.PodSpec", "Job": "io.k8s.api.batch.v1.Job"}
SPECIAL = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
}
PRIMITIVES = {"string", "integer", "number", "boolean"}


def kubernetes_version() -> str:
    """KUBERNETES_VERSION of versions.env."""
    for line in (ROOT / "versions.env").read_text(encoding="utf-8").splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            return line.split("=", 1)[1].strip()
    raise ValueError("versions.env has no KUBERNETES_VERSION")


def swagger_path(version: str) -> Path:
    """Where the Go module cache keeps the OpenAPI document of Kubernetes `version`."""
    cache = os.environ.get("GOMODCACHE")
    if not cache:
        try:
            cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                                   check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            cache = ""
    cache = cache or str(Path(os.environ.get("GOPATH") or Path.home() / "go") / "pkg" / "mod")
    return Path(cache) / "k8s.io" / f"kubernetes@v{version}" / "api" / "openapi-spec" / "swagger.json"


def _ref(schema: dict[str, Any]) -> str:
    return schema["$ref"].rsplit("/", 1)[-1]


def _type(schema: dict[str, Any], definitions: dict[str, Any], todo: list[str]) -> Any:
    """The compact type of one property schema; referenced definitions join `todo`."""
    if "$ref" in schema:
        full = _ref(schema)
        if full in SPECIAL:
            return SPECIAL[full]
        target = definitions[full]
        if "properties" not in target:
            # Time, MicroTime (strings), FieldsV1, RawExtension (free-form objects)
            kind = target.get("type", "object")
            return kind if kind in PRIMITIVES else "object"
        todo.append(full)
        return "@" + full.rsplit(".", 1)[-1]
    kind = schema.get("type")
    if kind == "array":
        return [_type(schema["items"], definitions, todo)]
    if kind == "object":
        inner = schema.get("additionalProperties")
        return {"*": _type(inner, definitions, todo)} if isinstance(inner, dict) else "object"
    if kind in PRIMITIVES:
        return kind
    raise ValueError(f"unknown property schema {schema!r}")


def shapes(swagger: dict[str, Any]) -> dict[str, Any]:
    """The shapes of every definition reachable from ROOTS."""
    definitions = swagger["definitions"]
    todo = list(ROOTS.values())
    out: dict[str, Any] = {}
    full_names: dict[str, str] = {}
    while todo:
        full = todo.pop()
        short = full.rsplit(".", 1)[-1]
        if short in full_names:
            if full_names[short] != full:
                raise ValueError(f"two definitions are named {short}: {full_names[short]} and {full}")
            continue
        full_names[short] = full
        schema = definitions[full]
        item: dict[str, Any] = {"properties": {}}
        keys: dict[str, list[str]] = {}
        for name, prop in sorted(schema.get("properties", {}).items()):
            item["properties"][name] = _type(prop, definitions, todo)
            if prop.get("x-kubernetes-list-type") == "map" and prop.get("x-kubernetes-list-map-keys"):
                keys[name] = list(prop["x-kubernetes-list-map-keys"])
        if schema.get("required"):
            item["required"] = sorted(schema["required"])
        if keys:
            item["listMapKeys"] = keys
        out[short] = item
    return {
        "roots": {name: full.rsplit(".", 1)[-1] for name, full in ROOTS.items()},
        "definitions": dict(sorted(out.items())),
    }


def render(swagger: dict[str, Any], version: str) -> str:
    document = {"kubernetes": version, **shapes(swagger)}
    return json.dumps(document, indent=1, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    version = kubernetes_version()
    path = Path(argv[0]) if argv else swagger_path(version)
    if not path.is_file():
        print(f"no {path}: download k8s.io/kubernetes@v{version} (scripts/linters.sh does) or name the file",
              file=sys.stderr)
        return 1
    swagger = json.loads(path.read_text(encoding="utf-8"))
    OUTPUT.write_text(render(swagger, version), encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)} (Kubernetes {version})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
