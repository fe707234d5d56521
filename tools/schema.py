"""JSON Schemas (draft 2020-12) of the config files, generated from the models, for editors.

A build tool, not part of the program. Two documents, written by `make schema`
(`python -m tools.schema docs/schema`):

- `job-file.schema.json`: a job file named by `kns:jobFiles` (`jobs:` and `schedules:`);
- `stack-config.schema.json`: a `Pulumi.<stack>.yaml` file, whose `config:` holds the
  `kns:` keys.

The models are the source: `model_json_schema(by_alias=True, mode="validation")` gives the
shape, and this module adds what the models encode in validators rather than in types, so
that the schema accepts what the program accepts (see docs/schema.md):

- quantities are YAML numbers or Kubernetes quantity strings; resource maps likewise;
- names, label keys and values, JSON pointers and env values get their patterns;
- integers, numbers and booleans may be quoted, as pydantic's lax mode reads them
  (`"2"`, `"1.5"`, `"yes"`); snake_case keys are accepted beside camelCase (not suggested);
- secure values (`{secure: ...}`) where the program accepts a secret;
- the rules one object can check alone (`role: gpu` needs `gpu`, `type: namespace` runs
  no container, ...) as `if`/`then`, with the program's message as the `errorMessage`
  editors show.

Only keywords that draft-07 validators also know are used (older yaml-language-server
releases validate with draft-07 semantics), plus the editor keywords `doNotSuggest`,
`errorMessage` and `patternErrorMessage`, which validators ignore. Scalar alternatives are
type lists rather than `anyOf`, so an editor reports one clear message. Cross-entry checks,
profiles, quotas, cron syntax and placement stay with the program (and `./kns validate`).

Everything here is a pure function of the models; output is deterministic (sorted keys,
2-space indent, trailing newline).
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, models_json_schema
from pydantic_core import core_schema

from config import budgets, loader, models, names, quantity, reservations, rules, source

DIALECT = "https://json-schema.org/draft/2020-12/schema"
JOB_FILE = "job-file.schema.json"
STACK_CONFIG = "stack-config.schema.json"
SECURE = "SecureValue"
CREDENTIALS = "CredentialSets"

# ---- patterns ---------------------------------------------------------------------------
# ECMA-262 and Python `re` read these alike: anchored, ASCII classes, no named groups.

_NUMBER = rf"[+]?{quantity.UNSIGNED_NUMBER}"
_SUFFIX = rf"{quantity.SUFFIX}?"
# A non-negative Kubernetes quantity (config.quantity.parse; strings are stripped).
QUANTITY = rf"^\s*{_NUMBER}{_SUFFIX}\s*$"
# The same, greater than zero: some digit of the number part is not 0.
POSITIVE_QUANTITY = rf"^\s*(?=[+.0-9]*[1-9]){_NUMBER}{_SUFFIX}\s*$"
# What pydantic's lax mode reads as an int, a float or a bool from a string (the common
# spellings; digit-group underscores are left out).
INT_TEXT = r"^\s*[+-]?[0-9]+(?:\.0*)?\s*$"
FLOAT_TEXT = (
    r"^\s*[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])\s*$"
)
BOOL_TEXT = (
    r"^(?:[tT][rR][uU][eE]|[fF][aA][lL][sS][eE]|[yY][eE][sS]|[nN][oO]|[oO][nN]|[oO][fF][fF]"
    r"|[tTfFyYnN01])$"
)
DNS_LABEL = rules.DNS1123_LABEL
DNS_SUBDOMAIN = rules.DNS1123_SUBDOMAIN
_SUBDOMAIN = rules.DNS1123_SUBDOMAIN.strip("^$")
_LABEL_NAME = rules.LABEL_NAME.strip("^$")
# `prefix/name`: an optional DNS subdomain and "/", then a name of 1 to 63 characters.
LABEL_KEY = rf"^(?:(?:{_SUBDOMAIN})?/)?(?=[^/]{{1,63}}$){_LABEL_NAME}$"
LABEL_VALUE = rules.LABEL_VALUE
# A node name: its first dot-separated part is a DNS-1123 label.
NODE_NAME = r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?(?:\..*)?$"
# 5 whitespace-separated fields or a descriptor (chrono/kcron.py); whether they make a
# valid schedule is the program's check.
CRON_FIELDS = r"^(?:@(?:yearly|annually|monthly|weekly|daily|midnight|hourly)|\s*[^@\s]\S*(?:\s+\S+){4}\s*)$"

NOT_NULL = {"not": {"type": "null"}}


# ---- the generator ----------------------------------------------------------------------


def _func(annotated: Any) -> Callable:
    """The function of the one validator in an `Annotated[...]` alias of config.models."""
    return annotated.__metadata__[0].func


def _quantity(positive: bool, number: dict[str, Any], help_text: str, message: str) -> dict[str, Any]:
    # One schema, no anyOf: `pattern` applies to strings only, `minimum` to numbers only, so
    # editors report one clear message.
    return {
        "type": ["string", "number"],
        "pattern": POSITIVE_QUANTITY if positive else QUANTITY,
        **number,
        "errorMessage": message,
        "description": help_text,
    }


def _before_validators() -> dict[Callable, dict[str, Any]]:
    """Fields whose validator runs first accept more than their type says: what they accept."""
    cpu = _quantity(
        True, {"exclusiveMinimum": 0},
        'CPU: cores as a number (`2`, `0.5`) or a Kubernetes quantity (`"500m"`); at least 1m.',
        'not a CPU quantity: cores as a number (0.5) or a string like "500m", more than zero',
    )
    size = _quantity(
        True, {"minimum": 1},
        "Memory or storage: a YAML number is MiB (`4096` is 4Gi); a string is a Kubernetes "
        'quantity (`"4Gi"`, `"512Mi"`), so a string without a unit is bytes; at least 1Mi.',
        'not a memory quantity: a number of MiB (4096) or a string like "4Gi", at least 1Mi',
    )
    resources = {
        "type": "object",
        "additionalProperties": _quantity(
            False, {"minimum": 0}, "A quantity, zero or more.",
            'not a quantity: a number or a string like "500m" or "4Gi", zero or more',
        ),
        "description": "Resource name to quantity. `cpu` is cores; `memory`, `storage`, "
        "`ephemeral-storage` (also as `requests.<name>` and `limits.<name>`) are sizes, where a "
        "YAML number is MiB; anything else is a count.",
    }
    limits = resources | {
        "propertyNames": {"pattern": rules.NODEPOOL_LIMIT.pattern, "patternErrorMessage": rules.NODEPOOL_LIMIT.message},
        "description": "The most the pool may grow to, summed over its nodes: resource name (`cpu`, `memory`, "
        "`nvidia.com/gpu`, `pods`, `nodes`, ...) to quantity; memory as a YAML number is MiB.",
    }
    queue = resources | {
        "propertyNames": {"pattern": rules.QUEUE_RESOURCE.pattern, "patternErrorMessage": rules.QUEUE_RESOURCE.message},
        "description": "What the queue holds on this pool: resource name (`cpu`, `memory`, `nvidia.com/gpu`, "
        "`pods`, ...) to quantity; memory as a YAML number is MiB. See docs/queueing.md.",
    }
    held = resources | {
        "propertyNames": {"pattern": f"^(gpus|{rules.QUEUE_RESOURCE.pattern[2:-2]})$",
                          "patternErrorMessage": rules.QUEUE_RESOURCE.message + ", or gpus"},
        "description": "What the reservation holds of its pool: `gpus` (the pool's GPUs), `cpu`, `memory` or any "
        "resource a queue can hold, to quantity; memory as a YAML number is MiB. See docs/reservations.md.",
    }
    return {_func(models.Cpu): cpu, _func(models.Bytes): size, _func(models.ResourceMap): resources,
            _func(models.Limits): limits, _func(models.QueueResources): queue, models._extra_resources: resources,
            _func(reservations.HeldResources): held,
            _func(reservations.Moment): {"type": ["string", "null"], "format": "date-time",
                                         "description": "RFC 3339 with an offset, on a whole minute "
                                         "(2026-12-01T09:00:00+01:00)."}}


def _after_validators() -> dict[Callable, Callable[[dict[str, Any]], dict[str, Any]]]:
    """Fields whose validator checks the value after its type: how to narrow the type's schema."""
    label_map = {
        "propertyNames": {"pattern": LABEL_KEY, "patternErrorMessage": "not a Kubernetes label key"},
        "additionalProperties": {
            "type": "string", "pattern": LABEL_VALUE, "maxLength": 63,
            "patternErrorMessage": "not a Kubernetes label value",
        },
        "description": "Kubernetes labels: keys are `[prefix/]name`, values at most 63 letters, digits, "
        '"-", "_" or ".", starting and ending with a letter or digit.',
    }
    env_message = rules.ENV_VALUE.message
    env_value = {
        "anyOf": [
            {"type": ["string", "number", "boolean"], "errorMessage": env_message},
            {
                "type": "object",
                "properties": {"valueFrom": {"description": "secretKeyRef, configMapKeyRef or fieldRef, as in a pod."}},
                "required": ["valueFrom"],
                "additionalProperties": False,
                "errorMessage": env_message,
            },
        ],
        "description": "A string (numbers and booleans are written as text) or {valueFrom: {...}}.",
    }
    path = models.JsonOverride.model_fields["path"].metadata[0].func
    karpenter_group = next(m.func for m in models.NodeClassRef.model_fields["group"].metadata if hasattr(m, "func"))
    return {
        _func(models.EntryName): lambda s: s | {
            "pattern": DNS_LABEL, "maxLength": names.MAX_ENTRY_NAME,
            "patternErrorMessage": "not a DNS-1123 label (lower-case letters, digits and \"-\")",
            "description": f"The entry's stable key: a DNS-1123 label of at most {names.MAX_ENTRY_NAME} "
            "characters. Names the namespace (`<namespacePrefix><name>`) and every object of the entry.",
        },
        _func(models.DnsLabel): lambda s: s | {
            "pattern": DNS_LABEL, "maxLength": 63,
            "patternErrorMessage": "not a DNS-1123 label (lower-case letters, digits and \"-\")",
            "description": "A DNS-1123 label: lower-case letters, digits and \"-\", at most 63 characters.",
        },
        _func(models.LabelValue): lambda s: s | {
            "pattern": LABEL_VALUE, "maxLength": 63, "patternErrorMessage": "not a Kubernetes label value",
            "description": "Stamped as the label `kns.io/owner`, so a Kubernetes label value.",
        },
        _func(models.Labels): lambda s: s | label_map,
        _func(models.Annotations): lambda s: s | {
            "propertyNames": label_map["propertyNames"],
            "description": "Kubernetes annotations: keys are `[prefix/]name`.",
        },
        _func(models.CronExpr): lambda s: s | {
            "pattern": CRON_FIELDS,
            "patternErrorMessage": "a schedule needs exactly 5 fields: minute, hour, day of month, month, "
            "day of week (no seconds field), or a descriptor such as @daily (not @every)",
            "description": 'A Kubernetes CronJob schedule: 5 fields (`"30 2 * * *"`) or a descriptor '
            '(`"@daily"`), evaluated in `timeZone`.',
        },
        _func(models.TimeZone): lambda s: s | {
            "description": 'An IANA time zone of the tz database (`"Europe/Paris"`, `"Etc/UTC"`); '
            'not a host file such as `localtime` or `posix/...`.',
        },
        _func(models.EnvValue): lambda s: env_value,
        karpenter_group: lambda s: s | {
            "pattern": r"^[^/]*$", "patternErrorMessage": 'the API group alone, without "/" or a version',
            "description": "The node class's API group (`karpenter.k8s.aws`, `karpenter.azure.com`, `karpenter.kwok.sh`).",
        },
        _func(models.MigProfile): lambda s: s | {
            "pattern": rules.MIG_PROFILE.pattern, "patternErrorMessage": rules.MIG_PROFILE.message,
            "description": 'A MIG profile as the DRA driver publishes it (`"1g.10gb"`, `"3g.40gb"`). See docs/gpus.md.',
        },
        _func(models.GpuModel): lambda s: s | {
            "pattern": rules.GPU_MODEL.pattern, "maxLength": rules.GPU_MODEL.max_length,
            "patternErrorMessage": rules.GPU_MODEL.message,
            "description": 'The GPU product name the driver publishes (`"NVIDIA A100-SXM4-80GB"`).',
        },
        _func(models.DriverName): lambda s: s | {
            "pattern": DNS_SUBDOMAIN, "maxLength": 253, "patternErrorMessage": "not a DNS-1123 subdomain",
            "description": "The DRA driver's name (`gpu.nvidia.com`).",
        },
        _func(models.KubernetesVersion): lambda s: s | {
            "pattern": rules.KUBERNETES_VERSION.pattern, "patternErrorMessage": rules.KUBERNETES_VERSION.message,
            "description": 'The cluster\'s Kubernetes version (`"1.36"`): what the program may use depends on it.',
        },
        _func(models.DurationOrNever): lambda s: s | {
            "pattern": rules.DURATION_OR_NEVER.pattern, "patternErrorMessage": rules.DURATION_OR_NEVER.message,
            "description": 'A duration as Karpenter reads it (`"30s"`, `"10m"`, `"1h30m"`), or `"Never"`.',
        },
        path: lambda s: s | {
            "pattern": rules.JSON_POINTER.pattern,
            "patternErrorMessage": rules.JSON_POINTER.message,
            "description": "A JSON pointer (RFC 6901) into the built object.",
        },
        # config/podspec.py: the image reference and tag rules (the image's name part is
        # also held to rules.IMAGE.max_length, which only the program checks)
        _func(models.ImageRef): lambda s: s | {"pattern": rules.IMAGE.pattern,
                                               "patternErrorMessage": rules.IMAGE.message},
        _func(models.ImageTag): lambda s: s | {"pattern": rules.IMAGE_TAG.pattern,
                                               "patternErrorMessage": rules.IMAGE_TAG.message},
    }


