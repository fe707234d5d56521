"""What a terminal shows of an engine run: one line per entry and per platform part.

`make up`, `make preview` (through kns_cli/engine_run.py) and `./kns preview` print this
instead of the engine's own output, which goes to a log file: the engine prints every
object it touches, and with `--diff` every changed field's old and new value (Kueue's
install alone is tens of thousands of lines of CRD schemas). Here an entry of stack config
(a Job or Schedule component) or a platform part (a component directly under the stack:
the cluster, a node pool, a scheduler, Kueue's install, the queues) is one line: what
happens to it, how many objects, and which objects change, named as the cluster names
them (`Kind namespace/name`) with the changed field paths. Unchanged entries and parts are
one line each, in all. Never a value: inputs may hold secrets. Grouping and naming are
those of scripts/preview-summary.py (what CI posts), loaded from there.

The lines are bounded: a header, one line per changed entry or part, two for unchanged
ones, the totals and the log's path, plus the policy violations and engine errors (docs/cli.md,
"What `make up` and `make preview` print").
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Optional, Sequence

from plan import identity, stacks

SUMMARY_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "preview-summary.py"
# The widest line printed; longer lists of objects end with "and N more".
WIDTH = 200
MAX_VIOLATIONS = 10
MAX_ERROR_LINES = 40
STACK_TYPE = "pulumi:pulumi:Stack"
# Platform parts as a reader says them; other component types by their own last word.
PART_NAMES = {
    identity.CLUSTER_TYPE: "cluster",
    identity.NODE_POOL_TYPE: "pool",
    identity.SYSTEM_NAMESPACE_TYPE: "system namespace",
    identity.PACKING_SCHEDULER_TYPE: "packing scheduler",
    identity.KNS_SCHEDULER_TYPE: "KNS scheduler",
    identity.KUEUE_TYPE: "Kueue",
    identity.QUEUES_TYPE: "queues",
}
ENTRY_WORDS = {identity.JOB_TYPE: "job", identity.SCHEDULE_TYPE: "schedule", identity.OLD_ENTRY_TYPE: "entry"}
# Most destructive first: a group's symbol is that of its most destructive change.
SEVERITY = ("delete", "replace", "update", "create", "import", "read", "discard")
# The engine's colour markup in event messages (`<{%fg 1%}>`, `<{%reset%}>`).
COLOUR = re.compile(r"<\{%[^%]*%\}>")


@functools.lru_cache(maxsize=None)
def summary_module() -> ModuleType:
    """scripts/preview-summary.py, the summary CI prints (a script, not a package)."""
    spec = importlib.util.spec_from_file_location("preview_summary", SUMMARY_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


# --- The engine's event log ---------------------------------------------------------------


@dataclass
class Events:
    """What one engine run's event log (`--event-log`, one JSON event per line) says."""

    planned: list[dict[str, Any]] = field(default_factory=list)  # the preview's steps
    applied: list[dict[str, Any]] = field(default_factory=list)  # the update's steps
    done: int = 0  # resources the update finished (its resource outputs events)
    violations: list[dict[str, str]] = field(default_factory=list)
    diagnostics: list[dict[str, str]] = field(default_factory=list)  # errors and warnings
    # The program's exports (the root stack's outputs), as the run computed them: a preview's
    # too, which the backend never stores (kns_cli/fullrun.py reads the platform's digests).
    stack_outputs: dict[str, Any] = field(default_factory=dict)

    def add(self, event: dict[str, Any]) -> None:
        pre = event.get("resourcePreEvent")
        if pre:
            step = step_of(pre.get("metadata") or {})
            if step:
                (self.planned if pre.get("planning") else self.applied).append(step)
        outputs = event.get("resOutputsEvent")
        if outputs and not outputs.get("planning"):
            self.done += 1
        if outputs and (outputs.get("metadata") or {}).get("type") == "pulumi:pulumi:Stack":
            state = (outputs.get("metadata") or {}).get("new") or {}
            self.stack_outputs = dict(state.get("outputs") or {})
        policy = event.get("policyEvent")
        if policy:
            violation = {key: str(policy.get(key, "")) for key in
                         ("enforcementLevel", "policyPackName", "policyName", "resourceUrn")}
            lines = strip_colour(str(policy.get("message", ""))).strip().splitlines()
            violation["message"] = " ".join(line.strip() for line in (lines[1:] or lines))
            self.violations.append(violation)
        diagnostic = event.get("diagnosticEvent")
        if diagnostic and diagnostic.get("severity") in ("error", "warning") and not diagnostic.get("ephemeral"):
            message = strip_colour(str(diagnostic.get("prefix", "")) + str(diagnostic.get("message", ""))).rstrip()
            self.diagnostics.append({"severity": diagnostic["severity"], "urn": str(diagnostic.get("urn", "")),
                                     "message": message})


