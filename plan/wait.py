"""The prescale wait: the first init container of a primed pod (pure, no Pulumi).

The CronJob controller names each Job `<cronjob>-<scheduled time in minutes since the
epoch>`, and the pod carries that name as a label. The script reads it through the
downward API, adds the lead in the schedule's wall-clock time (the zone's UTC offsets are
passed as a transition table, so busybox needs no tz database), sleeps until then and
exits, letting the workload container start. No service-account token, no API call. A
Job created by hand (no numeric suffix) or already past its start runs at once.
"""

from __future__ import annotations

import copy
import functools
from datetime import datetime, timedelta, timezone
from typing import Any

from chrono.cron import zone as time_zone
from config.podspec import WAIT_CONTAINER
from config.quantity import kind_for_resource, minimum, parse

NAME = WAIT_CONTAINER  # reserved in the pod: config/podspec.py
DEFAULT_IMAGE = "busybox:1.37"
# A fixed range keeps the manifest stable from one run to the next.
TRANSITIONS_FROM, TRANSITIONS_TO = 2020, 2060

SCRIPT = r"""
name=${JOB_NAME:-$JOB_NAME_LEGACY}
suffix=${name##*-}
case "$suffix" in
  ''|*[!0-9]*) echo "kns-wait: job '$name' has no scheduled time (started by hand): starting now"; exit 0 ;;
esac
offset_at() {
  o=0
  for t in $KNS_TZ_OFFSETS; do
    [ "${t%%:*}" -le "$1" ] && o=${t#*:}
  done
  echo "$o"
}
primed=$((suffix * 60))
wall=$((primed + $(offset_at $primed) + KNS_LEAD_SECONDS))
target=$((wall - $(offset_at $((wall - $(offset_at $primed))))))
now=$(date +%s)
if [ "$now" -ge "$target" ]; then
  echo "kns-wait: job '$name' was scheduled at $primed; start $target is $((now - target))s past: starting now"
  exit 0
fi
echo "kns-wait: job '$name' primed for $primed; holding $((target - now))s until the start at $target (epoch seconds)"
if [ $((target - now)) -gt 2 ]; then sleep $((target - now - 2)); fi
while [ "$(date +%s)" -lt "$target" ]; do sleep 0.1 2>/dev/null || sleep 1; done
echo "kns-wait: released at $(date +%s) for start $target"
""".strip()


@functools.lru_cache(maxsize=None)
def offsets(zone: str) -> str:
    """`epoch:offset` pairs (seconds) at which `zone`'s UTC offset changes, 2020 to 2060."""
    tz = time_zone(zone)
    moment = datetime(TRANSITIONS_FROM, 1, 1, tzinfo=timezone.utc)
    end = datetime(TRANSITIONS_TO, 1, 1, tzinfo=timezone.utc)

    def offset(t: datetime) -> int:
        return int(t.astimezone(tz).utcoffset().total_seconds())

    pairs = [f"0:{offset(moment)}"]
    current = offset(moment)
    step = timedelta(days=1)
    while moment < end:
        nxt = moment + step
        if offset(nxt) != current:
            low, high = moment, nxt
            while high - low > timedelta(minutes=1):
                mid = low + (high - low) / 2
                if offset(mid) == current:
                    low = mid
                else:
                    high = mid
            current = offset(high)
            pairs.append(f"{int(high.timestamp()) // 60 * 60}:{current}")
        moment = nxt
    return " ".join(pairs)


RESOURCES = {
    "requests": {"cpu": "10m", "memory": "16Mi", "ephemeral-storage": "1Mi"},
    "limits": {"cpu": "100m", "memory": "32Mi", "ephemeral-storage": "16Mi"},
}
# The wait reads its environment and the clock, writes nothing and needs no user: it runs as
# a numeric non-root user (busybox's own is root, so runAsNonRoot alone would be refused by
# the kubelet), with Pod Security `restricted` settings (docs/prescaling.md).
UID = 65532
SECURITY_CONTEXT = {
    "runAsNonRoot": True,
    "runAsUser": UID,
    "runAsGroup": UID,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def resources_under(maximum: dict[str, str]) -> dict[str, dict[str, str]]:
    """The wait's resources, kept under the namespace LimitRange max (the entry's own
    limits), which init containers must respect too."""
    out: dict[str, dict[str, str]] = {}
    for side, amounts in RESOURCES.items():
        out[side] = {
            key: minimum(value, maximum[key], kind_for_resource(key)) if key in maximum else value
            for key, value in amounts.items()
        }
    return out


def requests_within(requests: dict[str, str], pod: dict[str, Any]) -> dict[str, str]:
    """The wait's requests, each no more than what the rest of the pod asks of that resource
    (`pod`: the pod's requests without the wait, as quantities), and zero for what
    it asks none of. The wait runs before the workload, never beside it, so the pod then
    counts exactly what its own containers ask: the wait adds nothing a quota or a queue
    must hold (Kueue skips a zero request of a resource its queue does not name)."""
    out = {}
    for resource, amount in requests.items():
        kind = kind_for_resource(resource)
        ceiling = pod.get(resource)
        out[resource] = minimum(amount, ceiling, kind) if ceiling and parse(ceiling, kind) > 0 else "0"
    return out


def wait_container(lead_minutes: int, zone: str, image: str = DEFAULT_IMAGE,
                   maximum: dict[str, str] | None = None, pull_policy: str | None = None) -> dict[str, Any]:
    label = "metadata.labels['{}']"
    container: dict[str, Any] = {
        "name": NAME,
        "image": image,
        "command": ["sh", "-c", SCRIPT],
        "env": [
            {"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": label.format("batch.kubernetes.io/job-name")}}},
            {"name": "JOB_NAME_LEGACY", "valueFrom": {"fieldRef": {"fieldPath": label.format("job-name")}}},
            {"name": "KNS_LEAD_SECONDS", "value": str(lead_minutes * 60)},
            {"name": "KNS_TZ_OFFSETS", "value": offsets(zone)},
        ],
        "resources": resources_under(maximum or {}),
        "securityContext": copy.deepcopy(SECURITY_CONTEXT),
    }
    if pull_policy:  # the entry's imagePullPolicy, like its workload container's
        container["imagePullPolicy"] = pull_policy
    return container
