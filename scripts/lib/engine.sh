# How this project runs the Pulumi engine (sourced by scripts/up.sh, so `make up` and
# `make preview`; bench/apply_vs_kubectl.py measures with exactly these). Each variable
# keeps the operator's own value when it is already set. Why each, and what it buys on a
# 300-entry stack against a real API server: docs/benchmarks.md, "`pulumi up` against a
# real API server".
#
# PULUMI_SKIP_CHECKPOINTS: write the state once, when the update ends, instead of the whole
#   state after every step (twice per resource: quadratic in the stack, 85% of a fresh
#   100-entry `up`). After SIGINT the engine finishes what is in flight and writes the
#   state; after SIGKILL the state is that of the `up` before. `make recover`
#   (docs/operations.md) reconciles either: refresh, up (the Kubernetes provider creates
#   with server-side apply, an upsert, so what the interrupted run created is adopted), and
#   a sweep of the platform's objects the state does not hold.
# PULUMI_PARALLEL: resource operations in flight (the engine's default is 4 per core, 8 on
#   2 cores); the default of `--parallel` for up, preview, refresh and destroy.
# PULUMI_PARALLEL_DIFF: the provider's diffs run concurrently (a no-change run is diffs).
# PULUMI_K8S_CLIENT_QPS, PULUMI_K8S_CLIENT_BURST: the Kubernetes provider's client-side rate
#   limit (its defaults: 50 requests/s, burst 120), which a 300-entry `up` spends waiting on
#   (about 3,000 applies plus a watch per namespace). The API server's priority and
#   fairness still bounds what it serves; kubectl, for comparison, has no such limit.
# PULUMI_AUTOMATIC_LOGGING: `false` starts no automatic debug log in ~/.pulumi/logs (the CLI
#   patch, docs/operations.md "The CLI patch": marshalling, compressing and encrypting every
#   logged property value was half of the engine's CPU). `true` keeps upstream's log, to
#   share with Pulumi (`pulumi logs`). A CLI on PATH, taken unpatched, always writes it.
export PULUMI_SKIP_CHECKPOINTS="${PULUMI_SKIP_CHECKPOINTS:-true}"
export PULUMI_PARALLEL="${PULUMI_PARALLEL:-32}"
export PULUMI_PARALLEL_DIFF="${PULUMI_PARALLEL_DIFF:-true}"
export PULUMI_K8S_CLIENT_QPS="${PULUMI_K8S_CLIENT_QPS:-200}"
export PULUMI_K8S_CLIENT_BURST="${PULUMI_K8S_CLIENT_BURST:-400}"
export PULUMI_AUTOMATIC_LOGGING="${PULUMI_AUTOMATIC_LOGGING:-false}"
