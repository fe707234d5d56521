"""Program cost per entry: the real program under Pulumi mocks against a baseline that
registers the same Kubernetes resources directly with pulumi-kubernetes (no components,
no validation, no planning), in the same process, at 300 and 1000 entries of which a
quarter are prescaled schedules, each its own expression. Every run of the program starts
from cold primer caches, as a fresh `pulumi preview` does. The three take turns, best of 3
each; ratios are of CPU time (this process's), with the wall-time ratios beside them."""

from __future__ import annotations

import sys

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime import settings

from common import measure_interleaved, recorded, synthetic_config, table, write
from chrono import prescale
from kns_testing.program import RecordingMocks, run_program

SIZES = [int(a) for a in sys.argv[1:]] or [300, 1000]
PRESCALED = 0.25


class Group(pulumi.ComponentResource):
    """A bare component, to measure what components themselves cost."""

    def __init__(self, kind: str, name: str, opts=None):
        super().__init__(kind, name, None, opts)


def baseline(config: dict, components: bool = False) -> int:
    """The same resources, registered straight from the raw config; with `components`, each
    entry's resources sit in two bare components, as the program's do (entry, namespace)."""
    mocks = RecordingMocks()
    settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project="kns-platform", stack="bench", preview=False)

    @pulumi.runtime.test
    def program():
        provider = k8s.Provider("kubernetes", render_yaml_to_directory="build/manifests/bench",
                                cluster_identifier="kns-platform/kns-bench")
        opts = pulumi.ResourceOptions(provider=provider)
        for pool in config["nodePools"]:
            for node in pool["nodes"]:
                k8s.core.v1.NodePatch(f"{pool['name']}.{node}", metadata={"name": node, "labels": {"kns.io/pool": pool["name"]}},
                                      spec={"taints": []}, opts=opts)
        for kind, entries in (("job", config["jobs"]), ("schedule", config["schedules"])):
            for entry in entries:
                name, ns = entry["name"], f"kns-{entry['name']}"
                opts = pulumi.ResourceOptions(provider=provider)
                if components:
                    outer = Group(f"bench:workload:{kind}", name, pulumi.ResourceOptions(providers=[provider]))
                    inner = Group("bench:workload:JobNamespace", name, pulumi.ResourceOptions(parent=outer))
                    opts = pulumi.ResourceOptions(parent=inner)
                labels = {"kns.io/job": name}
                meta = lambda n: {"name": n, "namespace": ns, "labels": labels}  # noqa: E731
                k8s.core.v1.Namespace(name, metadata={"name": ns, "labels": labels}, opts=opts)
                k8s.core.v1.LimitRange(f"{name}-defaults", metadata=meta("kns-defaults"),
                                       spec={"limits": [{"type": "Container", "default": {"cpu": "1"}}]}, opts=opts)
                k8s.core.v1.ResourceQuota(f"{name}-quota", metadata=meta("kns-quota"),
                                          spec={"hard": {"pods": "1", "requests.cpu": str(entry["cpu"])}}, opts=opts)
                k8s.core.v1.ServiceAccount(f"{name}-runner", metadata=meta("kns-runner"), opts=opts)
                k8s.rbac.v1.Role(f"{name}-runner", metadata=meta("kns-runner"),
                                 rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], opts=opts)
                k8s.rbac.v1.RoleBinding(f"{name}-runner", metadata=meta("kns-runner"),
                                        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kns-runner"},
                                        subjects=[{"kind": "ServiceAccount", "name": "kns-runner", "namespace": ns}], opts=opts)
                template = {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": name, "image": entry["image"], "resources": {"requests": {"cpu": str(entry["cpu"])}}}]}}
                if kind == "job":
                    k8s.batch.v1.Job(name, metadata=meta(name), spec={"template": template}, opts=opts)
                else:
                    k8s.batch.v1.CronJob(name, metadata=meta(name), spec={
                        "schedule": entry["schedule"], "jobTemplate": {"spec": {"template": template}}}, opts=opts)
                if components:
                    inner.register_outputs({"namespace": ns})
                    outer.register_outputs({"namespace": ns})

    program()
    return len(mocks.resources)


def main() -> None:
    rows, results = [], []
    for size in SIZES:
        config = synthetic_config(size, PRESCALED)
        registered = len(run_program(config, stack="bench").resources)  # imports, then cold caches each run

        def program():
            prescale.clear_caches(per_process=True)
            return run_program(config, stack="bench")

        runs = measure_interleaved({"program": program, "baseline": lambda: baseline(config),
                                    "grouped": lambda: baseline(config, components=True)})
        ours, base, grouped = runs["program"], runs["baseline"], runs["grouped"]
        ratio = ours["cpu_seconds"] / base["cpu_seconds"]
        results.append({"entries": size, "resources": registered, "program": ours, "baseline": base,
                        "baseline_with_components": grouped, "time_ratio": ratio,
                        "time_ratio_vs_components": ours["cpu_seconds"] / grouped["cpu_seconds"],
                        "wall_ratio": ours["seconds"] / base["seconds"],
                        "wall_ratio_vs_components": ours["seconds"] / grouped["seconds"],
                        "memory_ratio": ours["peak_mib"] / base["peak_mib"]})
        rows.append([size, registered, f"{ours['cpu_seconds']:.3f}", f"{base['cpu_seconds']:.3f}", f"{ratio:.2f}",
                     f"{grouped['cpu_seconds']:.3f}", f"{ours['cpu_seconds'] / grouped['cpu_seconds']:.2f}",
                     f"{ours['seconds'] / base['seconds']:.2f}", f"{ours['seconds'] / grouped['seconds']:.2f}",
                     f"{ours['peak_mib']:.1f}", f"{base['peak_mib']:.1f}", f"{1000 * ours['cpu_seconds'] / size:.2f}"])
    print(table(["entries", "resources", "program CPU s", "baseline CPU s", "ratio", "baseline+components CPU s",
                 "ratio", "wall ratio", "wall ratio (components)", "program MiB", "baseline MiB", "CPU ms/entry"], rows))
    print(f"written: {write('program_scaling', {'results': results})}")


if __name__ == "__main__":
    with recorded("program_scaling"):
        main()
