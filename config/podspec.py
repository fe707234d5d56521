"""The pod rules: what a raw pod spec, and every pod and Job as finally built, must be.

One set of rules, checked where the input comes in and again on what the program built:

- the **shape** of Kubernetes fragments (`shape_problems`): every object, list, string,
  number and boolean where the Kubernetes schema expects one, required fields, no unknown
  field, unique keys in keyed lists. The schema is config/k8s_shapes.json, made from the
  OpenAPI document of the pinned Kubernetes by tools/k8s_shapes.py. A raw `podSpec`, the
  entry's `volumes`, `volumeMounts` and `env` `valueFrom` are checked by the models before
  anything reads them; the Job as finally built (after `jsonOverrides`) by the planner;
- the **pod rules** (`pod_problems`): at least one container, a Job's restart policy, an
  image reference on every container, resources the API server accepts (`resource_problems`),
  container and volume names, mounts of existing volumes at valid paths;
- the **names the program generates** inside a pod (`reserved_problems`): the wait init
  container of a prescaled schedule, the credentials volume and its mount. A user name
  in the same scope is refused, naming both;
- the **image reference** (`image_problem`) wherever an image is given, and the
  **extended resources** an entry names (`extra_resource_problems`, `gpu_resource_problem`).

Each rule's pattern and message is in config/rules.py. Problems are config/errors.py's
`Problem`s at a location (`loc`: keys and list indexes) relative to what was checked; the
models report them under the field's config path (`nested`), the planner as a JSON pointer
into the built Job.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from pydantic_core import PydanticCustomError

from . import names, rules
from .errors import NESTED, REQUIRED, Loc, Problem, at, closest, kind_of, without_a_value
from .quantity import QuantityError, kind_for_resource, parse, render

SHAPES: dict[str, Any] = json.loads((Path(__file__).with_name("k8s_shapes.json")).read_text(encoding="utf-8"))
DEFINITIONS: dict[str, Any] = SHAPES["definitions"]

# Names the program gives to what it adds to a pod (plan/wait.py, plan/manifests.py).
WAIT_CONTAINER = "kns-wait"
CREDENTIALS_VOLUME = "kns-credentials"

# Init containers first: what is added after them (a sidecar) is the one reported.
# (Ephemeral containers cannot be set when a pod is created.)
CONTAINER_LISTS = ("initContainers", "containers")
JOB_RESTART_POLICIES = ("Never", "OnFailure")
# Resources without a domain that a container may request (and `hugepages-<size>`).
NATIVE_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
# GPUs go through `gpus`, `gpuVendor` and `gpuResource`, which place the pod on a GPU pool.
GPU_DOMAINS = {"nvidia": "nvidia.com", "amd": "amd.com"}

_IMAGE = re.compile(rules.IMAGE.pattern)
_TAG = re.compile(rules.IMAGE_TAG.pattern)
_QUALIFIED = re.compile(rules.EXTENDED_RESOURCE.pattern)


# ---- reporting ---------------------------------------------------------------------------


def nested(found: list[Problem]) -> PydanticCustomError:
    """A validation error carrying several problems below the field it is raised for;
    config/errors.py reports each under the field's path joined with its location."""
    summary = "; ".join(f"{pointer(p.loc)}: {p.message}" for p in found)
    return PydanticCustomError(NESTED, "{summary}", {"summary": summary, "problems": list(found)})


def raise_if_any(found: list[Problem]) -> None:
    if found:
        raise nested(found)


def pointer(loc: Iterable[Union[str, int]]) -> str:
    """A location as an RFC 6901 JSON pointer (`/spec/template/spec/containers/0`)."""
    return "".join("/" + str(step).replace("~", "~0").replace("/", "~1") for step in loc)


def dotted(loc: Iterable[Union[str, int]]) -> str:
    """A location as a config path tail (`containers[0].image`)."""
    out = ""
    for step in loc:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def _wrong(expected: str, value: Any, loc: Loc = (), then: str = "") -> str:
    """`value` is not the `expected` kind of value, said by its kind, never repeated (it
    may be a secret pasted in the wrong place); a null is said as a key (or item) given
    without a value. `then`: what to write instead."""
    if value is None:
        return without_a_value(expected, item=bool(loc) and isinstance(loc[-1], int))
    return f"must be {expected}, not {kind_of(value)}{then}"