def strip_colour(text: str) -> str:
    return COLOUR.sub("", text)


def step_of(metadata: dict[str, Any]) -> Optional[dict[str, Any]]:
    """A step of `pulumi preview --json`'s shape from an event's StepEventMetadata: the
    grouping of scripts/preview-summary.py reads that shape."""
    if not metadata.get("urn") or not metadata.get("op"):
        return None
    step: dict[str, Any] = {"op": metadata["op"], "urn": metadata["urn"]}
    for ours, theirs in (("oldState", "old"), ("newState", "new")):
        state = metadata.get(theirs) or {}
        step[ours] = {"type": state.get("type") or metadata.get("type"), "parent": state.get("parent", ""),
                      "inputs": state.get("inputs") or {}, "outputs": state.get("outputs") or {},
                      "provider": state.get("provider", "")}
    detailed = metadata.get("detailedDiff") or {}
    step["detailedDiff"] = {path: {"kind": (diff or {}).get("kind") or (diff or {}).get("diffKind", "")}
                            for path, diff in detailed.items()}
    step["diffReasons"] = list(metadata.get("diffs") or [])
    return step


def add_lines(events: Events, lines: Sequence[str]) -> Events:
    """`events` with what each line of an event log says (a line that is not a whole JSON
    event, such as the last line of a log still being written, says nothing)."""
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.add(event)
    return events


def read_events(text: str) -> Events:
    return add_lines(Events(), text.splitlines())


# --- Grouping -----------------------------------------------------------------------------


@dataclass
class Group:
    """An entry (`job train-resnet`) or a platform part (`pool a100`) and its changes."""

    label: str
    entry: bool
    changes: list = field(default_factory=list)  # preview-summary Changes, never `same`
    same: int = 0

    def counts(self) -> dict[str, int]:
        """Per op, as a CI summary section counts (the same fields, the same rule)."""
        return summary_module().Section.counts(self)

    @property
    def op(self) -> str:
        ops = {change.op for change in self.changes}
        return next((op for op in SEVERITY if op in ops), "same")


def is_object(type_token: str) -> bool:
    """A Kubernetes object or a provider: what is counted and listed. Components (the
    entries and parts themselves) only group them."""
    return type_token.startswith(("kubernetes:", "pulumi:providers:"))


def part_label(type_token: str, name: str) -> str:
    word = PART_NAMES.get(type_token) or type_token.rsplit(":", 1)[-1]
    return word if name in ("", word) else f"{word} {name}"


def group_steps(steps: Sequence[dict[str, Any]]) -> tuple[list[Group], list[Group]]:
    """(entries, platform parts), each sorted by label. A step belongs to the entry on its
    parent chain (preview-summary's rule), else to the component directly under the stack
    on its chain; an object directly under the stack (a provider) is a part of its own."""
    ps = summary_module()
    steps = [s for s in steps if s.get("urn") and ps.parse_urn(s["urn"]).type != STACK_TYPE]
    parents, entry_urns = ps._ownership(steps)
    stack_children = {}
    for step in steps:
        parsed = ps.parse_urn(step["urn"])
        if len(parsed.types) == 1:
            stack_children[step["urn"]] = part_label(parsed.type, parsed.name)
    entries: dict[str, Group] = {}
    parts: dict[str, Group] = {}
    replaced: dict[str, tuple[Group, int]] = {}  # the halves of a replacement, as one change
    for step in steps:
        change = ps.to_change(step)
        if change.op in ps.READS or not is_object(change.type):
            continue
        if change.urn in replaced and change.op == "replace":
            group, index = replaced[change.urn]
            first = group.changes[index]
            group.changes[index] = dataclasses.replace(first, fields=tuple(sorted({*first.fields, *change.fields})),
                                                       kube=first.kube or change.kube)
            continue
        owner = ps.entry_of(change.urn, parents, entry_urns)
        if owner is not None:
            label = f"{ENTRY_WORDS.get(owner[1], 'entry')} {owner[0]}"
            group = entries.setdefault(label, Group(label, True))
        else:
            top = change.urn
            seen = set()
            while parents.get(top) and ps.parse_urn(parents[top]).type != STACK_TYPE and top not in seen:
                seen.add(top)
                top = parents[top]
            parsed_top = ps.parse_urn(top)
            label = stack_children.get(top) or part_label(parsed_top.types[0], "" if len(parsed_top.types) > 1 else parsed_top.name)
            group = parts.setdefault(label, Group(label, False))
        if change.op == ps.SAME:
            group.same += 1
            continue
        if change.op == "replace":
            replaced[change.urn] = (group, len(group.changes))
        group.changes.append(change)
    return sorted(entries.values(), key=lambda g: g.label), sorted(parts.values(), key=lambda g: g.label)


