"""`kns:network` (contract section 18, docs/network.md): the checks that need more than the
section itself (the entries, their namespaces, the cluster). The model is
config/models.py's `Network`; the policies it becomes are plan/network.py's.
"""

from __future__ import annotations

from typing import Mapping, Optional

from . import names, rules
from .errors import Problems
from .models import Cluster, Network, Workload

# What a site's platform pods serve to callers that are not entries; without the cluster's
# pod addresses, "outside the cluster" is every address (docs/network.md, "The platform's
# own namespaces").
POD_NETWORK_UNSET = ("kns:network.podNetwork is not set: the platform's own pods admit callers outside the cluster "
                     "by address (the API server calling Kueue's webhooks), and a network plugin that matches pod "
                     "addresses by ipBlock then lets entries' pods reach those ports too; set it to the cluster's "
                     "pod CIDRs (docs/network.md)")


def check_network(network: Network, entries: list[Workload], cluster: Optional[Cluster], paths: Mapping[str, str],
                  problems: Problems, serves: bool) -> list[str]:
    """Every problem of `kns:network` against the entries and the cluster; the warnings.
    `serves`: the platform runs pods that serve callers (Kueue, the KNS scheduler)."""
    warnings: list[str] = []
    for entry in entries:
        if entry.allow_from and not network.isolated:
            problems.add(f"{paths[entry.name]}.allowFrom", rules.NETWORK_OFF_SETTING.message)
    if not network.isolated or cluster is None:
        return warnings
    entry_namespaces = {names.namespace_name(cluster.namespace_prefix, e.name): e.name for e in entries}
    for i, source in enumerate(network.allow_from):
        if source.namespace in entry_namespaces:
            problems.add(f"kns:network.allowFrom[{i}].namespace",
                         f'"{source.namespace}" is the namespace of entry {entry_namespaces[source.namespace]}: '
                         f"{rules.NETWORK_ENTRY_SOURCE.message}")
    if serves and not network.pod_network:
        warnings.append(POD_NETWORK_UNSET)
    return warnings
