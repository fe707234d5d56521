"""Validation rules as data: each pattern, bound and message written once.

The models and checks (config/models.py, config/names.py, config/checks.py) enforce them;
the JSON Schema generator (tools/schema.py) reads the same values, so what an editor
flags and what the program says cannot drift apart. Patterns are anchored and mean the
same to Python `re` and to ECMA-262 (editors' validators): ASCII classes, no named groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from chrono import calendar


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

# An environment variable name as every supported Kubernetes version accepts it (a C
# identifier, plus "-" and ".").
ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"

# ---- bounds the API server holds numbers to --------------------------------------------

INT32_MAX = 2**31 - 1
ANNOTATIONS_MAX_BYTES = 256 * 1024  # keys and values of one object, together

# ---- single fields ---------------------------------------------------------------------

JSON_POINTER = Rule('not a JSON pointer (RFC 6901: it starts with "/")', pattern=r"^(?:/|$)")
ENV_VALUE = Rule("env values are strings or {valueFrom: {...}} (secretKeyRef, configMapKeyRef, fieldRef)")
CREDENTIAL_FILE = Rule('not a valid file name (letters, digits, "-", "_" and ".")',
                       pattern=r"^(?!\.\.?$)[-._a-zA-Z0-9]+$")
JOB_FILE_KEYS = Rule("a job file has jobs: and schedules:")
# A URL is written in plain text to the plan, the state and the outputs: what may be a
# credential in it (user information before the host, a query) is refused, never repeated.
URL_CREDENTIALS = Rule("may hold a credential (user:password@ or token@ before the host, or a query); a URL is "
                       "kept in plain text in the plan and the state, so it is refused, and not repeated here")
KEYCLOAK_URL_CREDENTIALS = Rule("the Keycloak client secret is kns:keycloakClientSecret, a secret "
                                "(`pulumi config set --secret kns:keycloakClientSecret ...`)")

# ---- keys that go together (model validators; `if`/`then` in the schema) ---------------

GPU_POOL_NEEDS_GPU = Rule('role "gpu" needs gpu: {vendor: nvidia|amd, perNode: N}')
GPU_ONLY_ON_GPU_POOLS = Rule('gpu is only for role "gpu"')
VCLUSTER_ONLY_ON_GPU_POOLS = Rule('vcluster: true is only for role "gpu" (role "vcluster" implies it)')
KNS_NEEDS_IMAGE = Rule("enabled: true needs image (the JARVICE KNS scheduler image)")
INGRESS_NEEDS_DOMAIN = Rule("ingress: true needs jobsDomain (the host the Ingress serves)")
NAMESPACE_NO_WORKLOAD = Rule("cannot be set: type namespace runs no workload")
POD_SPEC_VERBATIM = Rule("cannot be set beside podSpec, which is used verbatim")
MOUNT_PATH_NEEDS_CREDENTIALS = Rule("credentialsMountPath is set but credentials lists no set")
GPU_RESOURCE_NEEDS_GPUS = Rule("gpuResource is set but gpus is 0")

# ---- GPUs as devices: DRA (docs/gpus.md) -----------------------------------------------

# A MIG profile as NVIDIA's DRA driver publishes it in a device's `profile` attribute
# (`1g.10gb`, `3g.40gb`, `1g.10gb+me`, `1c.3g.40gb`).
MIG_PROFILE = Rule('not a MIG profile such as "1g.10gb" or "3g.40gb+me"',
                   pattern=r"^([1-9]c\.)?[1-9]g\.[1-9][0-9]*gb(\+[a-z]+)?$")
# The GPU product name the driver publishes in `productName` ("NVIDIA A100-SXM4-80GB").
GPU_MODEL = Rule("a GPU product name as the driver publishes it (letters, digits, spaces, - _ . ( ))",
                 pattern=r"^[A-Za-z0-9][-A-Za-z0-9 _.()]*$", max_length=128)
# A MIG GPU holds at most seven instances (NVIDIA's MIG user guide).
MIG_PER_GPU_MAX = 7
DRA_FIELDS_NEED_DRA = Rule("driver, model, partitions and sharing are for allocation: dra")
DRA_NEEDS_DRIVER = Rule("allocation: dra needs driver (the DRA driver's name, e.g. gpu.nvidia.com)")
DRA_NEEDS_NVIDIA = Rule("allocation: dra reads the attributes NVIDIA's DRA driver publishes: vendor must be nvidia")
DRA_NEEDS_STATIC_POOL = Rule("allocation: dra needs a static pool (nodes): Karpenter does not provision nodes for "
                             "DRA claims by default (docs/gpus.md)")
# resource.k8s.io/v1 (DRA GA) is served from Kubernetes 1.34.
DRA_MIN_MINOR = 34
KUBERNETES_VERSION = Rule('not a Kubernetes version such as "1.36" or "v1.36.1"',
                          pattern=r"^v?1\.[0-9]+(\.[0-9]+)?$")
GPU_ASK_EXCLUSIVE = Rule("set gpus or gpu: {...}, not both")
GPU_RESOURCE_NOT_WITH_GPU = Rule("gpuResource is for extended-resource GPUs (gpus: N); gpu: {...} asks devices of "
                                 "a DRA pool")
SHARED_IS_ONE_GPU = Rule("shared: true shares one whole GPU: it takes neither partition nor a count above 1")
# Kueue admits Jobs whose claims come from ResourceClaimTemplates only; a claim shared by
# several pods is a ResourceClaim (docs/gpus.md).
SHARED_NOT_QUEUED = Rule("shared: true makes one ResourceClaim the entry's pods share, which Kueue cannot admit "
                         "(it counts ResourceClaimTemplates only): drop queue or shared")
# Kueue's Configuration holds at most 16 device class mappings of at most 8 classes each.
KUEUE_DEVICE_MAPPINGS_MAX = 16
KUEUE_CLASSES_PER_MAPPING_MAX = 8
WARM_UP_OR_PRIMER = Rule("set warmUpMinutes or primerSchedule, not both")

# ---- distributed entries: `workers` (docs/distributed.md) -------------------------------

WORKERS_MAX = 1000
LEADER_PORT_DEFAULT = 29500  # PyTorch's MASTER_PORT default
WORKERS_DERIVE = Rule("workers sets parallelism and completions (both N); leave them out")
WORKERS_ONLY = Rule("is only for a distributed entry (workers 2 or more)")
WORKERS_BACKOFF = Rule("a failed worker fails the whole Job, so backoffLimit does not apply; with "
                       "restartWorkers: individually it is each worker's retries")
WORKERS_POD_NAMES = Rule("the program names each worker (hostname <entry>-<index>) under the entry's Service "
                         "(subdomain <entry>); a podSpec may not set them")
WAIT_FOR_PODS_READY = Rule('a duration of Kueue\'s (numbers with a unit s, m or h: "5m", "1h30m"), more than 0',
                           pattern=r"^([0-9]+(s|m|h))+$")
# kns:queueing.multiKueue (the manager's Kueue; Kueue's apis/config/v1beta2 MultiKueue:
# defaults gcInterval 1m, workerLostTimeout 15m; validation refuses negative ones).
WORKER_LOST_TIMEOUT = Rule('a duration of Kueue\'s (numbers with a unit s, m or h: "15m", "1h30m"), more than 0',
                           pattern=r"^([0-9]+(s|m|h))+$")
GC_INTERVAL = Rule('a duration of Kueue\'s (numbers with a unit s, m or h: "1m", "30s"); "0s" turns MultiKueue\'s '
                   'garbage collection off', pattern=r"^([0-9]+(s|m|h))+$")
MULTIKUEUE_NEEDS_INSTALL = Rule("configures the Kueue the program installs (install: true); for your own Kueue set "
                                "multiKueue in its configuration")
DRAIN_LEAVES_QUEUE = Rule("its Jobs would wait on the manager with no word: keep a worker serving the queue, or "
                          "hold the queue too (hold: true)")
MULTIKUEUE_NEEDS_SITE = Rule("configures the manager of a MultiKueue site; this stack has no kns:workers")
WAIT_NEEDS_INSTALL = Rule("configures the Kueue the program installs (install: true); for your own Kueue set "
                          "waitForPodsReady in its configuration")
# kns:queueing.fairSharing: Kueue's fairSharing and admissionFairSharing (apis/config/v1beta2;
# docs/queueing.md, "Fair share").
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
USAGE_HALF_LIFE = Rule('a duration of Kueue\'s (numbers with a unit s, m or h: "168h", "24h"), more than 0 '
                       "(a half-life of 0 forgets all past usage: admission fair sharing would do nothing)",
                       pattern=r"^([0-9]+(s|m|h))+$")
# A week. Kueue has no default: left out, its half-life is 0 and admission fair sharing
# silently orders nothing (kubernetes-sigs/kueue#11134), so the program always sets one.
USAGE_HALF_LIFE_DEFAULT = "168h"
USAGE_SAMPLING_INTERVAL = Rule('a duration of Kueue\'s (numbers with a unit s, m or h: "5m", "1m"), more than 0',
                               pattern=r"^([0-9]+(s|m|h))+$")
FAIR_SHARING_NEEDS_INSTALL = Rule("configures the Kueue the program installs (install: true); for your own Kueue set "
                                  "fairSharing and admissionFairSharing in its configuration")
USAGE_BASED_NEEDS_ADMISSION = Rule("orders the queue's entries by their past usage, which Kueue counts only with "
                                   "admission fair sharing on: set kns:queueing.fairSharing.admission")
ADMISSION_MODE_USAGE_BASED = "usageBased"

# ---- budgets: kns:budgets (docs/budgets.md) ----------------------------------------------

BUDGET_HOURS_MAX = 10**12  # resource-hours of one limit
BUDGET_WARN_AT_DEFAULT = (80, 95)  # percent of a limit at which the budget's queues say so
BUDGET_PERIOD_ONE = Rule("is either recurring (reset, timeZone) or one grant (start, end)")
BUDGET_GRANT_ZONE = Rule("applies to a recurring reset; a grant's start and end carry their own offsets")
BUDGETS_NEED_QUEUEING = Rule("a budget limits what Kueue admits to its queues: set kns:queueing.enabled: true")
# How often a budget's counter runs (its CronJob, `*/N * * * *`): minutes that divide an hour,
# so the runs are evenly spaced.
BUDGET_COUNT_EVERY = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)
BUDGET_COUNT_EVERY_DEFAULT = 5
BUDGET_TTL_COUNTED = Rule("a finished Job's Workload must outlive the counting interval, or a Job that ends and is "
                          "removed between two counts is never counted: raise ttlHours or lower the budget's "
                          "countEveryMinutes")
BUDGET_RESOURCE_COUNTED = Rule("a budget counts the hours of what its queues admit, so limit a resource their quota "
                               "covers")
TOPOLOGY_LEVELS_MAX = 16  # Kueue's Topology CRD
TOPOLOGY_LAST_LEVEL = "kubernetes.io/hostname"
TOPOLOGY_ENDS_WITH_HOST = Rule(f"the levels go from the coarsest to the node: the last is {TOPOLOGY_LAST_LEVEL}")
TOPOLOGY_ON_AUTOSCALED = Rule("Kueue counts topology capacity on existing Ready nodes only, so an autoscaled "
                              "pool cannot declare topology")
TOPOLOGY_NEEDS_QUEUE = Rule("needs a queue: Kueue places the workers by topology only for the Jobs it admits")
TOPOLOGY_NEEDS_POOL = Rule("needs a pool that declares topology.levels (Kueue places within the pool's domains)")
TOPOLOGY_NEEDS_TOPOLOGY_FLAVOR = Rule("Kueue admits a Job that asks topology only on a flavor that names a "
                                      "Topology, so it never admits this one")
# The pod-set annotations Kueue's Topology Aware Scheduling reads, by `topology.mode`.
TOPOLOGY_ANNOTATIONS = {"required": "kueue.x-k8s.io/podset-required-topology",
                        "preferred": "kueue.x-k8s.io/podset-preferred-topology"}
# What every worker's containers get (docs/distributed.md): not the entry's to set.
WORKER_ENV = ("KNS_WORKERS", "KNS_WORKER_INDEX", "KNS_JOB_NAME", "KNS_LEADER", "WORLD_SIZE", "RANK", "MASTER_ADDR",
              "MASTER_PORT")

# ---- workloads that can never run (plan/fits.py, docs/validation.md) --------------------

# What becomes of an entry whose pods a limit cannot hold together, by the kind of workload.
GANG_NEVER_WHOLE = Rule("the gang never starts whole")
WARM_UP_NEVER_WHOLE = Rule("the warm-up never holds them all: the rest get a node only as the first ones end, and "
                           "start late every run")
NEVER_RUNS = Rule("it never runs")

# ---- pods (config/podspec.py) ----------------------------------------------------------

_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
# The Docker reference grammar (github.com/distribution/reference): [host[:port]/]path[:tag][@digest].
IMAGE = Rule(
    'not an image reference ([registry[:port]/]path[:tag][@digest], the path in lower case, '
    'for example "ghcr.io/example/app:1.2")',
    pattern=rf"^(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$",
    max_length=255,  # of the name, without tag and digest
)
IMAGE_TAG = Rule("not an image tag (letters, digits, \"_\", \".\" and \"-\", at most 128, not starting "
                 "with \".\" or \"-\")", pattern=rf"^{_TAG}$")
MOUNT_PATH = Rule('not a mount path (an absolute path other than "/", without "." or ".." parts)')
JOB_RESTART_POLICY = Rule("cannot run as a Job (Never or OnFailure)")
# A `domain/name` extended resource: a DNS subdomain, "/", then a label-key name.
EXTENDED_RESOURCE = Rule(
    "an extended resource (domain/name)",
    pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$",
)
# `hugepages-<size>`: Kubernetes reads the size as a quantity (HugePageSizeFromResourceName);
# a name whose size is not one matches no node's capacity, so nothing could ever use it.
HUGEPAGES = Rule("not a hugepages resource: hugepages-<page size>, such as hugepages-2Mi or hugepages-1Gi",
                 pattern=r"^hugepages-[1-9][0-9]*(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
CONTAINER_RESOURCE = Rule("not a resource a container can ask for (cpu, memory, ephemeral-storage, "
                          "hugepages-<size>, or an extended resource domain/name)")
WHOLE_UNITS = Rule("not a whole number: extended resources (domain/name) are counted in whole units")
EXACT_RESOURCE = Rule("extended resources and hugepages are requested exactly: request = limit")
CORE_RESOURCE = Rule("extraResources is for other extended resources")
# Kueue computes with a fair-sharing weight in thousandths, as an int64: 10^15 stays well inside.
FAIR_SHARING_WEIGHT_MAX = 10**15
RECLAIM_NEEDS_COHORT = Rule("reclaims from the other queues of a cohort, and this queue has none "
                            "(Kueue would ignore it): set cohort, or leave reclaimWithinCohort out")
BOOLEAN_IS_NOT_A_NUMBER = Rule("true and false are not numbers here: write the number")
# A key written with nothing after it (`entryStacks:`) or `null`, where a value is needed:
# said as that, with what the key takes, never as pydantic's "None".
GIVEN_WITHOUT_VALUE = Rule("is given without a value")
# Text where a number is needed that some YAML reader takes for one (`0o4`, `0x1f`,
# `1_000`, `12:30`; config/yamldoc.py `number_like`): only plain decimal digits are a
# number to every reader.
NUMBER_AS_TEXT = Rule("is read as text, not as a number; write the number in plain decimal digits")
# Labels outside kns.io/* that the program sets and relies on (docs/queueing.md).
PROGRAM_OWNED_PRIORITY_LABEL = Rule("is the program's: it gives a queued entry's Jobs their priority; set "
                                    "priority instead")
PROGRAM_OWNED_LABEL = Rule("is the program's: it sends a queued entry's Jobs to their queue; set queue instead")
RESERVED_NAME = Rule("the names the program gives are reserved: choose another")
# The annotation that lists the kube-score checks an object is exempt from, with the reason
# in the docs (docs/testing.md): set by the program on its own objects, merged with a user's.
KUBE_SCORE_IGNORE = "kube-score/ignore"
DERIVED_NAME = Rule("names the program derives from the entries are reserved: rename one of the two")


# ---- autoscaled pools: the Karpenter NodePool (karpenter.sh/v1) -------------------------
# What the v1 NodePool CRD's schema and CEL rules, and Karpenter's own runtime validation,
# refuse (docs/autoscaling.md); read by config/karpenter.py and tools/schema.py.

NODES_OR_AUTOSCALE = Rule("a pool has nodes (a static pool) or autoscale (a Karpenter NodePool): exactly one")
DURATION_OR_NEVER = Rule('not a duration (numbers with a unit s, m or h: "30s", "720h") or "Never"',
                         pattern=r"^(([0-9]+(s|m|h))+|Never)$")
REQUIREMENT_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
NUMERIC_OPERATORS = ("Gt", "Lt", "Gte", "Lte")
IN_NEEDS_VALUES = Rule("operator In needs at least one value")
NUMERIC_NEEDS_ONE_INTEGER = Rule("operators Gt, Lt, Gte and Lte need exactly one value, a whole number of 0 or more")
EXISTS_TAKES_NO_VALUES = Rule("operators Exists and DoesNotExist take no values")
MIN_VALUES_OVER_VALUES = Rule("minValues is more than the number of values")
NODEPOOL_LIMIT = Rule("not a resource a node offers (cpu, memory, ephemeral-storage, pods, nodes, "
                      "hugepages-<size>, or an extended resource domain/name)",
                      pattern=rf"^(cpu|memory|ephemeral-storage|pods|nodes|{HUGEPAGES.pattern[1:-1]}|{EXTENDED_RESOURCE.pattern[1:-1]})$")
MAX_REQUIREMENTS = 100
LIMIT_BELOW_ONE_NODE = Rule("holds no node: Karpenter never creates one past a limit, so the pool could run nothing")
MAX_TEMPLATE_LABELS = 100
MIN_VALUES_MAX = 50
WEIGHT_MIN, WEIGHT_MAX = 1, 100
# Label keys Karpenter keeps for itself: the karpenter.sh domain (but for the two it lets a
# pool select on), and the hostname a node only gets when it exists.
KARPENTER_DOMAIN = "karpenter.sh"
KARPENTER_SELECTABLE = ("karpenter.sh/capacity-type", "karpenter.sh/nodepool")
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
# Labels every node Karpenter creates carries, from its instance type and offering (Karpenter
# v1's WellKnownLabels), beside the template's labels and the requirements' values; keys in
# the node class provider's domain (karpenter.k8s.aws/...) are its provider's own.
KARPENTER_WELL_KNOWN_LABELS = ("karpenter.sh/nodepool", "karpenter.sh/capacity-type", "kubernetes.io/arch",
                               "kubernetes.io/os", "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone",
                               "topology.kubernetes.io/region", "node.kubernetes.io/windows-build")
# Each Karpenter provider keeps its node class's API group for itself (RestrictedLabelDomains)
# but for the labels it puts on its nodes from the instance type (its WellKnownLabels): a
# NodePool requirement, template label or pod selector on another key of that domain is
# refused or matches no node. Read from each provider's source (its WellKnownLabels): AWS
# v1.14.1, Azure at commit 00ae112, kwok in Karpenter v1.14.1 (docs/autoscaling.md).
PROVIDER_LABELS = {
    "karpenter.k8s.aws": tuple(f"karpenter.k8s.aws/{name}" for name in (
        "capacity-reservation-id", "capacity-reservation-type", "capacity-reservation-interruptible",
        "ec2nodeclass", "instance-tenancy", "instance-hypervisor", "instance-encryption-in-transit-supported",
        "instance-category", "instance-capability-flex", "instance-family", "instance-generation",
        "instance-size", "instance-local-nvme", "instance-cpu", "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz", "instance-memory", "instance-ebs-bandwidth",
        "instance-network-bandwidth", "instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-count",
        "instance-gpu-memory", "instance-accelerator-name", "instance-accelerator-manufacturer",
        "instance-accelerator-count", "placement-group-id", "placement-group-partition")),
    "karpenter.azure.com": tuple(f"karpenter.azure.com/{name}" for name in (
        "sku-name", "sku-family", "sku-series", "sku-version", "sku-cpu", "sku-memory",
        "sku-networking-accelerated", "sku-storage-premium-capable", "sku-storage-ephemeralos-maxsize",
        "sku-gpu-name", "sku-gpu-manufacturer", "sku-gpu-count", "placement-scope")),
    "karpenter.kwok.sh": tuple(f"karpenter.kwok.sh/{name}" for name in (
        "instance-size", "instance-family", "instance-memory", "instance-cpu")),
}
HOSTNAME_LABEL = "kubernetes.io/hostname"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
CAPACITY_TYPES = ("on-demand", "spot", "reserved")
# The label each cloud's Karpenter provider puts the instance's GPU count in, by node class
# group; a GPU pool's perNode becomes a requirement on it (docs/autoscaling.md).
GPU_COUNT_LABELS = {
    "karpenter.k8s.aws": "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.azure.com": "karpenter.azure.com/sku-gpu-count",
}


# ---- queueing: Kueue (kueue.x-k8s.io/v1beta2) -------------------------------------------
# What the ClusterQueue and ResourceFlavor CRDs and Kueue's webhooks refuse, and what the
# program refuses because Kueue would never admit it (docs/queueing.md); read by
# config/queues.py, plan/queues.py and tools/schema.py.

QUEUE_RESOURCE = Rule("not a resource a queue can hold (cpu, memory, ephemeral-storage, pods, "
                      "hugepages-<size>, or an extended resource domain/name)",
                      pattern=rf"^(cpu|memory|ephemeral-storage|pods|{HUGEPAGES.pattern[1:-1]}|{EXTENDED_RESOURCE.pattern[1:-1]})$")
QUEUES_NEED_QUEUEING = Rule("queueing is off: set kns:queueing.enabled: true to use queues (Kueue)")
QUEUE_NEEDS_RESOURCE = Rule("the quota names no resource: give at least one pool a resource (cpu: 16)")
LIMITS_NEED_COHORT = Rule("borrowingLimit and lendingLimit need a cohort: they bound what the queue "
                          "borrows from and lends to the other queues of its cohort")
LENDING_OVER_QUOTA = Rule("a queue lends at most its quota")
WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
MAX_QUEUE_POOLS = 64  # flavors of one resource group
MAX_QUEUE_RESOURCES = 64  # covered resources of one resource group
MAX_FLAVOR_TOLERATIONS = 8

# ---- priorities: Kueue WorkloadPriorityClasses (docs/queueing.md, "Start times on a busy queue")
# A class's value is the CRD's int32 and its description at most 2048 characters; its name
# is also the value of a Job label, so a DNS label.
PRIORITY_VALUE_MIN = -(2**31)
PRIORITY_DESCRIPTION_MAX = 2048
PRIORITIES_NEED_QUEUEING = Rule("queueing is off: priorities order and preempt the Jobs Kueue admits; "
                                "set kns:queueing.enabled: true")
ONE_DEFAULT_PRIORITY = Rule("is a second default: at most one priority is given to queued entries that name none")
PRIORITY_NEEDS_QUEUE = Rule("has no effect: the entry has no queue, and a priority orders and preempts only the "
                            "Jobs a queue admits (Kueue); set queue, or remove priority")


# ---- many clusters: kns:workers (MultiKueue, docs/multicluster.md) ----------------------

# A MultiKueueConfig lists at most 20 clusters (Kueue v0.19.2, v1beta2 MultiKueueConfigSpec).
SITE_WORKERS_MAX = 20
SITE_WORKER_ACCESS = Rule("a worker needs context or kubeconfig (how Pulumi reaches it): exactly one")
# Where a message's way out names a worker (`kns:workers[<index>]...`), the worker's
# place in the list, which the models and rules cannot know.
WORKER_INDEX = "kns:workers[<index>]"


def at_worker(message: str, index: int) -> str:
    """`message` with its worker placeholder replaced by worker `index`'s place."""
    return message.replace(WORKER_INDEX, f"kns:workers[{index}]")


