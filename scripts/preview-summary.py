#!/usr/bin/env python3
"""Summarise `pulumi preview --json` as GitHub-flavoured markdown, one section per entry.

    pulumi preview --json --show-sames > build/preview-dev.json
    scripts/preview-summary.py build/preview-dev.json --stack dev >> "$GITHUB_STEP_SUMMARY"

Every job or schedule entry of stack config is a component (`kns:workload:Job` or
`kns:workload:Schedule`; `kns:workload:KnsWorkload` is accepted too) whose logical name is
the entry's name. A step belongs to the entry whose component is on its parent chain: the
`parent` URNs of the steps' states first, then the type chain the URN encodes
(`urn:pulumi:STACK::PROJECT::kns:workload:Job$kubernetes:core/v1:Namespace::name`).
Everything else (cluster, provider, node pools, schedulers, the stack) is "Platform".

Each section has a table of op, kind, name and changed fields (the keys of the step's
detailedDiff, or its diffReasons/replaceReasons); `same` steps are counted, not listed.
A Kubernetes object is named as the cluster names it, `namespace/name` from its metadata
(the Pulumi logical name only when the metadata does not say).
Without --show-sames the engine leaves `same` steps out of the JSON, so unchanged entries
are not known by name and only the totals line counts them.

Input values are never printed, only field paths: inputs may hold secrets. Engine
diagnostics (errors and warnings, such as a config error or a policy failure) are shown,
since a failed preview has nothing else to say. Pulumi 3.259's preview JSON carries no
policy violations: they are read from the log of `pulumi preview --diff` given with
`--log`, and each is placed under its entry. A `policyViolations` list in the JSON, if a
later version adds one, is shown too.

Pure functions (parse_urn, group_steps, summarise, render) do the work; stdlib only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

ENTRY_TYPES = frozenset({"kns:workload:Job", "kns:workload:Schedule", "kns:workload:KnsWorkload"})
PLATFORM = "Platform"

# op -> (symbol, verb in the totals). Listed most destructive first: the table order.
OPS: dict[str, tuple[str, str]] = {
    "delete": ("-", "to delete"),
    "replace": ("+-", "to replace"),
    "update": ("~", "to update"),
    "create": ("+", "to create"),
    "import": ("=", "to import"),
    "read": (">", "to read"),
    "refresh": ("~", "to refresh"),
    "discard": ("-", "to discard"),
}
SAME = "same"
# `pulumi preview --refresh` reads every resource before it diffs it: one `refresh` step
# each, then the step the update would take from what was read. The read changes nothing;
# what it found shows in that second step (an update back to the config for a field
# changed by hand, a create for an object deleted by hand). So a refresh is not a change.
READS = frozenset({"refresh"})
# The engine's halves of a replacement; folded into one `replace` row per resource.
REPLACE_PARTS = frozenset({"create-replacement", "delete-replaced", "discard-replaced"})
# Halves of an import-replacement, read-replacement: folded likewise.
FOLDED = {"import-replacement": "import", "read-replacement": "read", "delete-discard": "discard"}
MAX_FIELDS = 12
# What the engine puts where a value is not known until the update (a preview of a new
# object whose namespace is another object's output).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


@dataclass(frozen=True)
class Urn:
    stack: str
    project: str
    types: tuple[str, ...]  # parent types first, the resource's own type last
    name: str

    @property
    def type(self) -> str:
        return self.types[-1]


def parse_urn(urn: str) -> Urn:
    """`urn:pulumi:STACK::PROJECT::T1$T2$TYPE::NAME` (the name may itself contain `::`)."""
    parts = urn.split("::", 3)
    if len(parts) != 4 or not parts[0].startswith("urn:pulumi:"):
        raise ValueError(f"not a Pulumi URN: {urn!r}")
    return Urn(parts[0][len("urn:pulumi:"):], parts[1], tuple(parts[2].split("$")), parts[3])


@dataclass(frozen=True)
class Change:
    op: str  # a key of OPS, or "same"
    urn: str
    type: str
    name: str
    fields: tuple[str, ...] = ()  # changed field paths, never values
    replace_fields: tuple[str, ...] = ()  # those of `fields` that force a replacement
    kube: str = ""  # `namespace/name` as the cluster calls the object, or "" when it is not one
    cluster: str = ""  # the cluster its provider reaches (`<cluster>-kubernetes`), or ""


@dataclass
class Section:
    title: str  # the entry name, or PLATFORM
    entry_type: Optional[str] = None  # kns:workload:Job / Schedule for entries
    changes: list[Change] = field(default_factory=list)  # every step but `same`
    same: int = 0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for change in self.changes:
            out[change.op] = out.get(change.op, 0) + 1
        if self.same:
            out[SAME] = self.same
        return out


@dataclass
class Summary:
    stack: str
    totals: dict[str, int]
    entries: list[Section]  # by entry name
    platform: Section
    diagnostics: list[dict[str, str]] = field(default_factory=list)
    policy_violations: list[dict[str, str]] = field(default_factory=list)
    sames_listed: bool = True  # whether `same` steps were in the JSON (--show-sames)


def _state(step: dict[str, Any]) -> dict[str, Any]:
    """The state that describes the resource: the new one, or the old one of a delete."""
    return step.get("newState") or step.get("oldState") or {}


def _parents(steps: Iterable[dict[str, Any]]) -> dict[str, str]:
    parents: dict[str, str] = {}
    for step in steps:
        for key in ("newState", "oldState"):
            state = step.get(key) or {}
            if state.get("parent") and step.get("urn"):
                parents.setdefault(step["urn"], state["parent"])
    return parents


def _ownership(steps: list[dict[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """What `entry_of` needs from the steps: their parent URNs, and the entry components."""
    return _parents(steps), [s["urn"] for s in steps if parse_urn(s["urn"]).type in ENTRY_TYPES]


def entry_of(urn: str, parents: dict[str, str], entry_urns: Iterable[str] = ()) -> Optional[tuple[str, str]]:
    """(entry name, entry type) of the entry component on `urn`'s parent chain, or None.

    Follows the `parent` URNs; where they stop short, the URN's own type chain says whether
    an entry component is an ancestor, and the entry is then the known entry component of
    that type whose name is the resource's name or a `<name>-` prefix of it (the longest),
    or failing that the resource's own name."""
    seen = set()
    current: Optional[str] = urn
    while current and current not in seen:
        seen.add(current)
        parsed = parse_urn(current)
        if parsed.type in ENTRY_TYPES:
            return parsed.name, parsed.type
        current = parents.get(current)
    parsed = parse_urn(urn)
    ancestors = [t for t in parsed.types[:-1] if t in ENTRY_TYPES]
    if not ancestors:
        return None
    entry_type = ancestors[-1]
    candidates = [
        known.name for known in map(parse_urn, entry_urns)
        if known.type == entry_type and (parsed.name == known.name or parsed.name.startswith(known.name + "-"))
    ]
    return (max(candidates, key=len) if candidates else parsed.name), entry_type


