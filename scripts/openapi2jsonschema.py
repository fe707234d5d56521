#!/usr/bin/env python3
"""Kubernetes' OpenAPI v2 document (swagger.json) -> kubeconform's standalone-strict schemas.

    scripts/openapi2jsonschema.py SWAGGER_JSON OUTPUT_DIR

Writes one JSON Schema (draft-04) per group/version/kind into OUTPUT_DIR, named the way
kubeconform's `{{.ResourceKind}}{{.KindSuffix}}.json` template looks them up:
`<kind>-<version>.json` for the core group, `<kind>-<first label of the group>-<version>.json`
otherwise (deployment-apps-v1.json, role-rbac-v1.json). scripts/linters.sh runs it.

A port of the conversion behind kubeconform's schema registry (yannh/kubernetes-json-schema,
made with instrumenta/openapi2jsonschema `--kubernetes --expanded --stand-alone --strict`;
kubeconform's module ships scripts/openapi2jsonschema.py, which converts CRDs only, not
swagger.json, and needs PyYAML). Standard library only. The same rules:
  - IntOrString accepts a string or an integer, Quantity a string or a number;
  - `additionalProperties: false` on the root and on every object schema that has
    `properties` and no `additionalProperties` of its own (strict: unknown fields fail);
  - `kind` and `apiVersion` are enums of the one kind and group/version of the file;
  - every `$ref` is inlined (stand-alone). Where upstream gives up (the recursive
    JSONSchemaProps of CustomResourceDefinition), a recursive reference stays a local
    `#/definitions/<name>` reference of the same file, so those kinds are checked too.
Differences, none of which changes what is accepted except the last: descriptions are
dropped (they only make the files ~10x larger), a definition listing several kinds
(DeleteOptions, WatchEvent) gets one file per kind, and null is not accepted for optional
top-level fields (upstream accepts it there only, a side effect of the order it works in).
"""

from __future__ import annotations

import copy
import json
import os
import sys
from typing import Any

DRAFT = "http://json-schema.org/draft-04/schema#"
REF_PREFIX = "#/definitions/"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def schema_children(schema: dict[str, Any]):
    """(container, key) of every subschema of `schema` (not of property *names*)."""
    for key in ("items", "additionalProperties", "not", "additionalItems"):
        if isinstance(schema.get(key), dict):
            yield schema, key
    if isinstance(schema.get("items"), list):
        yield from ((schema["items"], i) for i in range(len(schema["items"])))
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            yield from ((schema[key], i) for i in range(len(schema[key])))
    for key in ("properties", "patternProperties", "definitions"):
        if isinstance(schema.get(key), dict):
            yield from ((schema[key], name) for name in schema[key])


def prepare(schema: Any) -> Any:
    """One definition, made strict and without descriptions (in place)."""
    if not isinstance(schema, dict):
        return schema
    schema.pop("description", None)
    if schema.get("format") == "int-or-string":
        schema.clear()
        schema["oneOf"] = [{"type": "string"}, {"type": "integer"}]
        return schema
    if "properties" in schema and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    for container, key in schema_children(schema):
        prepare(container[key])
    return schema


def definitions_of(swagger: dict[str, Any]) -> dict[str, Any]:
    definitions = copy.deepcopy(swagger["definitions"])
    definitions[INT_OR_STRING] = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    # The API server reads a number as a quantity too (cpu: 2), as every tool does.
    definitions[QUANTITY] = {"oneOf": [{"type": "string"}, {"type": "number"}]}
    for schema in definitions.values():
        prepare(schema)
    return definitions


class Inliner:
    """Inlines `$ref`s; a reference back into a definition being inlined stays a local one."""

    def __init__(self, definitions: dict[str, Any]):
        self.definitions = definitions
        self.recursive: set[str] = set()

    def target(self, ref: str) -> str:
        if not ref.startswith(REF_PREFIX) or ref[len(REF_PREFIX):] not in self.definitions:
            raise SystemExit(f"openapi2jsonschema: unresolvable $ref {ref!r}")
        return ref[len(REF_PREFIX):]

    def inline(self, schema: Any, path: tuple[str, ...]) -> Any:
        if not isinstance(schema, dict):
            return schema
        if "$ref" in schema:  # draft-04: the keywords beside a $ref do not count
            name = self.target(schema["$ref"])
            if name in path:
                self.recursive.add(name)
                return {"$ref": REF_PREFIX + name}
            return self.inline(self.definitions[name], (*path, name))
        out = dict(schema)
        for key, value in schema.items():
            if key in ("properties", "patternProperties", "definitions") and isinstance(value, dict):
                out[key] = {name: self.inline(sub, path) for name, sub in value.items()}
            elif key in ("items", "additionalProperties", "not", "additionalItems") and isinstance(value, dict):
                out[key] = self.inline(value, path)
            elif key in ("items", "allOf", "anyOf", "oneOf") and isinstance(value, list):
                out[key] = [self.inline(sub, path) for sub in value]
        return out

    def standalone(self, name: str) -> dict[str, Any]:
        self.recursive = set()
        schema = self.inline(self.definitions[name], (name,))
        local: dict[str, Any] = {}
        pending = sorted(self.recursive)
        while pending:
            other = pending.pop()
            if other in local:
                continue
            before = set(self.recursive)
            local[other] = self.inline(self.definitions[other], (other,))
            pending += sorted(self.recursive - before - set(local))
        if local:
            schema["definitions"] = local
        return schema


def file_name(gvk: dict[str, str]) -> str:
    group = gvk["group"].split(".")[0].lower()
    return "-".join(p for p in (gvk["kind"].lower(), group, gvk["version"].lower()) if p) + ".json"


def convert(swagger: dict[str, Any], output: str) -> int:
    definitions = definitions_of(swagger)
    inliner = Inliner(definitions)
    written: dict[str, str] = {}
    for name in sorted(definitions):
        gvks = swagger["definitions"][name].get("x-kubernetes-group-version-kind") or []
        if not gvks:
            continue
        base = inliner.standalone(name)
        for gvk in gvks:
            target = file_name(gvk)
            if target in written:
                raise SystemExit(f"openapi2jsonschema: {name} and {written[target]} both map to {target}")
            written[target] = name
            schema = {"$schema": DRAFT, **copy.deepcopy(base)}
            schema.setdefault("type", "object")
            schema["additionalProperties"] = False
            properties = schema.get("properties", {})
            if "kind" in properties:
                properties["kind"]["enum"] = [gvk["kind"]]
            if "apiVersion" in properties:
                group_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                properties["apiVersion"]["enum"] = [group_version]
            with open(os.path.join(output, target), "w") as f:
                json.dump(schema, f, separators=(",", ":"), sort_keys=True)
                f.write("\n")
    return len(written)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        swagger = json.load(f)
    if not str(swagger.get("swagger", "")).startswith("2."):
        print(f"openapi2jsonschema: {argv[1]} is not an OpenAPI v2 (swagger) document", file=sys.stderr)
        return 2
    os.makedirs(argv[2], exist_ok=True)
    count = convert(swagger, argv[2])
    print(f"openapi2jsonschema: {count} schemas written to {argv[2]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