def _hoisted_anyof(members: list[dict[str, Any]]) -> dict[str, Any]:
    """anyOf of `members`, splicing in members that are themselves only an anyOf (with its help)."""
    out: dict[str, Any] = {}
    flat: list[dict[str, Any]] = []
    for member in members:
        if "anyOf" in member and set(member) <= {"anyOf", "description", "errorMessage"}:
            flat.extend(member["anyOf"])
            out.update({k: v for k, v in member.items() if k != "anyOf"})
        else:
            flat.append(member)
    return out | {"anyOf": flat}


# A before-validator of every field that only refuses (a boolean for a number, which the
# schema's number types refuse already): the field's own schema stands; so does it for a
# validator marked `only_refuses` (config/models.py duration_text: a number for a duration).
NARROWING_BEFORE = models.Model._no_boolean_numbers.__func__


class _Generator(GenerateJsonSchema):
    """pydantic's generator, taught the validators of config.models and lax scalars."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.before = _before_validators()
        self.after = _after_validators()
        self.classes: dict[str, type[BaseModel]] = {}

    def function_before_schema(self, schema: core_schema.BeforeValidatorFunctionSchema) -> dict[str, Any]:
        function = schema["function"]["function"]
        if getattr(function, "__func__", None) is NARROWING_BEFORE or getattr(function, "only_refuses", False):
            return self.generate_inner(schema["schema"])  # it refuses more, accepts nothing new
        if function not in self.before:
            raise TypeError(
                f"tools/schema.py does not know the before-validator {getattr(function, '__qualname__', function)}: "
                "it may accept input its type does not say; add what it accepts to _before_validators"
            )
        return copy.deepcopy(self.before[function])

    def function_after_schema(self, schema: core_schema.AfterValidatorFunctionSchema) -> dict[str, Any]:
        inner = self.generate_inner(schema["schema"])
        narrow = self.after.get(schema["function"]["function"])
        return narrow(inner) if narrow else inner

    def int_schema(self, schema: core_schema.IntSchema) -> dict[str, Any]:
        return _lax(super().int_schema(schema), INT_TEXT, "a whole number")

    def float_schema(self, schema: core_schema.FloatSchema) -> dict[str, Any]:
        return _lax(super().float_schema(schema), FLOAT_TEXT, "a number")

    def bool_schema(self, schema: core_schema.BoolSchema) -> dict[str, Any]:
        # pydantic also reads 0 and 1 as booleans
        return _lax({"type": ["boolean", "integer"], "minimum": 0, "maximum": 1}, BOOL_TEXT, "true or false")

    def nullable_schema(self, schema: core_schema.NullableSchema) -> dict[str, Any]:
        inner = self.generate_inner(schema["schema"])
        if "type" in inner and not {"anyOf", "oneOf", "allOf", "enum", "const", "$ref"} & set(inner):
            return inner | {"type": [*_types(inner), "null"]}
        return _hoisted_anyof([inner, {"type": "null"}])

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False  # a title derived from the key ("Ttlhours") tells an editor nothing

    def model_schema(self, schema: core_schema.ModelSchema) -> dict[str, Any]:
        cls = schema["cls"]
        self.classes[cls.__name__] = cls
        return super().model_schema(schema)


def _types(schema: dict[str, Any]) -> list[str]:
    return list(schema["type"]) if isinstance(schema["type"], list) else [schema["type"]]


def _lax(schema: dict[str, Any], pattern: str, what: str) -> dict[str, Any]:
    """`schema`, also accepting the strings pydantic's lax mode reads as its type (`"2"`, `"yes"`).
    Numeric bounds apply to numbers only, so a quoted number out of bounds is left to the program."""
    return schema | {"type": [*_types(schema), "string"], "pattern": pattern, "patternErrorMessage": f"not {what}"}


# ---- model post-processing --------------------------------------------------------------

MODEL_HELP = {
    "Cluster": "`kns:cluster`: the dedicated KNS cluster (never the JARVICE upstream one), or a "
    "render directory. See docs/cluster.md.",
    "NodePool": "A node pool: labels and taints on existing nodes (`nodes`), or a Karpenter NodePool that "
    "creates them (`autoscale`). See docs/node-pools.md and docs/autoscaling.md.",
    "Taint": "A taint put on every node of the pool.",
    "GpuSpec": "The GPUs of each node of a `role: gpu` pool: counted as an extended resource (`nvidia.com/gpu`), "
    "or allocated as devices through DRA (`allocation: dra`: whole GPUs, MIG partitions, shared GPUs). "
    "See docs/gpus.md.",
    "GpuPartition": "A MIG profile the pool's GPUs are partitioned into, and how many of it one GPU holds.",
    "GpuSharing": "How `gpu: {shared: true}` entries share one whole GPU (the NVIDIA driver's sharing strategy).",
    "GpuAsk": "GPU devices one pod claims from a DRA pool: `count` whole GPUs, `count` partitions of one "
    "profile, or one shared GPU. See docs/gpus.md.",
    "PackingScheduler": "`kns:packingScheduler`: the node-packing second kube-scheduler. See docs/schedulers.md.",
    "Keycloak": "Keycloak for the KNS scheduler; its client secret is the secret key "
    "`kns:keycloakClientSecret`.",
    "ContainerResources": "Requests and limits of a container.",
    "GpuCounts": "GPUs per vendor.",
    "JsonOverride": "Set `value` at the JSON pointer `path` of the built object. See docs/options.md.",
    "Toleration": "A pod toleration, as in Kubernetes.",
    "Queueing": "`kns:queueing`: queue entries through Kueue, and whether the program installs it. "
    "See docs/queueing.md.",
    "Queue": "A queue (a Kueue ClusterQueue): a quota per node pool, shared in a cohort. See docs/queueing.md.",
    "StateLayout": "`kns:state`: where the stack's state lives. With entryStacks: N the platform stays in the "
    "stack and the entries are spread over N entry stacks (<stack>.entries-<i>), so a one-entry `./kns up` "
    "reads and writes one small stack. See docs/entry-stacks.md.",
    "QueuePreemption": "Kueue's preemption policy of the queue.",
    "Priority": "A priority (a Kueue WorkloadPriorityClass): queued Jobs with a higher value are admitted "
    "first and may preempt lower ones. See docs/queueing.md, \"Start times on a busy queue\".",
    "Job": "An entry of `kns:jobs` (or of `jobs:` in a job file): a Job in its own namespace, "
    "or with `type: namespace` the namespace alone. See docs/workloads.md.",
    "Worker": "A worker cluster of a MultiKueue site: how Pulumi reaches it (`context` or a secret "
    "`kubeconfig`), the URL the manager's Kueue dials (`apiServer`), and its node pools. See "
    "docs/multicluster.md.",
    "Reservation": "A reservation: part of one node pool held for windows on the calendar (recurring, or "
    "one window), lent to the pool's queues between windows. See docs/reservations.md.",
    "Budget": "A budget: hours of each resource its queues may be admitted per period (recurring, or one "
    "grant); when spent its queues hold (or also stop what runs). See docs/budgets.md.",
    "Network": "`kns:network`: every entry's namespace a tenant on the network: what reaches its pods "
    "(its own pods, `allowFrom`) and where they reach (`egress`, `allowTo`). See docs/network.md.",
    "NetworkSource": "A source an entry admits: the pods of a namespace named, or of the namespaces with these "
    "labels, on some TCP ports (all, left out).",
    "NetworkDestination": "Where entries' pods may connect when egress is restricted: addresses (a CIDR) or the "
    "pods of a namespace, on some TCP ports (all, left out).",
    "Schedule": "An entry of `kns:schedules` (or of `schedules:` in a job file): a CronJob in its "
    "own namespace. See docs/workloads.md and docs/prescaling.md.",
}


def _spellings(cls: type[BaseModel], field: str) -> list[str]:
    """The keys the model reads a field from: its camelCase alias, and its own name."""
    alias = cls.model_fields[field].alias or field
    return [alias] if alias == field else [alias, field]


def _present(cls: type[BaseModel], field: str, value: dict[str, Any] | None = None) -> dict[str, Any]:
    """Matches an object that has `field` under either spelling (with a value matching `value`)."""
    options = [
        {"required": [key], **({"properties": {key: value}} if value is not None else {})}
        for key in _spellings(cls, field)
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}


def _keys(cls: type[BaseModel], fields: Any) -> list[str]:
    return [key for field in fields for key in _spellings(cls, field)]


def _needs(cls: type[BaseModel], field: str, value: dict[str, Any], message: str) -> dict[str, Any]:
    """A `then`: `field` is set (either spelling) to a value matching `value`; else `message`."""
    options = [
        {"required": [key], "properties": {key: value | {"errorMessage": message}}, "errorMessage": message}
        for key in _spellings(cls, field)
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}


def _unset(cls: type[BaseModel], fields: list[str], message: str) -> dict[str, Any]:
    """A `then`: none of `fields` is set, under either spelling, not even to null."""
    forbidden = set(_keys(cls, fields))
    return {"propertyNames": {"enum": [k for k in _keys(cls, cls.model_fields) if k not in forbidden],
                              "errorMessage": message}}


def _null(cls: type[BaseModel], field: str, message: str) -> dict[str, Any]:
    """A `then`: `field` is unset or null."""
    return {"properties": {key: {"type": "null", "errorMessage": message} for key in _spellings(cls, field)}}


def _rules(cls: type[BaseModel]) -> list[dict[str, Any]]:
    """The rules of the model validators that one object can show alone, as `if`/`then`
    with keywords whose failures editors report with `errorMessage` (the program's words)."""
    found: list[dict[str, Any]] = []
    if issubclass(cls, models.GpuSpec):
        found += [
            {"if": {"not": _present(cls, "allocation", {"const": "dra"})},
             "then": _unset(cls, ["driver", "model", "partitions", "sharing"], rules.DRA_FIELDS_NEED_DRA.message)},
            {"if": _present(cls, "allocation", {"const": "dra"}),
             "then": _needs(cls, "driver", {"type": "string"}, rules.DRA_NEEDS_DRIVER.message)},
        ]
    if issubclass(cls, models.NodePool):
        found += [
            {"if": _present(cls, "role", {"const": "gpu"}),
             "then": _needs(cls, "gpu", {"type": "object"}, rules.GPU_POOL_NEEDS_GPU.message)},
            {"if": _present(cls, "role", {"not": {"const": "gpu"}}),
             "then": _null(cls, "gpu", rules.GPU_ONLY_ON_GPU_POOLS.message)},
            {"if": _present(cls, "vcluster", {"const": True}),
             "then": _needs(cls, "role", {"const": "gpu"}, rules.VCLUSTER_ONLY_ON_GPU_POOLS.message)},
            {"if": _present(cls, "nodes", NOT_NULL),
             "then": _null(cls, "autoscale", rules.NODES_OR_AUTOSCALE.message)},
            {"if": {"not": _present(cls, "autoscale", NOT_NULL)},
             "then": _needs(cls, "nodes", {"type": "array"}, rules.NODES_OR_AUTOSCALE.message)},
        ]
    if issubclass(cls, models.Worker):
        found += [
            {"if": _present(cls, "context", NOT_NULL),
             "then": _null(cls, "kubeconfig", rules.SITE_WORKER_ACCESS.message)},
            {"if": {"not": _present(cls, "kubeconfig", NOT_NULL)},
             "then": _needs(cls, "context", {"type": "string"}, rules.SITE_WORKER_ACCESS.message)},
        ]
    if issubclass(cls, models.Requirement):
        values = _spellings(cls, "values")[0]
        found += [
            {"if": _present(cls, "operator", {"const": "In"}),
             "then": _needs(cls, "values", {"type": "array", "minItems": 1}, rules.IN_NEEDS_VALUES.message)},
            {"if": _present(cls, "operator", {"enum": list(rules.NUMERIC_OPERATORS)}),
             "then": _needs(cls, "values", {"type": "array", "minItems": 1, "maxItems": 1,
                                            "items": {"type": "string", "pattern": r"^[0-9]+$"}},
                            rules.NUMERIC_NEEDS_ONE_INTEGER.message)},
            {"if": _present(cls, "operator", {"enum": ["Exists", "DoesNotExist"]}),
             "then": {"properties": {values: {"maxItems": 0, "errorMessage": rules.EXISTS_TAKES_NO_VALUES.message}}}},
        ]
    if issubclass(cls, models.KnsScheduler):
        found += [
            {"if": _present(cls, "enabled", {"const": True}),
             "then": _needs(cls, "image", {"type": "string", "minLength": 1}, rules.KNS_NEEDS_IMAGE.message)},
            {"if": _present(cls, "ingress", {"const": True}),
             "then": _needs(cls, "jobs_domain", {"type": "string", "minLength": 1}, rules.INGRESS_NEEDS_DOMAIN.message)},
        ]
    if issubclass(cls, models.Workload):
        container = list(models.CONTAINER_FIELDS)
        found += [
            {"if": _present(cls, "type", {"const": "namespace"}),
             "then": _unset(cls, [*container, *models.WORKLOAD_ONLY_FIELDS],
                            "type namespace runs no workload, so no container field, podSpec, jsonOverrides, "
                            "credentials, queue, priority or workers can be set")},
            {"if": _present(cls, "workers", {"type": "integer", "minimum": 2}),
             "then": _unset(cls, ["parallelism", "completions"], rules.WORKERS_DERIVE.message)},
            {"if": {"not": _present(cls, "workers", {"type": "integer", "minimum": 2})},
             "then": _unset(cls, ["leader_port", "restart_workers"], f"leaderPort and restartWorkers "
                                                                      f"{rules.WORKERS_ONLY.message}")},
            {"if": _present(cls, "pod_spec", NOT_NULL),
             "then": _unset(cls, container, "podSpec is used verbatim, so no container field can be set beside it")},
            {"if": _present(cls, "credentials_mount_path"),
             "then": _needs(cls, "credentials", {"type": "array", "minItems": 1},
                            rules.MOUNT_PATH_NEEDS_CREDENTIALS.message)},
            {"if": _present(cls, "gpu_resource", {"type": "string", "minLength": 1}),
             "then": _needs(cls, "gpus", {"exclusiveMinimum": 0}, rules.GPU_RESOURCE_NEEDS_GPUS.message)},
        ]
    if issubclass(cls, reservations.Reservation):
        found += [{"oneOf": [{"required": ["nodes"]}, {"required": ["resources"]}],
                   "errorMessage": rules.RESERVATION_HOLDS_ONE.message},
                  {"oneOf": [{"required": ["schedule"]}, {"required": ["start"]}],
                   "errorMessage": rules.RESERVATION_WHEN_ONE.message}]
    if issubclass(cls, models.NetworkSource):
        found.append({"oneOf": [{"required": ["namespace"]}, {"required": ["namespaceLabels"]}],
                      "errorMessage": rules.NETWORK_SOURCE_ONE.message})
    if issubclass(cls, models.NetworkDestination):
        found.append({"oneOf": [{"required": ["cidr"]}, {"required": ["namespace"]}],
                      "errorMessage": rules.NETWORK_DESTINATION_ONE.message})
    if issubclass(cls, budgets.Budget):
        found.append({"oneOf": [{"required": ["reset"]}, {"required": ["start", "end"]}],
                      "errorMessage": rules.BUDGET_PERIOD_ONE.message})
    if issubclass(cls, models.Queue):
        found += [{"if": {"not": _present(cls, "cohort", NOT_NULL)},
                   "then": _null(cls, limit, rules.LIMITS_NEED_COHORT.message)}
                  for limit in ("borrowing_limit", "lending_limit")]
    if issubclass(cls, models.Schedule):
        found.append({"if": _present(cls, "warm_up_minutes", NOT_NULL),
                      "then": _null(cls, "primer_schedule", rules.WARM_UP_OR_PRIMER.message)})
    return found


def _narrow_fields(cls: type[BaseModel], properties: dict[str, Any]) -> None:
    """Per-field rules that model validators (not field types) check."""
    if issubclass(cls, reservations.Reservation):
        properties["duration"] |= {"pattern": rules.RESERVATION_DURATION.pattern,
                                   "patternErrorMessage": rules.RESERVATION_DURATION.message}
    if issubclass(cls, models.Cluster):
        longest = 63 - names.MAX_ENTRY_NAME
        properties["namespacePrefix"] |= {
            "pattern": r"^(?:[a-z0-9][-a-z0-9]*)?$", "maxLength": longest,
            "patternErrorMessage": "cannot start a DNS-1123 label (lower-case letters, digits and \"-\")",
            "description": f"Prepended to each entry name to make its namespace; at most {longest} "
            f"characters, so a {names.MAX_ENTRY_NAME}-character name still fits in 63.",
        }
        properties["kubeconfig"] = _hoisted_anyof([
            {"type": "string"},
            {"$ref": f"#/$defs/{SECURE}"},
            {"type": "null"},
        ]) | {
            "description": "A kubeconfig path (relative to the project) or inline kubeconfig text; "
            "set inline text as a secret: `pulumi config set --secret --path kns:cluster.kubeconfig < file`.",
        }
    if issubclass(cls, models.Worker):
        properties["kubeconfig"] = _hoisted_anyof([
            {"type": "string"},
            {"$ref": f"#/$defs/{SECURE}"},
            {"type": "null"},
        ]) | {
            "description": "A kubeconfig path (relative to the project) or inline kubeconfig text, set as a "
            "secret: `pulumi config set --secret --path 'kns:workers[0].kubeconfig' < file`.",
        }
    if issubclass(cls, models.Taint):
        properties["key"] |= {"pattern": LABEL_KEY, "patternErrorMessage": "not a Kubernetes label key"}
        properties["value"] |= {"pattern": LABEL_VALUE, "maxLength": 63,
                                "patternErrorMessage": "not a Kubernetes label value"}
    if issubclass(cls, models.Requirement):
        properties["key"] |= {"pattern": LABEL_KEY, "patternErrorMessage": "not a Kubernetes label key"}
        properties["values"]["items"] |= {"pattern": LABEL_VALUE, "maxLength": 63,
                                          "patternErrorMessage": "not a Kubernetes label value"}
    if issubclass(cls, models.NodePool):
        properties["nodes"] |= {"uniqueItems": True}
        properties["nodes"]["items"] |= {
            "pattern": NODE_NAME, "maxLength": 253, "patternErrorMessage": "not a Kubernetes node name",
        }
    if issubclass(cls, models.Workload):
        not_pool = "(?!" + re.escape(names.LABEL_POOL) + "$)"
        use_pool = f"{names.LABEL_POOL} is set by pool (which also adds the pool's tolerations)"
        properties["nodeSelector"]["propertyNames"] = {
            "pattern": "^" + not_pool + LABEL_KEY[1:],
            "patternErrorMessage": f"not a Kubernetes label key, or {use_pool}",
        }
        properties["placement"]["propertyNames"] = {"pattern": "^" + not_pool, "patternErrorMessage": use_pool}
        properties["dynamicLabels"]["propertyNames"] = {
            "pattern": LABEL_KEY, "patternErrorMessage": "not a Kubernetes label key",
        }
        pod_spec = properties["podSpec"]
        pod_spec |= {
            "required": ["containers"],
            "properties": {
                "containers": {"type": "array", "minItems": 1},
                "restartPolicy": {"enum": ["Never", "OnFailure"],
                                  "errorMessage": "a Job's pod restarts Never or OnFailure"},
            },
        }
    if issubclass(cls, models.Schedule):
        properties["type"] = {
            "const": "pod", "default": "pod",
            "description": 'A schedule runs a workload; type "namespace" is only for jobs.',
        }


def _finish_model(name: str, cls: type[BaseModel], schema: dict[str, Any]) -> None:
    """Post-process one model definition in place."""
    if "description" not in schema and name in MODEL_HELP:
        schema["description"] = MODEL_HELP[name]
    properties = schema["properties"]
    for prop in properties.values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]  # unset is the default; and `default: null` trips editors' completion
    _narrow_fields(cls, properties)
    conditions = _rules(cls)
    # A required field is satisfied by either spelling.
    required = []
    for field in cls.model_fields:
        keys = _spellings(cls, field)
        if keys[0] not in schema.get("required", []):
            continue
        if len(keys) == 1:
            required.append(keys[0])
        else:
            conditions.append({"if": {"required": [keys[1]]}, "else": {"required": [keys[0]]}})
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    if conditions:
        schema["allOf"] = conditions
    # snake_case keys: read by the program (populate_by_name), not suggested. A copy, not a
    # $ref: editors drop the keywords beside a $ref, and some cannot complete through one.
    for field in cls.model_fields:
        keys = _spellings(cls, field)
        if len(keys) == 2:
            properties[keys[1]] = copy.deepcopy(properties[keys[0]]) | {
                "doNotSuggest": True,
                "description": f"The snake_case spelling of `{keys[0]}`, which is preferred.",
            }