def _fields(step: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    detailed = step.get("detailedDiff") or {}
    replace_reasons = list(step.get("replaceReasons") or [])
    if detailed:
        fields = list(detailed)
        replace = [k for k, v in detailed.items() if str((v or {}).get("kind", "")).endswith("-replace")]
    else:
        fields = list(step.get("diffReasons") or []) or list(replace_reasons)
        replace = []
    replace = sorted(set(replace) | (set(replace_reasons) & set(fields)))
    return tuple(sorted(set(fields))), tuple(replace)


def kube_object(step: dict[str, Any]) -> str:
    """`namespace/name` (or `name` for a cluster-scoped object) of a Kubernetes object's
    step, from its `metadata` (the names the cluster uses, not Pulumi's logical names);
    "" for components and providers, or when the name is not known yet."""
    urn = step.get("urn", "")
    if not parse_urn(urn).type.startswith("kubernetes:"):
        return ""
    for key in ("newState", "oldState"):
        state = step.get(key) or {}
        for values in (state.get("inputs"), state.get("outputs")):
            metadata = (values or {}).get("metadata") if isinstance(values, dict) else None
            if not isinstance(metadata, dict):
                continue
            name, namespace = metadata.get("name"), metadata.get("namespace")
            if not isinstance(name, str) or not name or name == UNKNOWN:
                continue
            if isinstance(namespace, str) and namespace and namespace != UNKNOWN:
                return f"{namespace}/{name}"
            return name
    return ""


# The program's providers are named after the cluster they reach (components/cluster.py).
PROVIDER_SUFFIX = "-kubernetes"


def cluster_of(step: dict[str, Any]) -> str:
    """The cluster a Kubernetes object's step is on, from its provider reference
    (`<provider URN>::<id>`, the provider named `<cluster>-kubernetes`); "" otherwise."""
    if not parse_urn(step.get("urn", "")).type.startswith("kubernetes:"):
        return ""
    reference = str(_state(step).get("provider") or "")
    parts = reference.split("::")
    name = parts[3] if len(parts) >= 5 else ""
    return name[:-len(PROVIDER_SUFFIX)] if name.endswith(PROVIDER_SUFFIX) else name


def clusters_named(changes: Iterable[Change]) -> bool:
    """Whether the objects are on more than one cluster (a MultiKueue site), so each is
    named with its cluster: the same namespace and name may be on every one."""
    return len({c.cluster for c in changes if c.cluster}) > 1


def to_change(step: dict[str, Any]) -> Change:
    op = step.get("op", "")
    if op in REPLACE_PARTS:
        op = "replace"
    op = FOLDED.get(op, op)
    urn = step["urn"]
    parsed = parse_urn(urn)
    fields, replace = _fields(step)
    return Change(op, urn, _state(step).get("type") or parsed.type, parsed.name, fields, replace, kube_object(step),
                  cluster_of(step))


def group_steps(steps: list[dict[str, Any]]) -> tuple[dict[str, Section], Section]:
    """Sections by entry name, and the Platform section, each with its steps' changes.

    The halves of a replacement (create-replacement, delete-replaced) are folded into one
    `replace` change per resource."""
    parents, entry_urns = _ownership(steps)
    entries: dict[str, Section] = {}
    platform = Section(PLATFORM)
    replaced: set[str] = set()
    for step in steps:
        change = to_change(step)
        if change.op in READS:
            continue
        if change.op == "replace":
            if change.urn in replaced:
                continue
            replaced.add(change.urn)
        owner = entry_of(change.urn, parents, entry_urns)
        if owner is None:
            section = platform
        else:
            section = entries.setdefault(owner[0], Section(owner[0], owner[1]))
        if change.op == SAME:
            section.same += 1
        else:
            section.changes.append(change)
    return entries, platform


def _count(sections: Iterable[Section]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for section in sections:
        for op, n in section.counts().items():
            totals[op] = totals.get(op, 0) + n
    return totals


def combine(previews: list[dict[str, Any]]) -> dict[str, Any]:
    """The previews of a stack's Pulumi stacks (the stack and its entry stacks,
    docs/entry-stacks.md) as one: their steps, diagnostics and policy violations, each
    change count summed."""
    if len(previews) == 1:
        return previews[0]
    merged: dict[str, Any] = {"steps": [], "diagnostics": [], "policyViolations": [], "changeSummary": {}}
    for preview in previews:
        for key in ("steps", "diagnostics", "policyViolations"):
            merged[key] += preview.get(key) or []
        for op, count in (preview.get("changeSummary") or {}).items():
            merged["changeSummary"][op] = merged["changeSummary"].get(op, 0) + count
    return merged


def summarise(preview: dict[str, Any], stack: Optional[str] = None, log: str = "") -> Summary:
    """The summary of one `pulumi preview --json` document (and the `--diff` log, for the
    policy violations)."""
    steps = [s for s in preview.get("steps") or [] if s.get("urn")]
    entries, platform = group_steps(steps)
    if stack is None:
        stack = parse_urn(steps[0]["urn"]).stack if steps else "?"
    totals = {op: int(n) for op, n in (preview.get("changeSummary") or {}).items() if n}
    if not totals:
        totals = _count([*entries.values(), platform])
    diagnostics = [
        {"severity": str(d.get("severity", "")), "urn": str(d.get("urn", "")), "message": str(d.get("message", ""))}
        for d in preview.get("diagnostics") or []
        if d.get("severity") in ("error", "warning")
    ]
    violations = [
        {key: str(v.get(key, "")) for key in ("enforcementLevel", "policyPackName", "policyName", "resourceUrn", "urn", "message")}
        for v in preview.get("policyViolations") or []
    ] + violations_from_log(log)
    place_violations(violations, steps)
    sames_listed = any(s.get("op") == SAME and parse_urn(s["urn"]).type != "pulumi:pulumi:Stack" for s in steps) or not totals.get(SAME)
    return Summary(stack, totals, [entries[k] for k in sorted(entries)], platform, diagnostics, violations, sames_listed)


# How `pulumi preview --diff` prints a violation: the pack, level, policy and resource on
# one line (the policy's description glued on), the message on the lines after it.
_VIOLATION = re.compile(
    r"^\s*(?P<pack>[\w.-]+)@v\S+ \[(?P<level>[a-z-]+)\]\s+(?P<policy>\S+)\s+"
    r"\((?P<type>[^()\s]+): (?P<name>[^()]+)\)"
)


def violations_from_log(text: str) -> list[dict[str, str]]:
    """The policy violations in the log of `pulumi preview --diff`."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        match = _VIOLATION.match(line)
        if not match:
            continue
        message = []
        for following in lines[index + 1:]:
            if not following.strip() or following[0].isspace() or following.startswith(("error:", "Resources:")):
                break
            message.append(following.strip())
        found.append({
            "enforcementLevel": match["level"], "policyPackName": match["pack"], "policyName": match["policy"],
            "resourceType": match["type"], "resourceName": match["name"].strip(), "message": " ".join(message),
        })
    return found


def place_violations(violations: list[dict[str, str]], steps: list[dict[str, Any]]) -> None:
    """Set each violation's `entry` from the step of the resource it names (type and name)."""
    parents, entry_urns = _ownership(steps)
    by_resource: dict[tuple[str, str], str] = {}  # the first step of each (type, name)
    for step in steps:
        parsed = parse_urn(step["urn"])
        by_resource.setdefault((parsed.type, parsed.name), step["urn"])
    for violation in violations:
        urn = (violation.get("resourceUrn") or violation.get("urn")
               or by_resource.get((violation.get("resourceType"), violation.get("resourceName")), ""))
        owner = entry_of(urn, parents, entry_urns) if urn.startswith("urn:pulumi:") else None
        violation["entry"] = owner[0] if owner else PLATFORM
        if urn and not violation.get("resourceName"):
            violation["resourceName"] = parse_urn(urn).name if urn.startswith("urn:pulumi:") else ""


# --- Markdown --------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    text = _cell(text)
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def kind_of(type_token: str) -> str:
    """`kubernetes:batch/v1:Job` -> `Job`; other tokens (components, providers) stay whole."""
    if type_token.startswith("kubernetes:"):
        return type_token.rsplit(":", 1)[-1]
    return type_token


def op_label(op: str) -> str:
    symbol = OPS.get(op, ("?", op))[0]
    return f"`{symbol}` {op}"


TOTALS_ORDER = ("create", "update", "replace", "delete", "import", "read", "refresh", "discard")


def counts_text(counts: dict[str, int]) -> str:
    """`+` 9 to create, `~` 6 to update, ..., 77 unchanged (the engine's order)."""
    parts = [f"`{OPS[op][0]}` {counts[op]} {OPS[op][1]}" for op in TOTALS_ORDER if counts.get(op)]
    parts += [f"{counts[op]} {op}" for op in sorted(set(counts) - set(OPS) - {SAME}) if counts[op]]
    if counts.get(SAME):
        parts.append(f"{counts[SAME]} unchanged")
    return ", ".join(parts) if parts else "no changes"


def _fields_cell(change: Change) -> str:
    if not change.fields:
        return ""
    shown = [
        _code(f) + (" (replaces)" if change.op == "replace" and f in change.replace_fields else "")
        for f in change.fields[:MAX_FIELDS]
    ]
    more = len(change.fields) - MAX_FIELDS
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _table(changes: list[Change]) -> list[str]:
    order = {op: i for i, op in enumerate(OPS)}
    rows = sorted(changes, key=lambda c: (order.get(c.op, len(order)), c.type, c.name))
    lines = ["| op | kind | name | changed fields |", "|---|---|---|---|"]
    named = clusters_named(changes)
    lines += [f"| {op_label(c.op)} | {_code(kind_of(c.type))} | {_code(c.kube or c.name)}"
              f"{f' on {c.cluster}' if named and c.cluster else ''} | {_fields_cell(c)} |" for c in rows]
    return lines


def render(summary: Summary) -> str:
    """The markdown of a summary (ends with a newline)."""
    out = [f"## Preview of stack `{_cell(summary.stack)}`", ""]
    total = sum(summary.totals.values())
    out += [f"**Totals:** {counts_text(summary.totals)} ({total} resource{'' if total == 1 else 's'})", ""]
    if any(d["severity"] == "error" for d in summary.diagnostics):
        out += ["**The preview failed:** the errors are below and in the job log.", ""]

    if summary.policy_violations:
        out += ["### Policy violations", "", "| level | policy | entry | resource | message |", "|---|---|---|---|---|"]
        for v in sorted(summary.policy_violations, key=lambda v: (v.get("entry") == PLATFORM, v.get("entry", ""))):
            resource = " ".join(x for x in (kind_of(v.get("resourceType") or ""), v.get("resourceName") or "") if x)
            policy = "/".join(p for p in (v.get("policyPackName"), v.get("policyName")) if p)
            message = (v.get("message") or "").strip().splitlines()
            out.append(f"| {_cell(v.get('enforcementLevel') or '')} | {_code(policy)} | {_cell(v.get('entry', ''))} | "
                       f"{_code(resource) if resource else ''} | {_cell(message[0] if message else '')} |")
        out.append("")

    if summary.diagnostics:
        errors = sum(d["severity"] == "error" for d in summary.diagnostics)
        out += [f"### Diagnostics ({errors} errors, {len(summary.diagnostics) - errors} warnings)", "", "```text"]
        for d in summary.diagnostics:
            out += [line.replace("```", "'''") for line in d["message"].rstrip("\n").splitlines()]
        out += ["```", ""]

    changed = [s for s in summary.entries if s.changes]
    unchanged = [s for s in summary.entries if not s.changes]
    for section in changed:
        what = section.entry_type.rsplit(":", 1)[-1].lower() if section.entry_type else "entry"
        out += [f"### {what.capitalize()} `{_cell(section.title)}`: {counts_text(section.counts())}", ""]
        out += _table(section.changes) + [""]
    if unchanged:
        names = ", ".join(f"`{_cell(s.title)}` ({s.same})" for s in unchanged)
        out += [f"**Unchanged entries ({len(unchanged)}):** {names}", ""]

    platform = summary.platform
    out += [f"### {PLATFORM}: {counts_text(platform.counts())}", ""]
    if platform.changes:
        out += _table(platform.changes) + [""]
    if not summary.sames_listed:
        out += ["_Unchanged resources are counted in the totals only: run `pulumi preview --json --show-sames` "
                "to see them by entry._", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("previews", nargs="+", metavar="preview",
                        help="the output of `pulumi preview --json` (- for stdin); several: those of a stack's "
                             "Pulumi stacks (its entry stacks, docs/entry-stacks.md), summarised as one")
    parser.add_argument("--stack", help="the stack name for the heading (default: from the URNs)")
    parser.add_argument("--log", help="the output of `pulumi preview --diff`, for its policy violations")
    args = parser.parse_args(argv)
    log = ""
    if args.log:
        try:
            log = open(args.log, encoding="utf-8", errors="replace").read()
        except OSError as error:
            print(f"preview-summary: cannot read {args.log}: {error.strerror}", file=sys.stderr)
            return 2
    previews = []
    for name in args.previews:
        try:
            text = sys.stdin.read() if name == "-" else open(name, encoding="utf-8").read()
        except OSError as error:
            print(f"preview-summary: cannot read {name}: {error.strerror}", file=sys.stderr)
            return 2
        try:
            preview = json.loads(text)
        except json.JSONDecodeError as error:
            print(f"preview-summary: {name} is not the JSON of `pulumi preview --json`: {error}", file=sys.stderr)
            return 2
        if not isinstance(preview, dict):
            print(f"preview-summary: {name} is not the JSON of `pulumi preview --json`", file=sys.stderr)
            return 2
        previews.append(preview)
    sys.stdout.write(render(summarise(combine(previews), args.stack, log)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