SITE_KUBECONFIG_SECRET = Rule("a worker's kubeconfig text is a credential: store it as a secret "
                                "(`pulumi config set --secret --path 'kns:workers[<index>].kubeconfig' ...`)")
SITE_NEEDS_QUEUEING = Rule("workers run the queued entries MultiKueue dispatches: set kns:queueing.enabled: true")
PORTS = Rule("a port is a number from 1 to 65535")
SITE_NAMESPACE_ENTRY = Rule("a namespace entry holds pods started by hand on the cluster it is on, which on a site is "
                            "the manager, and the manager runs no workload; MultiKueue dispatches only queued Jobs "
                            "to a worker: use type: pod with a queue")
QUEUEING_OFF_SETTING = Rule("has no effect: queueing is off (kns:queueing.enabled is false); set enabled: true, or "
                            "remove it")
SITE_API_SERVER = Rule("the URL the manager's Kueue dials to reach the worker: https://<host>[:port]")
SITE_API_SERVER_CREDENTIALS = Rule("Kueue reaches the worker with a token the program issues, Pulumi with its "
                                   "context or its kubeconfig stored as a secret "
                                   "(`pulumi config set --secret --path 'kns:workers[<index>].kubeconfig' < file`)")
SITE_ENTRY_NEEDS_QUEUE = Rule("on a site with kns:workers an entry's Jobs run on a worker, and only queued Jobs reach "
                              "one (MultiKueue dispatches them): give it a queue")