def show(value: Any) -> str:
    text = f'"{value}"' if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


# ---- images -----------------------------------------------------------------------------


def image_problem(value: Any) -> Optional[str]:
    """Why `value` is not an image reference (the Docker reference grammar), or None."""
    if not isinstance(value, str):
        return _wrong("an image reference (a string)", value)
    match = _IMAGE.match(value)
    if not match:
        return f"{show(value)} is {rules.IMAGE.message}"
    name = value.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last) + last.index(":")]
    if len(name) > rules.IMAGE.max_length:
        return f"{show(value)} is {rules.IMAGE.message}: its name is longer than {rules.IMAGE.max_length} characters"
    return None


def tag_problem(value: Any) -> Optional[str]:
    if not isinstance(value, str) or not _TAG.match(value):
        return f"{show(value)} is {rules.IMAGE_TAG.message}"
    return None


# ---- shapes -----------------------------------------------------------------------------

_PLURAL = {"string": "strings", "integer": "whole numbers", "number": "numbers", "boolean": "true or false values",
           "quantity": "quantities", "int-or-string": "whole numbers or strings"}
_WHAT = {
    "string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
    "object": "a mapping", "quantity": 'a quantity (a number, or a string like "500m" or "4Gi")',
    "int-or-string": "a whole number or a string",
}


def _is(kind: str, value: Any) -> bool:
    if isinstance(value, bool) or kind == "boolean":
        return isinstance(value, bool) and kind == "boolean"
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind in ("number", "quantity"):
        return isinstance(value, (int, float)) or (kind == "quantity" and isinstance(value, str))
    if kind == "int-or-string":
        return isinstance(value, (int, str))
    if kind == "object":
        return isinstance(value, dict)
    raise ValueError(f"unknown shape {kind}")


def shape_problems(value: Any, shape: Any, loc: Loc = ()) -> list[Problem]:
    """Where `value` does not have `shape` (a type of config/k8s_shapes.json, or the name
    of a definition with "@"): wrong types, unknown and missing fields, repeated keys.

    A message names the shape expected and what kind of value is there, never the value:
    a fragment holds env values, command lines and volume options, any of which may be a
    secret, and problem lines reach CI logs."""
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [at(loc, _wrong(expected(shape), value, loc, _as_items(value, shape)))]
        return [p for i, item in enumerate(value) for p in shape_problems(item, shape[0], loc + (i,))]
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return [at(loc, _wrong(expected(shape), value, loc))]
        found: list[Problem] = []
        for key, item in value.items():
            if not isinstance(key, str):
                found.append(at(loc + (str(key),), f"keys must be strings, not {kind_of(key)}"))
            else:
                found += shape_problems(item, shape["*"], loc + (key,))
        return found
    if shape.startswith("@"):
        return _definition_problems(value, shape[1:], loc)
    if not _is(shape, value):
        return [at(loc, _wrong(_WHAT[shape], value, loc))]
    return []


def expected(shape: Any) -> str:
    """What a value of `shape` is, in words: `a list of {name, value, valueFrom}`."""
    if isinstance(shape, list):
        item = shape[0]
        if isinstance(item, str) and item.startswith("@"):
            return f"a list of {_fields(item[1:]) or item[1:] + ' mappings'}"
        if isinstance(item, str) and item in _PLURAL:
            return f"a list of {_PLURAL[item]}"
        return "a list"
    if isinstance(shape, dict):
        return "a mapping"
    if shape.startswith("@"):
        return f"a mapping ({_fields(shape[1:]) or 'a ' + shape[1:]})"
    return _WHAT[shape]


def _fields(name: str) -> Optional[str]:
    """A definition by its fields when it has few (`{name, value, valueFrom}`)."""
    properties = list(DEFINITIONS[name]["properties"])
    return "{" + ", ".join(properties) + "}" if len(properties) <= 6 else None


def _as_items(value: Any, shape: list) -> str:
    """The way out of the two usual slips: a list of strings written as one string (a
    command line), a keyed list written as a mapping (env as {NAME: value})."""
    if isinstance(value, str) and shape[0] == "string":
        return '; write each word as an item (["sh", "-c", "..."])'
    if isinstance(value, dict) and isinstance(shape[0], str) and shape[0].startswith("@"):
        return "; write each of its entries as an item of its own"
    return ""


