"""The Job as finally built, after `jsonOverrides`, checked before any resource exists.

Overrides may write anything a Job can hold, so the planner holds every Job (and each
CronJob's job template, seen as the Job it makes) to the same rules as a raw `podSpec`,
and to what the program guarantees about the objects it builds:

- its **shape** (config/podspec.py: the Kubernetes schema of a batch/v1 Job), then the
  **pod rules** on its pod (at least one container, a Job's restart policy, images,
  resources, names, mounts);
- what the program **keeps**: the object's name and namespace, `ttlSecondsAfterFinished`,
  `automountServiceAccountToken: false`, every node-selector pair of the pod's placement,
  the program's own labels, a queued Job's queue label and `suspend`, and the pod's
  `karpenter.sh/do-not-disrupt` stay as built; overrides add no toleration (the pod
  tolerates no more than its pool, the entry's `tolerations` and its `podSpec`'s) and
  remove none of its pool's (the pod is placed there), and they change no GPU
  request (GPUs come from `gpus` or the `podSpec`, which place the pod and are held to
  `maxGpus`) and no device claim (`gpu`, docs/gpus.md: the quota and the queue count them).

Each problem is reported under the override that wrote where it is (the last one whose
pointer is that place, inside it or around it), as a JSON pointer into the Job.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Optional, Sequence

from config import names, podspec, pointer, resolve, rules
from config.errors import Problem, at
from config.models import NodePool

POD = ("spec", "template", "spec")
_MISSING = object()
# Labels the program sets on every Job, CronJob and pod template it builds (plan/manifests.py).
PROGRAM_LABELS = (names.LABEL_JOB, names.LABEL_OWNER, names.LABEL_CLUSTER, *names.MANAGED_BY)


def job_view(manifest: dict[str, Any]) -> dict[str, Any]:
    """The object overrides write to: a Job, or the Job a CronJob's template makes."""
    if manifest.get("kind") != "CronJob":
        return manifest
    template = manifest["spec"]["jobTemplate"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": template.get("metadata", {}),
            "spec": template.get("spec")}