# --- Rendering ------------------------------------------------------------------------------

VERBS = {"up": "Update", "preview": "Preview"}


def render_total(action: str, base: str, counted: dict[str, int], ran: int, skipped: int) -> str:
    """The one line after the summaries of a stack and its entry stacks: the objects of
    every stack that ran, with how many ran and were skipped."""
    objects = sum(counted.values())
    return (f"{VERBS.get(action, action.capitalize())} of stack {base} and its entry stacks, in all: "
            f"{counts_text(counted)} ({objects} object{'' if objects == 1 else 's'}; {ran} stack"
            f"{'' if ran == 1 else 's'} ran" + (f", {skipped} skipped as unchanged" if skipped else "") + ")\n")


def counts_text(counts: dict[str, int]) -> str:
    """`9 to create, 2 to replace, 6 unchanged` (the engine's order, no markup)."""
    ps = summary_module()
    parts = [f"{counts[op]} {ps.OPS[op][1]}" for op in ps.TOTALS_ORDER if counts.get(op)]
    if counts.get("same"):
        parts.append(f"{counts['same']} unchanged")
    return ", ".join(parts) if parts else "no changes"


def compact_fields(fields: Sequence[str]) -> str:
    """Field paths with their common prefix written once: `spec.{a, b.c}`."""
    if not fields:
        return ""
    if len(fields) == 1:
        return fields[0]
    first = fields[0]
    prefix = first[:next((i for i in range(len(first)) if any(i >= len(f) or f[i] != first[i] for f in fields)),
                         len(first))]
    prefix = prefix[:prefix.rfind(".") + 1] if "." in prefix else ""
    if not prefix:
        return ", ".join(fields)
    return prefix + "{" + ", ".join(f[len(prefix):] for f in fields) + "}"


def object_text(change: Any, named: bool = False) -> str:
    """`Kind namespace/name (fields)`; with `named` (a run on several clusters), `on
    <cluster>` after the name."""
    ps = summary_module()
    kind = "provider" if change.type.startswith("pulumi:providers:") else ps.kind_of(change.type)
    name = change.kube or change.name
    text = f"{kind} {name}" if kind != name else name
    if named and change.cluster:
        text += f" on {change.cluster}"
    if change.fields:
        text += f" ({compact_fields(change.fields)})"
    return text


def fit(head: str, items: Sequence[str], one: str, many: str, width: int = WIDTH) -> str:
    """`head` then as many items as fit in `width`, then "and N more <many>"."""
    line = head
    for index, item in enumerate(items):
        rest = len(items) - index - 1
        tail = f", and {rest} more {one if rest == 1 else many}" if rest else ""
        candidate = line + (", " if index else "") + item
        if len(candidate) + len(tail) > width and index:
            more = len(items) - index
            return f"{line}, and {more} more {one if more == 1 else many}"
        line = candidate
    return line


def group_line(group: Group, label_width: int, named: bool = False) -> str:
    ps = summary_module()
    symbol = ps.OPS.get(group.op, ("=",))[0]
    order = {op: i for i, op in enumerate(ps.OPS)}
    changes = sorted(group.changes, key=lambda c: (order.get(c.op, len(order)), c.type, c.kube or c.name))
    head = f"  {symbol:<2} {group.label:<{label_width}}  {counts_text(group.counts())}: "
    return fit(head, [("" if c.op == group.op else f"{c.op} ") + object_text(c, named) for c in changes],
               "object", "objects")


def unchanged_line(groups: Sequence[Group], one: str, many: str) -> list[str]:
    if not groups:
        return []
    count = sum(g.same for g in groups)
    head = f"  =  {len(groups)} {one if len(groups) == 1 else many} unchanged ({count} objects): "
    names = sorted(g.label.split(" ", 1)[-1] if g.entry else g.label for g in groups)
    return [fit(head, names, one, many)]