def _definition_problems(value: Any, name: str, loc: Loc) -> list[Problem]:
    if not isinstance(value, dict):
        return [at(loc, _wrong(expected('@' + name), value, loc))]
    definition = DEFINITIONS[name]
    properties = definition["properties"]
    found: list[Problem] = []
    for key, item in value.items():
        if key not in properties:
            close = closest(str(key), properties)
            hint = f'did you mean "{close}"?' if close else f"a {name} has {', '.join(properties)}"
            found.append(at(loc + (str(key),), f"unknown field; {hint}"))
            continue
        found += shape_problems(item, properties[key], loc + (key,))
    for key in definition.get("required", ()):
        if key not in value:
            found.append(at(loc + (key,), REQUIRED))
    for key, keys in definition.get("listMapKeys", {}).items():
        items = value.get(key)
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            continue
        first: dict[tuple, int] = {}
        for index, item in enumerate(items):
            identity = tuple(_hashable(item.get(k)) for k in keys)
            if identity in first:
                named = " and ".join(keys)
                found.append(at(loc + (key, index), f"has the same {named} as {dotted((key, first[identity]))}; "
                                                  f"each item of {key} needs its own {named}"))
            else:
                first[identity] = index
    return found


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True, default=str)


# ---- resources --------------------------------------------------------------------------


def is_extended(resource: str) -> bool:
    """A `domain/name` resource outside kubernetes.io: counted in whole units, never
    overcommitted (its request equals its limit)."""
    domain = resource.split("/", 1)[0] if "/" in resource else ""
    return bool(domain) and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def container_resource_problem(resource: str) -> Optional[str]:
    """Why a container may not name `resource` in its requests or limits, or None."""
    if resource in NATIVE_CONTAINER_RESOURCES or names.is_hugepages(resource):
        return None
    if is_extended(resource) and _QUALIFIED.match(resource) and len(resource.split("/", 1)[1]) <= 63:
        return None
    return f"{show(resource)} is {rules.CONTAINER_RESOURCE.message}"


def _amount(resource: str, value: Any) -> tuple[Optional[Decimal], Optional[str]]:
    """The amount of a quantity as the API server reads it (a bare number is cores or
    bytes, never MiB), or why it is not one."""
    kind = kind_for_resource(resource)
    try:
        amount = parse(str(value) if not isinstance(value, str) else value, kind)
    except QuantityError as exc:
        return None, str(exc)
    if amount < 0:
        return None, f"{show(value)} must not be negative"
    if is_extended(resource) and amount != amount.to_integral_value():
        return None, f"{format(amount.normalize(), 'f')} is {rules.WHOLE_UNITS.message}"
    return amount, None


def resource_problems(resources: Mapping[str, Any]) -> list[Problem]:
    """The requests and limits of one container (a shape-checked ResourceRequirements):
    known resource names, quantities, requests within limits, and extended resources and
    hugepages requested exactly (the API server's rules)."""
    found: list[Problem] = []
    amounts: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    for side in ("requests", "limits"):
        for resource, value in (resources.get(side) or {}).items():
            problem = container_resource_problem(resource)
            amount = None
            if not problem:
                amount, problem = _amount(resource, value)
            if problem:
                found.append(at((side, resource), problem))
            else:
                amounts[side][resource] = amount
    for resource, request in amounts["requests"].items():
        limit = amounts["limits"].get(resource)
        kind = kind_for_resource(resource)
        exact = is_extended(resource) or resource.startswith("hugepages-")
        if limit is None:
            if exact and resource not in (resources.get("limits") or {}):
                found.append(at(("requests", resource), f"{render(request, kind)} needs limits.{resource} equal to it "
                                                      f"({rules.EXACT_RESOURCE.message})"))
        elif exact and request != limit:
            found.append(at(("requests", resource), f"{render(request, kind)} is not limits.{resource} "
                                                  f"{render(limit, kind)} ({rules.EXACT_RESOURCE.message})"))
        elif request > limit:
            found.append(at(("requests", resource), f"{render(request, kind)} is more than limits.{resource} "
                                                  f"{render(limit, kind)}"))
    return found