def _definitions(roots: list[type[BaseModel]]) -> dict[str, Any]:
    """The `$defs` of `roots` and every model they use, post-processed."""
    generator: list[_Generator] = []

    def make(*args: Any, **kwargs: Any) -> _Generator:
        generator.append(_Generator(*args, **kwargs))
        return generator[-1]

    _, top = models_json_schema(
        [(model, "validation") for model in roots], by_alias=True,
        ref_template="#/$defs/{model}", schema_generator=make,  # type: ignore[arg-type]
    )
    definitions = top["$defs"]
    classes = generator[0].classes
    for name, schema in definitions.items():
        if name not in classes:
            raise TypeError(f"definition {name} is not a model tools/schema.py saw")
        _finish_model(name, classes[name], schema)
    return definitions


# ---- the documents ----------------------------------------------------------------------


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _entry_lists() -> dict[str, dict[str, Any]]:
    return {
        "jobs": {"type": ["array", "null"], "items": _ref("Job"),
                 "description": "Jobs: each runs once, in its own namespace. See docs/workloads.md."},
        "schedules": {"type": ["array", "null"], "items": _ref("Schedule"),
                      "description": "Schedules: each is a CronJob in its own namespace. See docs/workloads.md."},
    }


def job_file_schema() -> dict[str, Any]:
    """The schema of a job file: `jobs:` and `schedules:` lists, like `kns:jobs` and `kns:schedules`."""
    lists = _entry_lists()
    keys = list(models.JobFile.model_fields)
    if set(keys) != set(lists):
        raise TypeError(f"a job file has keys {keys}; tools/schema.py describes {sorted(lists)}")
    return {
        "$schema": DIALECT,
        "title": "kns-platform job file",
        "description": (models.JobFile.__doc__ or "").strip()
        + " It holds entries like kns:jobs and kns:schedules; names are unique across the stack "
        "and every job file. See docs/workloads.md.",
        "type": ["object", "null"],
        "properties": {key: lists[key] for key in keys},
        "additionalProperties": False,
        "errorMessage": rules.JOB_FILE_KEYS.message,
        "$defs": _definitions([models.Job, models.Schedule]),
    }