def totals(steps: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Objects per op of a run, as its summary's header counts them."""
    entries, parts = group_steps(steps)
    return dict(summary_module()._count([*entries, *parts]))


def render_run(action: str, stack: str, steps: Sequence[dict[str, Any]], violations: Sequence[dict[str, str]] = (),
               diagnostics: Sequence[dict[str, str]] = (), log: Optional[str] = None) -> str:
    """The lines printed after `make up` / `make preview` (ends with a newline)."""
    ps = summary_module()
    entries, parts = group_steps(steps)
    verb = VERBS.get(action, action.capitalize())
    counted = ps._count([*entries, *parts])
    objects = sum(counted.values())
    out = [f"{verb} of stack {stack}: {counts_text(counted)} ({objects} object{'' if objects == 1 else 's'})"]
    changed = [g for g in entries if g.changes]
    changed_parts = [g for g in parts if g.changes]
    width = max((len(g.label) for g in [*changed, *changed_parts]), default=0)
    named = ps.clusters_named(c for g in [*entries, *parts] for c in g.changes)
    if changed or entries:
        out += [f"Entries ({len(entries)}):"]
        out += [group_line(g, width, named) for g in changed]
        out += unchanged_line([g for g in entries if not g.changes], "entry", "entries")
    if parts:
        out += [f"Platform ({len(parts)} parts):"]
        out += [group_line(g, width, named) for g in changed_parts]
        out += unchanged_line([g for g in parts if not g.changes], "part", "parts")
    if violations:
        placed = [dict(v) for v in violations]
        ps.place_violations(placed, list(steps))
        out.append(f"Policy violations ({len(placed)}):")
        for v in placed[:MAX_VIOLATIONS]:
            urn = v.get("resourceUrn") or ""
            resource = ps.parse_urn(urn).name if urn.startswith("urn:pulumi:") else v.get("resourceName", "")
            out.append(f"  {v.get('enforcementLevel', '')} {v.get('policyName', '')} ({v.get('entry', '')}, "
                       f"{resource}): {v.get('message', '')}")
        if len(placed) > MAX_VIOLATIONS:
            out.append(f"  and {len(placed) - MAX_VIOLATIONS} more (in the log)")
    errors = [d for d in diagnostics if d["severity"] == "error"]
    warnings = [d for d in diagnostics if d["severity"] == "warning"]
    for title, found in (("Errors", errors), ("Warnings", warnings)):
        if not found:
            continue
        out.append(f"{title} ({len(found)}):")
        lines = [line for d in found for line in d["message"].splitlines() if line.strip()]
        out += ["  " + line for line in lines[:MAX_ERROR_LINES]]
        if len(lines) > MAX_ERROR_LINES:
            out.append(f"  and {len(lines) - MAX_ERROR_LINES} more lines (in the log)")
    if log:
        out.append(f"Engine output: {log} (VERBOSE=1 shows it here)")
    return "\n".join(out) + "\n"


def render_text(stack: str, steps: Sequence[dict[str, Any]], names: Iterable[str], others: int = 0) -> str:
    """`./kns preview`'s terminal table: per named entry, one aligned row per changed
    object (op, kind, namespace/name, fields)."""
    ps = summary_module()
    entries, _ = group_steps(steps)
    wanted = set(names)
    rows: list[tuple[str, str, str, str, str]] = []
    shown = [g for g in entries if g.label.split(" ", 1)[-1] in wanted]
    order = {op: i for i, op in enumerate(ps.OPS)}
    named = ps.clusters_named(c for g in shown for c in g.changes)
    for group in shown:
        for c in sorted(group.changes, key=lambda c: (order.get(c.op, len(order)), c.type, c.kube or c.name)):
            rows.append((group.label.split(" ", 1)[-1], ps.OPS.get(c.op, ("?",))[0] + " " + c.op,
                         ps.kind_of(c.type), (c.kube or c.name) + (f" on {c.cluster}" if named and c.cluster else ""),
                         compact_fields(c.fields)))
    totals = ps._count(shown)
    out = [f"Preview of stack {stack}, {len(shown)} {'entry' if len(shown) == 1 else 'entries'}: {counts_text(totals)}"]
    if rows:
        header = ("ENTRY", "OP", "KIND", "NAME", "CHANGED FIELDS")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
        for row in [header, *rows]:
            out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
        out = [line.rstrip() for line in out]
    unchanged = [g.label.split(" ", 1)[-1] for g in shown if not g.changes]
    if unchanged:
        out.append(f"Unchanged: {', '.join(unchanged)}")
    out.append(f"Not previewed: the platform and the {others} other {'entry' if others == 1 else 'entries'} stay as "
               f"the stack has them ({stacks.make_command('preview', stack)} previews the whole stack)")
    return "\n".join(out) + "\n"