def extra_resource_problems(resources: Mapping[str, Any]) -> list[Problem]:
    """`extraResources`: extended resources only (cpu, memory, storage and GPUs have their
    own fields, which the profile maxima and GPU placement see), in whole units."""
    found: list[Problem] = []
    for resource, value in resources.items():
        problem = core_resource_problem(resource)
        if problem is None and not names.is_hugepages(resource):
            problem = container_resource_problem(resource)
        if problem is None:
            _, problem = _amount(resource, value)
        if problem:
            found.append(at((resource,), problem))
    return found


def core_resource_problem(resource: str) -> Optional[str]:
    """Why `resource` has an entry field of its own and may not be named in
    `extraResources`, or None."""
    own = {"cpu": "cpu and cpuLimit", "memory": "memory and memoryLimit",
           "ephemeral-storage": "storage and storageLimit", "storage": "storage and storageLimit"}
    if resource in own:
        return f"{resource} is set with {own[resource]}, which the profile maxima see; {rules.CORE_RESOURCE.message}"
    domain = resource.split("/", 1)[0] if "/" in resource else ""
    if domain in GPU_DOMAINS.values():
        return (f"{resource} is a GPU resource: request GPUs with gpus (gpuVendor, gpuResource), which place "
                f"the pod on a GPU pool and are held to maxGpus; {rules.CORE_RESOURCE.message}")
    return None


def gpu_resource_problem(resource: str, vendor: str) -> Optional[str]:
    """`gpuResource` names a resource of the entry's GPU vendor (`nvidia.com/mig-3g.20gb`)."""
    domain = GPU_DOMAINS[vendor]
    if not resource.startswith(domain + "/") or container_resource_problem(resource):
        return (f"{show(resource)} is not a GPU resource of vendor {vendor} ({domain}/<name>, for example "
                f"{domain}/gpu); cpu, memory and storage have their own fields")
    return None


def gpu_totals(pod_spec: Mapping[str, Any], init: bool = False) -> dict[str, Decimal]:
    """GPU resources (GPU_DOMAINS) the app containers of a pod ask for (with `init`, its
    init containers too), summed."""
    totals: dict[str, Decimal] = {}
    for container in [*(pod_spec.get("containers") or []), *((pod_spec.get("initContainers") or []) if init else [])]:
        resources = container.get("resources") or {}
        asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for resource, value in asked.items():
            if "/" in resource and resource.split("/", 1)[0] in GPU_DOMAINS.values():
                amount, problem = _amount(resource, value)
                if amount is not None:
                    totals[resource] = totals.get(resource, Decimal(0)) + amount
    return totals


# ---- mounts -----------------------------------------------------------------------------


def mount_path_problem(path: Any) -> Optional[str]:
    """Why `path` is not a directory a volume can be mounted at, or None."""
    if not isinstance(path, str):
        return _wrong("a path (a string)", path)
    parts = path.split("/")[1:]
    if not path.startswith("/") or path.rstrip("/") == "" or any(p in (".", "..") for p in parts):
        return f"{show(path)} is {rules.MOUNT_PATH.message}"
    return None


def _normal(path: str) -> str:
    return "/" + "/".join(p for p in path.split("/") if p)