def _secure_value() -> dict[str, Any]:
    return {
        "title": "Pulumi secure value",
        "description": "A value encrypted by `pulumi config set --secret`; the program sees it decrypted.",
        "type": "object",
        "properties": {"secure": {"type": "string", "minLength": 1}},
        "required": ["secure"],
        "additionalProperties": False,
    }


def _credential_sets() -> dict[str, Any]:
    files = {
        "type": "object",
        "propertyNames": {"pattern": rules.CREDENTIAL_FILE.pattern,
                          "patternErrorMessage": rules.CREDENTIAL_FILE.message},
        "additionalProperties": {"anyOf": [_ref(SECURE), {"type": "string"}]},
        "description": "File name to content; set each with `pulumi config set --secret --path`.",
    }
    return {
        "title": "Credential sets",
        "description": "Set name to {file name: content}, each file a secure value: "
        "`pulumi config set --secret --path 'kns:credentials.<set>.<file>' < file`. See docs/options.md.",
        "type": "object",
        "propertyNames": {"pattern": DNS_LABEL, "maxLength": 50,
                          "patternErrorMessage": "not a DNS-1123 label of at most 50 characters"},
        "additionalProperties": files,
        # The engine marks the key secret when any value inside it is secure.
        "not": {"additionalProperties": {"additionalProperties": {"type": "string"}}},
        "errorMessage": "must be a secret: set it with `pulumi config set --secret --path 'kns:credentials.<set>.<file>' ...`",
    }