def pod_of(manifest: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a built Job or CronJob (the one its Jobs run)."""
    return job_view(manifest)["spec"]["template"]["spec"]


def _at(document: Any, loc: Sequence[Any]) -> Any:
    for step in loc:
        if isinstance(document, dict) and step in document:
            document = document[step]
        elif isinstance(document, list) and isinstance(step, int) and step < len(document):
            document = document[step]
        else:
            return _MISSING
    return document


def kept(before: Mapping[str, Any], placement: str) -> list[tuple[tuple, Any, str]]:
    """(location, value, what sets it) of everything the program keeps as it built it."""
    out: list[tuple[tuple, Any, str]] = []
    for key in ("name", "namespace"):
        if _at(before, ("metadata", key)) is not _MISSING:
            out.append((("metadata", key), before["metadata"][key], "the entry's name"))
    if _at(before, ("spec", "ttlSecondsAfterFinished")) is not _MISSING:
        out.append((("spec", "ttlSecondsAfterFinished"), before["spec"]["ttlSecondsAfterFinished"], "ttlHours"))
    if _at(before, POD + ("automountServiceAccountToken",)) is False:
        out.append((POD + ("automountServiceAccountToken",), False,
                    "the program (the pod gets no service-account token)"))
    selector = _at(before, POD + ("nodeSelector",))
    for key, value in (selector if isinstance(selector, dict) else {}).items():
        out.append((POD + ("nodeSelector", key), value, "pool" if key == names.LABEL_POOL else placement))
    for where in (("metadata", "labels"), ("spec", "template", "metadata", "labels")):
        labels = _at(before, where)
        for key in PROGRAM_LABELS:
            if isinstance(labels, dict) and key in labels:
                out.append((where + (key,), labels[key], "the program (its own labels)"))
    # What the queue and the autoscaler rely on: the Job stays in its queue and suspended
    # until Kueue admits it, and a pod on an autoscaled pool keeps its node.
    if _at(before, ("metadata", "labels", names.QUEUE_LABEL)) is not _MISSING:
        out.append((("metadata", "labels", names.QUEUE_LABEL), before["metadata"]["labels"][names.QUEUE_LABEL],
                    "queue (the Job waits in its queue)"))
    if _at(before, ("metadata", "labels", names.PRIORITY_LABEL)) is not _MISSING:
        out.append((("metadata", "labels", names.PRIORITY_LABEL), before["metadata"]["labels"][names.PRIORITY_LABEL],
                    "priority (Kueue orders and preempts the Job by it)"))
    if _at(before, ("spec", "suspend")) is True:
        out.append((("spec", "suspend"), True, "queue (Kueue starts the Job when its queue admits it)"))
    for key, value in names.DO_NOT_DISRUPT.items():
        where = ("spec", "template", "metadata", "annotations", key)
        if _at(before, where) == value:
            out.append((where, value, "the program (the pod keeps the node its autoscaled pool made for it)"))
    for key in rules.TOPOLOGY_ANNOTATIONS.values():
        where = ("spec", "template", "metadata", "annotations", key)
        if _at(before, where) is not _MISSING:
            out.append((where, _at(before, where), "topology (Kueue places the workers by it)"))
    # A distributed entry's Job: N indexed workers, named under its Service, failing together.
    if _at(before, ("spec", "completionMode")) == "Indexed":
        for key in ("completionMode", "completions", "parallelism", "backoffLimit", "backoffLimitPerIndex"):
            if _at(before, ("spec", key)) is not _MISSING:
                out.append((("spec", key), before["spec"][key], "workers"))
        if _at(before, POD + ("subdomain",)) is not _MISSING:
            out.append((POD + ("subdomain",), before["spec"]["template"]["spec"]["subdomain"],
                        "workers (the Service that names the workers)"))
    return out


def _worker_env_problems(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Problem]:
    """The worker variables of each container, compared by name (overrides may add env)."""
    found: list[Problem] = []
    containers = _at(before, POD + ("containers",))
    for index, container in enumerate(containers if isinstance(containers, list) else []):
        mine = {e["name"]: e for e in container.get("env") or [] if e.get("name") in rules.WORKER_ENV}
        later = _at(after, POD + ("containers", index, "env"))
        theirs: dict[Any, Any] = {}
        for item in later if isinstance(later, list) else []:
            if isinstance(item, dict) and item.get("name") in mine:
                theirs.setdefault(item["name"], []).append(item)
        changed = [name for name, item in mine.items() if theirs.get(name) != [item]]
        if changed:
            found.append(at(POD + ("containers", index, "env"),
                            f"{', '.join(changed)}: set by workers for every worker; overrides may not change them"))
    return found


def _kept_problems(before: Mapping[str, Any], after: Mapping[str, Any], placement: str,
                   tolerations_from: str, pool: Optional[NodePool]) -> list[Problem]:
    """What the program keeps, against the Job after overrides. A message shows what the
    program set, never what an override wrote: that may be a secret pasted in the wrong place."""
    found: list[Problem] = _worker_env_problems(before, after)
    for loc, value, source in kept(before, placement):
        got = _at(after, loc)
        if got != value:
            removed = " (they remove it)" if got is _MISSING else ""
            found.append(at(loc, f"is {podspec.show(value)}, set by {source}; overrides may not change it{removed}"))
    allowed = _at(before, POD + ("tolerations",))
    allowed = allowed if isinstance(allowed, list) else []
    tolerations = _at(after, POD + ("tolerations",))
    tolerations = tolerations if isinstance(tolerations, list) else []
    for toleration in resolve.tolerations_for(pool) if pool is not None else []:
        if toleration not in tolerations:
            value = f"={toleration['value']}" if toleration["value"] else ""
            taint = f"{toleration['key']}{value}:{toleration['effect']}"
            found.append(at(POD + ("tolerations",), f'{taint} is a taint of pool "{pool.name}", which the pod is placed '
                                                    "on; overrides may not remove its toleration"))
    for index, toleration in enumerate(tolerations):
        if toleration not in allowed:
            found.append(at(POD + ("tolerations", index),
                            f"is not a toleration the pod has from {tolerations_from}; overrides may not add tolerations"))
    for loc, was, now in _claim_changes(before, after):
        found.append(at(loc, f"is {podspec.show(was)}, the pod's GPU device claim (gpu or gpus, docs/gpus.md), which "
                             "the quota and the queue count; overrides may not change it"))
    gpus_before, gpus_after = podspec.gpu_totals(_at(before, POD)), podspec.gpu_totals(_at(after, POD))
    if gpus_before != gpus_after:
        def listed(totals: Mapping[str, Any]) -> str:
            return ", ".join(f"{r} {format(a.normalize(), 'f')}" for r, a in sorted(totals.items())) or "none"

        found.append(at(POD + ("containers",), f"they change the pod's GPUs from {listed(gpus_before)} to "
                                               f"{listed(gpus_after)}; GPUs come from gpus (or the podSpec), "
                                               "which place the pod on a GPU pool and are held to maxGpus"))
    return found


def _claim_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[tuple[tuple, Any, Any]]:
    """(location, built, overridden) of the pod's device claims and each app container's
    use of them, where overrides changed them (a missing one as [])."""
    out = []
    places = [POD + ("resourceClaims",)]
    for job in (before, after):
        containers = _at(job, POD + ("containers",))
        places += [POD + ("containers", i, "resources", "claims")
                   for i in range(len(containers) if isinstance(containers, list) else 0)]
    for loc in dict.fromkeys(places):
        was, now = _at(before, loc), _at(after, loc)
        was, now = ([] if was is _MISSING else was), ([] if now is _MISSING else now)
        if was != now:
            out.append((loc, was, now))
    return out


def problems(before: Mapping[str, Any], after: Mapping[str, Any], placement: str, tolerations_from: str,
             pool: Optional[NodePool] = None) -> list[Problem]:
    """Everything wrong with the Job `after` (built, then overridden) given `before` (built)."""
    found = podspec.shape_problems(after, "@" + podspec.SHAPES["roots"]["Job"])
    pod = _at(after, POD)
    if isinstance(pod, dict) and not any(p.loc[:len(POD)] == POD[:len(p.loc)] for p in found):
        # the pod's own shape is right: its rules can read it
        found += [at(POD + p.loc, _value_left_out(p.message, _at(pod, p.loc))) for p in podspec.pod_problems(pod)]
    if found:
        return found
    return _kept_problems(before, after, placement, tolerations_from, pool)


def _value_left_out(message: str, value: Any) -> str:
    """A pod rule's `message` without the value at its place it starts with (`"x" is not
    an image reference`): what the program built passed the rules, so an override wrote
    it, and what an override writes may be a secret."""
    for shown in (podspec.show(value), f'"{value}"' if isinstance(value, str) else repr(value)):
        if message.startswith(shown + " "):
            return message[len(shown) + 1:]
    return message


def _related(path: str, loc: Sequence[Any]) -> bool:
    """Whether an override's pointer is the place `loc`, inside it or around it."""
    try:
        tokens = pointer.tokens(path)
    except pointer.PointerError:
        return False
    return all(t == str(s) or (t == "-" and isinstance(s, int)) for t, s in zip(tokens, loc))


def attribute(found: list[Problem], overrides: Sequence[tuple[str, Any]]) -> list[Problem]:
    """Each problem of the built object at the entry's field it comes from: the last
    override related to its place, else all of `jsonOverrides` (or the entry itself when it
    has none), its place in the object a JSON pointer in the message."""
    out = []
    for problem in found:
        where = next((label for label, o in reversed(overrides) if _related(o.path, problem.loc)),
                     "jsonOverrides" if overrides else "")
        out.append(Problem(where, f"{podspec.pointer(problem.loc)}: {problem.message}"))
    return out


# The deadlines that count from the moment a prescaled run's pod starts waiting, and the
# entry field that sets each when no override does.
DEADLINES = ((("spec", "activeDeadlineSeconds"), "the Job", "activeDeadlineSeconds"),
             (POD + ("activeDeadlineSeconds",), "the pod", "podSpec.activeDeadlineSeconds"))


def deadline_problems(after: Mapping[str, Any], lead_minutes: int,
                      overrides: Sequence[tuple[str, Any]]) -> list[Problem]:
    """A prescaled run's Job or pod deadline that ends it while the wait container holds it:
    both count from the warm-up, `lead_minutes` before the workload starts (docs/prescaling.md)."""
    lead = lead_minutes * 60
    out = []
    for loc, what, field in DEADLINES:
        value = _at(after, loc)
        if isinstance(value, int) and not isinstance(value, bool) and value <= lead:
            override = next((label for label, o in reversed(overrides) if _related(o.path, loc)), None)
            where = f"{podspec.pointer(loc)}: " if override else ""
            out.append(Problem(override or field, f"{where}{value} s ends {what} during its warm-up: the wait holds it "
                                                  f"{lead} s (the {lead_minutes}-minute lead) before the workload starts, "
                                                  "and the deadline counts from the warm-up; give more than "
                                                  f"{lead} s plus the run's own time"))
    return out


def check(manifest: dict[str, Any], before: Mapping[str, Any], overrides: Sequence[tuple[str, Any]],
          placement: str, tolerations_from: str, lead_minutes: Optional[int] = None,
          pool: Optional[NodePool] = None) -> list[Problem]:
    """The problems of one built object (a Job or a CronJob) after its overrides; for a
    prescaled run (`lead_minutes`), its deadlines against the warm-up too. `pool`: the
    pool the pod is placed on, whose tolerations it keeps."""
    after = job_view(manifest)
    found = attribute(problems(before, after, placement, tolerations_from, pool), overrides)
    if lead_minutes is not None and not found:
        found += deadline_problems(after, lead_minutes, overrides)
    return found


def snapshot(manifest: dict[str, Any]) -> dict[str, Any]:
    """The object overrides will write to, as built (a deep copy)."""
    return copy.deepcopy(job_view(manifest))


def describe_placement(pod_spec_entry: bool) -> str:
    return "the podSpec's nodeSelector" if pod_spec_entry else "placement or nodeSelector"


def describe_tolerations(pool: Optional[str], pod_spec_entry: bool) -> str:
    sources = [f'pool "{pool}"'] if pool else []
    sources.append("the entry's tolerations")
    if pod_spec_entry:
        sources.append("its podSpec")
    return " and ".join(filter(None, [", ".join(sources[:-1]), sources[-1]]))