SITE_POOL_IS_MANAGERS = Rule("is a pool of the manager (kns:nodePools), which runs no workload on a site with "
                             "kns:workers: name a worker's pool")


# ---- state layout: kns:state (docs/entry-stacks.md) ------------------------------------

# How many entry stacks a stack's entries may be spread over: each is a Pulumi stack of its
# own, run one after another by a full `make up`.
ENTRY_STACKS_MAX = 256
ENTRY_STACK_SUFFIX = r"^(.+)\.entries-(0|[1-9][0-9]*)$"
ENTRY_STACK_NAME = Rule("is the name of an entry stack (<stack>.entries-<n>), which ./kns and make run for you; "
                        "name the stack itself")
ENTRY_STACK_UNKNOWN = Rule("is not an entry stack of this stack")
ENTRY_STACKS_UNSPLIT = Rule("cannot be removed once entries live in entry stacks: the platform stack's provider "
                            "is not theirs; keep kns:state.entryStacks (1 keeps every entry in one entry stack)")


# ---- reservations: kns:reservations (docs/reservations.md) ------------------------------

RESERVATION_DURATION = Rule(calendar.DURATION_MESSAGE, pattern=calendar.DURATION_PATTERN)
RESERVATIONS_NEED_QUEUEING = Rule("a reservation is built on Kueue (a ClusterQueue that lends its capacity between "
                                  "windows): set kns:queueing.enabled: true")