def _config_keys() -> dict[str, dict[str, Any]]:
    """Each `kns:` key (without the prefix) and its schema: as `config.loader` reads it."""
    keys = {
        "cluster": _ref("Cluster") | {"description": MODEL_HELP["Cluster"]},
        "packingScheduler": _or_null(_ref("PackingScheduler")) | {"description": MODEL_HELP["PackingScheduler"]},
        "knsScheduler": _or_null(_ref("KnsScheduler")) | {
            "description": "`kns:knsScheduler`: the JARVICE KNS downstream scheduler. See docs/schedulers.md."},
        "profiles": {
            "type": ["object", "null"],
            "additionalProperties": _or_null(_ref("Profile")),
            "description": "Profile rules, applied top to bottom: `*` (everyone), `@group` or a user name, "
            "each with defaults, maxima, images and placement. Keep them in this file (their order "
            "matters). See docs/profiles.md.",
        },
        "credentials": {
            "anyOf": [_ref(SECURE), _ref(CREDENTIALS), {"type": "null"}],
            "description": "Secret key: credential sets, mounted into the entries that list them. "
            "See docs/options.md.",
        },
        "nodePools": {"type": ["array", "null"], "items": _ref("NodePool"),
                      "description": "Node pools: labels and taints on existing nodes. See docs/node-pools.md."},
        "queueing": _or_null(_ref("Queueing")) | {"description": MODEL_HELP["Queueing"]},
        "queues": {"type": ["array", "null"], "items": _ref("Queue"),
                   "description": "Queues: totals per node pool across the entries that name them, as Kueue "
                   "ClusterQueues. See docs/queueing.md."},
        "priorities": {"type": ["array", "null"], "items": _ref("Priority"),
                       "description": "Priorities: Kueue WorkloadPriorityClasses that order queued Jobs and let "
                       "higher ones preempt lower ones. See docs/queueing.md."},
        "state": _or_null(_ref("StateLayout")) | {"description": MODEL_HELP["StateLayout"]},
        "reservations": {"type": ["array", "null"], "items": _ref("Reservation"),
                         "description": "Reservations: capacity of a pool held for windows on the calendar, lent "
                         "to the pool's queues between windows. See docs/reservations.md."},
        "budgets": {"type": ["array", "null"], "items": _ref("Budget"),
                    "description": "Budgets: resource-hours per team and period (allocations); a spent budget "
                    "holds its queues until the next period. See docs/budgets.md."},
        "network": _or_null(_ref("Network")) | {"description": MODEL_HELP["Network"]},
        "workers": {"type": ["array", "null"], "items": _ref("Worker"), "maxItems": rules.SITE_WORKERS_MAX,
                    "description": "Worker clusters of a MultiKueue site: kns:cluster is the manager, which "
                    "dispatches queued Jobs to them. See docs/multicluster.md."},
        **{key: value for key, value in _entry_lists().items()},
        "jobFiles": {
            "type": ["array", "null"],
            "items": {"type": "string", "description": "A glob relative to the project directory."},
            "description": "Job files (globs relative to the project) holding more jobs: and schedules:. "
            "See docs/workloads.md.",
        },
        # A secure value or null, as one schema so that editors show the program's message.
        "keycloakClientSecret": _secure_value() | {
            "type": ["object", "null"],
            "description": "Secret key: the Keycloak client secret of the KNS scheduler; "
            "`pulumi config set --secret kns:keycloakClientSecret ...`.",
            "errorMessage": "must be a secret: set it with `pulumi config set --secret kns:keycloakClientSecret ...`",
        },
    }
    if set(keys) != set(loader.KNOWN_KEYS):
        raise TypeError(
            f"config.loader reads kns: keys {sorted(loader.KNOWN_KEYS)}; tools/schema.py describes {sorted(keys)}"
        )
    if not set(source.SECRET_KEYS) <= {"credentials", "keycloakClientSecret"}:
        raise TypeError(f"tools/schema.py does not say how the secret keys {source.SECRET_KEYS} are written")
    return {f"{source.NAMESPACE}:{key}": keys[key] for key in loader.KNOWN_KEYS}


