"""The type tokens of the program's components, as the tests expect the program to register
them (and the engine to show them in URNs and previews).

Written out here once, not read from components/ or plan/: a test that compared the program
with its own constant could not see the constant change."""

KNS_CLUSTER = "kns:cluster:KnsCluster"
NODE_POOL = "kns:cluster:NodePool"
SYSTEM_NAMESPACE = "kns:cluster:SystemNamespace"
WORKER = "kns:cluster:Worker"
BUDGET = "kns:queueing:Budget"
KUEUE = "kns:queueing:Kueue"
MULTIKUEUE = "kns:queueing:MultiKueue"
QUEUES = "kns:queueing:Queues"
RESERVATION = "kns:queueing:Reservation"
RESERVED_POOL = "kns:queueing:ReservedPool"
KNS_SCHEDULER = "kns:scheduling:KnsScheduler"
PACKING_SCHEDULER = "kns:scheduling:PackingScheduler"
JOB = "kns:workload:Job"
SCHEDULE = "kns:workload:Schedule"
JOB_NAMESPACE = "kns:workload:JobNamespace"
# An entry's type in states written before entries were Jobs and Schedules; `make up` and
# the preview summary still read it.
KNS_WORKLOAD = "kns:workload:KnsWorkload"
