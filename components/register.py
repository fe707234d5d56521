"""The one way a component registers a planned manifest (a Kubernetes-shaped dict of plan/):
`Planned(name, manifest, opts)`.

Every object goes to the provider as its generic custom resource, with every top-level
field of the manifest as an input: a WorkloadPriorityClass has `value`, not a `spec`, and a
Secret `type` and `stringData`, which pulumi_kubernetes' apiextensions.CustomResource
cannot carry and its typed classes take only under their own argument names. The type
token is the one the provider gives the kind (plan/identity.py), whichever class would have
made it, so the URN is the same. What the typed classes add is kept: the provider's plugin
version, and for a Secret its `data` and `stringData` as secret outputs, so the state never
holds them in plain text (and `data` an output even when the manifest has none: the token a
controller writes, components/worker.py).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Optional

import pulumi

from plan.identity import type_token

# The Kubernetes kinds whose outputs hold secrets, as the provider's typed classes mark them.
SECRET_OUTPUTS = {"kubernetes:core/v1:Secret": ["data", "stringData"]}


@lru_cache(maxsize=1)
def provider_version() -> str:
    """The Kubernetes provider plugin's version, as the installed SDK package declares it in
    its `pulumi-plugin.json` (what the language host reports as the plugin it needs)."""
    plugin = resources.files("pulumi_kubernetes").joinpath("pulumi-plugin.json").read_text(encoding="utf-8")
    return json.loads(plugin)["version"]


class Planned(pulumi.CustomResource):
    """`manifest` as the resource `name`; its top-level fields (and its secret outputs) are
    the resource's outputs. A field left None is no input, as with the typed classes. A class
    rather than a function: the engine records the caller of a resource's own constructor as
    where it was made (components/source_positions.py), so that is the component's line.
    `patch`: the manifest patches an object the program does not own (plan/identity.py)."""

    def __init__(self, name: str, manifest: dict[str, Any], opts: Optional[pulumi.ResourceOptions] = None,
                 patch: bool = False):
        token = type_token(manifest, patch)
        secret = SECRET_OUTPUTS.get(token, [])
        defaults = pulumi.ResourceOptions(version=provider_version(), additional_secret_outputs=secret or None)
        super().__init__(token, name, {**dict.fromkeys(secret), **manifest},
                         pulumi.ResourceOptions.merge(defaults, opts))