def stack_config_schema() -> dict[str, Any]:
    """The schema of a `Pulumi.<stack>.yaml` file: its `config:` `kns:` keys, with their models."""
    definitions = _definitions([
        models.Cluster, models.NodePool, models.PackingScheduler, models.KnsScheduler,
        models.Profile, models.Job, models.Schedule, models.Queueing, models.Queue, models.Priority, models.Worker,
        models.StateLayout, reservations.Reservation, budgets.Budget, models.Network,
    ])
    definitions[SECURE] = _secure_value()
    definitions[CREDENTIALS] = _credential_sets()
    namespace = source.NAMESPACE
    return {
        "$schema": DIALECT,
        "title": "kns-platform stack file (Pulumi.<stack>.yaml)",
        "description": "The stack's settings and config. The program reads the `kns:` keys of `config`; "
        "keys of other namespaces (`kubernetes:...`) are Pulumi's and pass through.",
        "type": ["object", "null"],
        "properties": {
            "config": {
                "type": ["object", "null"],
                "description": "Config keys `<namespace>:<key>`. See README.md, \"A tour of the config\".",
                "properties": _config_keys(),
                "patternProperties": {f"^(?!{namespace}:)": {}},
                "additionalProperties": False,
                "errorMessage": f"unknown {namespace}: key",
            },
            "secretsprovider": {"type": "string", "description": "Pulumi: the stack's secrets provider."},
            "encryptedkey": {"type": "string",
                             "description": "Pulumi: the encrypted data key of a cloud secrets provider."},
            "encryptionsalt": {"type": "string",
                               "description": "Pulumi: the salt of the passphrase secrets provider."},
            "environment": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}],
                "description": "Pulumi ESC environments the stack imports.",
            },
        },
        "additionalProperties": False,
        "$defs": definitions,
    }