RESERVATION_HOLDS_ONE = Rule("holds either nodes (whole nodes of the pool) or resources (cpu, memory, gpus, ...), "
                             "one of the two")
RESERVATION_WHEN_ONE = Rule("is either recurring (schedule, timeZone, duration) or one window (start, end)")
RESERVATION_OFFSET = Rule("needs an offset (RFC 3339, e.g. 2026-12-01T09:00:00+01:00)")
RESERVATION_WHOLE_MINUTE = Rule("is not on a whole minute: a window's switch fires on minutes, as cron does")
RESERVATION_REQUEUE_NEEDS_QUEUE = Rule("uses a reservation whose atEnd is requeue: what still runs at the window's end "
                                       "is requeued on the entry's own queue, so give it a queue (or atEnd: finish)")
RESERVATION_NOT_FOR_NAMESPACE = Rule("a namespace entry runs no Job of its own to hold a window for")
# The WorkloadPriorityClass of the holder that empties a reservation at its warm-up
# (plan/reservations.py): below every priority an entry may have.
RESERVATION_HOLDER_PRIORITY = "kns-reservation-holder"
RESERVATION_HOLDER_VALUE = PRIORITY_VALUE_MIN


# ---- tenants on the network: kns:network (docs/network.md) ------------------------------

NETWORK_CIDR = Rule("is not a CIDR: an address and a prefix length, e.g. 10.0.0.0/8, 192.168.1.10/32, fd00::/8")
NETWORK_SOURCE_ONE = Rule("a source is {namespace: NAME} or {namespaceLabels: {key: value}}, one of the two")
NETWORK_DESTINATION_ONE = Rule("a destination is {cidr: CIDR} or {namespace: NAME}, one of the two")
NETWORK_NO_PORTS = Rule("lists no port, so it selects nothing: list the ports, or leave ports out for every port")
NETWORK_EVERY_NAMESPACE = Rule("selects every namespace, other entries' included: name the labels the sources' "
                               "namespaces carry")
NETWORK_OFF_SETTING = Rule("has no effect: kns:network.isolation is none, which leaves the network to the site; set "
                           "isolation: namespace, or remove it")
NETWORK_FROM_NEEDS_PROFILE = Rule("admits sources other entries do not: it needs a profile rule with "
                                  "allowNetworkFrom: true")
NETWORK_ENTRY_SOURCE = Rule("every entry admits the sources of kns:network.allowFrom, so every entry would admit "
                            "its pods: let the entries that need them admit them with their own allowFrom")
# Where every entry's pods resolve names when their egress is restricted: the cluster's DNS
# (CoreDNS and kube-dns both carry this label in kube-system), UDP and TCP.
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