def _inside(path: str, directory: str) -> bool:
    path, directory = _normal(path), _normal(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


# ---- pods -------------------------------------------------------------------------------


def pod_problems(spec: Mapping[str, Any]) -> list[Problem]:
    """The pod rules, on a pod spec whose shape is right (`shape_problems(spec, "@PodSpec")`)."""
    found: list[Problem] = []
    if not spec.get("containers"):
        found.append(at(("containers",), "needs at least one container"))
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in JOB_RESTART_POLICIES:
        found.append(at(("restartPolicy",), f"{show(policy)} {rules.JOB_RESTART_POLICY.message}"))
    if spec.get("ephemeralContainers"):
        found.append(at(("ephemeralContainers",), "cannot be set when a pod is created (kubectl debug adds them)"))
    volumes = [v.get("name") for v in spec.get("volumes") or []]
    for index, volume in enumerate(spec.get("volumes") or []):
        problem = names.dns1123_label_problem(volume["name"])
        if problem:
            found.append(at(("volumes", index, "name"), problem))
    first: dict[str, Loc] = {}
    for key in CONTAINER_LISTS:
        for index, container in enumerate(spec.get(key) or []):
            here: Loc = (key, index)
            name = container["name"]
            problem = names.dns1123_label_problem(name)
            if problem:
                found.append(at(here + ("name",), problem))
            elif name in first:
                found.append(at(here + ("name",), f"{show(name)} is also the name of {dotted(first[name])}; "
                                                "containers and init containers need names of their own"))
            else:
                first[name] = here
            if "image" not in container:
                found.append(at(here + ("image",), REQUIRED))
            else:
                problem = image_problem(container["image"])
                if problem:
                    found.append(at(here + ("image",), problem))
            found += [p.below(here + ("resources",)) for p in resource_problems(container.get("resources") or {})]
            found += [p.below(here) for p in mount_problems(container.get("volumeMounts") or [], volumes)]
    return found


def mount_problems(mounts: Sequence[Mapping[str, Any]], volumes: Sequence[Any]) -> list[Problem]:
    """Each mount names a volume of the pod and a valid path."""
    found: list[Problem] = []
    for index, mount in enumerate(mounts):
        problem = mount_path_problem(mount.get("mountPath"))
        if problem:
            found.append(at(("volumeMounts", index, "mountPath"), problem))
        if mount.get("name") not in volumes:
            listed = ", ".join(str(v) for v in volumes) or "none"
            found.append(at(("volumeMounts", index, "name"),
                          f"{show(mount.get('name'))} is not a volume of the pod (volumes: {listed})"))
    return found


def check_pod_spec(spec: Any) -> list[Problem]:
    """A raw `podSpec`: its shape, then (when the shape is right) the pod rules."""
    found = shape_problems(spec, "@" + SHAPES["roots"]["PodSpec"])
    return found or pod_problems(spec)


# ---- names the program generates ---------------------------------------------------------


def reserved_problems(
    user: Mapping[str, Sequence[tuple[Loc, Any]]], generated: Mapping[str, Mapping[str, str]]
) -> list[Problem]:
    """User-given names that take a name the program generates in the same scope.

    `user` maps a scope (`volumes`, `containers`, `mountPaths`) to (location, name) pairs;
    `generated` maps it to {generated name: what the program adds under it}. A mount path
    also may not lie inside a generated mount: that directory is read-only.
    """
    found: list[Problem] = []
    for scope, items in user.items():
        taken = generated.get(scope) or {}
        for loc, name in items:
            if not isinstance(name, str):
                continue
            if scope == "mountPaths":
                for path, what in taken.items():
                    if _inside(name, path):
                        where = "is" if _normal(name) == _normal(path) else "is inside the read-only directory"
                        found.append(at(loc, f"{show(name)} {where} {what}; {rules.RESERVED_NAME.message}"))
            elif name in taken:
                found.append(at(loc, f"{show(name)} is the name of {taken[name]}; {rules.RESERVED_NAME.message}"))
    return found


def user_names(pod_spec: Optional[Mapping[str, Any]], container_name: str, volumes: Sequence[Any],
               mounts: Sequence[Any]) -> dict[str, list[tuple[Loc, Any]]]:
    """The names an entry gives in each scope of its pod, with their locations in the entry:
    those of a raw pod spec, or of the entry's own container (named after the entry)."""
    if pod_spec is not None:
        out: dict[str, list[tuple[Loc, Any]]] = {"volumes": [], "containers": [], "mountPaths": []}
        for index, volume in enumerate(pod_spec.get("volumes") or []):
            out["volumes"].append((("podSpec", "volumes", index, "name"), volume.get("name")))
        for key in CONTAINER_LISTS:
            for index, container in enumerate(pod_spec.get(key) or []):
                out["containers"].append((("podSpec", key, index, "name"), container.get("name")))
                if key == "containers":
                    for m, mount in enumerate(container.get("volumeMounts") or []):
                        out["mountPaths"].append((("podSpec", key, index, "volumeMounts", m, "mountPath"),
                                                  mount.get("mountPath")))
        return out
    return {
        "volumes": [(("volumes", i, "name"), v.get("name")) for i, v in enumerate(volumes) if isinstance(v, dict)],
        "containers": [(("name",), container_name)],
        "mountPaths": [(("volumeMounts", i, "mountPath"), m.get("mountPath"))
                       for i, m in enumerate(mounts) if isinstance(m, dict)],
    }
