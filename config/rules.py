"""Validation rules as data: each pattern, bound and message written once.

The models and checks (config/models.py, config/names.py, config/checks.py) enforce them;
the JSON Schema generator (tools/schema.py) reads the same values, so what an editor
flags and what the program says cannot drift apart. Patterns are anchored and mean the
same to Python `re` and to ECMA-262 (editors' validators): ASCII classes, no named groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Rule:
    """A message, and the pattern and length bound it enforces when it has them."""

    message: str
    pattern: Optional[str] = None
    max_length: Optional[int] = None


# ---- names (config/names.py) -----------------------------------------------------------

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# The name part of a label key (after an optional `prefix/`).
LABEL_NAME = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"

# ---- single fields ---------------------------------------------------------------------

JSON_POINTER = Rule('not a JSON pointer (RFC 6901: it starts with "/")', pattern=r"^(?:/|$)")
ENV_VALUE = Rule("env values are strings or {valueFrom: {...}} (secretKeyRef, configMapKeyRef, fieldRef)")
CREDENTIAL_FILE = Rule('not a valid file name (letters, digits, "-", "_" and ".")',
                       pattern=r"^(?!\.\.?$)[-._a-zA-Z0-9]+$")
JOB_FILE_KEYS = Rule("a job file has jobs: and schedules:")

# ---- keys that go together (model validators; `if`/`then` in the schema) ---------------

GPU_POOL_NEEDS_GPU = Rule('role "gpu" needs gpu: {vendor: nvidia|amd, perNode: N}')
GPU_ONLY_ON_GPU_POOLS = Rule('gpu is only for role "gpu"')
VCLUSTER_ONLY_ON_GPU_POOLS = Rule('vcluster: true is only for role "gpu" (role "vcluster" implies it)')
KNS_NEEDS_IMAGE = Rule("enabled: true needs image (the JARVICE KNS scheduler image)")
INGRESS_NEEDS_DOMAIN = Rule("ingress: true needs jobsDomain (the host the Ingress serves)")
MOUNT_PATH_NEEDS_CREDENTIALS = Rule("credentialsMountPath is set but credentials lists no set")
GPU_RESOURCE_NEEDS_GPUS = Rule("gpuResource is set but gpus is 0")
WARM_UP_OR_PRIMER = Rule("set warmUpMinutes or primerSchedule, not both")