# ---- output -----------------------------------------------------------------------------


def _pointers(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _pointers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _pointers(value)


def _check_refs(document: dict[str, Any], name: str) -> None:
    """Every `$ref` is a JSON pointer that resolves inside the document."""
    for pointer in _pointers(document):
        node: Any = document
        if not pointer.startswith("#/"):
            raise ValueError(f"{name}: $ref {pointer} is not local")
        for step in pointer[2:].split("/"):
            step = step.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or step not in node:
                raise ValueError(f"{name}: $ref {pointer} does not resolve")
            node = node[step]


def documents() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every schema file."""
    out = {JOB_FILE: job_file_schema(), STACK_CONFIG: stack_config_schema()}
    for name, document in out.items():
        _check_refs(document, name)
    return out


def render(schema: dict[str, Any]) -> str:
    """The file text: sorted keys, 2-space indent, a trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def rendered() -> dict[str, str]:
    return {name: render(schema) for name, schema in documents().items()}


def stale(directory: Path) -> list[str]:
    """The schema files in `directory` that are missing or differ from what the models give."""
    out = []
    for name, text in rendered().items():
        path = Path(directory) / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(name)
    return out


def write(directory: Path) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tools.schema <directory>", file=sys.stderr)
        return 2
    for path in write(Path(argv[0])):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
