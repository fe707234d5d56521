"""A smoke run of MultiKueue on this machine (`python -m kns_testing.multikueue_smoke`): a
manager and two workers (kns_testing.multicluster), Kueue v0.19.2 on each, and what issue
34's acceptance test needs to be true, observed in persisted state (Workload conditions and
admission check states, Job status, which cluster has pods), never after a sleep:

  rules  kubeconfigs Kueue refuses: the MultiKueueCluster's Active condition, in its words;
  (a)    a queued Job created on the manager runs on a worker, its pod only there, and the
         manager's Job shows the worker's completion;
  (b)    worker 1's ClusterQueue full (a long Job created on worker 1) -> the next Job goes
         to worker 2;
  (d)    worker 2's kube-apiserver killed for 15s while a Job runs there (worker 1 has room):
         the Job stays admitted at worker 2 and is never copied to worker 1;
  (c)    worker 2's kube-apiserver killed for longer than workerLostTimeout while that Job
         runs there: not run a second time on worker 1 within workerLostTimeout, a new Job
         goes to worker 1; then what happens after the timeout and after the API server
         returns (reported as findings, not judged).

Every step prints its timings; the findings are in docs/multicluster-notes.md. Exit status 0
when every check held; the clusters are stopped either way (logs kept in the state dir).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

import yaml

from .cluster import Cluster, node_manifest
from .faults import Component
from .multicluster import (KUEUE_NAMESPACE, MultiKueueSettings, Site, condition, is_true, kubeconfig_secret,
                           multikueue_cluster, multikueue_config, multikueue_site, queued_job)

NS = "mk"
QUEUE = "mk"
CHECK = "multikueue"
T0 = time.monotonic()
FAILURES: list[str] = []
FINDINGS: list[str] = []
# --recovery: step (c) takes the lost worker out of the MultiKueueConfig and empties it before
# it is put back (docs/multicluster-notes.md).
RECOVERY = False


def say(text: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {text}", flush=True)


def check(ok: bool, what: str) -> bool:
    say(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILURES.append(what)
    return ok


def finding(what: str) -> None:
    """Kueue's behaviour as observed, reported but not judged (docs/multicluster-notes.md)."""
    say("NOTE  " + what)
    FINDINGS.append(what)


def until(what: Callable, timeout: float, message: str, every: float = 0.5):
    """Poll `what` until it returns something truthy; None (and a FAIL) after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            check(False, f"timed out after {timeout:.0f}s: {message}")
            return None
        time.sleep(every)


# ---- reading state --------------------------------------------------------------------------------


def items(cluster: Cluster, *args: str) -> list[dict]:
    done = cluster.kubectl("get", *args, "-o", "json", check=False)
    if done.returncode != 0:
        return []
    return yaml.safe_load(done.stdout)["items"]


def workload(cluster: Cluster, job: str) -> Optional[dict]:
    """The Workload of Job `job` in NS, or None: owned by the Job, or (a worker's copy, made
    before its Job) named as Kueue names a Job's Workload, job-<name>-<hash>."""
    for wl in items(cluster, "workloads", "-n", NS):
        if any(o.get("kind") == "Job" and o.get("name") == job for o in wl["metadata"].get("ownerReferences", [])) \
                or wl["metadata"]["name"].startswith(f"job-{job}-"):
            return wl
    return None


def check_state(wl: Optional[dict]) -> Optional[dict]:
    if not wl:
        return None
    for acs in wl.get("status", {}).get("admissionChecks", []) or []:
        if acs["name"] == CHECK:
            return acs
    return None


def job_obj(cluster: Cluster, job: str) -> Optional[dict]:
    done = cluster.kubectl("get", "job", "-n", NS, job, "-o", "json", check=False)
    return yaml.safe_load(done.stdout) if done.returncode == 0 else None


def pods(cluster: Cluster, job: str) -> list[dict]:
    return items(cluster, "pods", "-n", NS, "-l", f"batch.kubernetes.io/job-name={job}")


def running(cluster: Cluster, job: str) -> list[str]:
    return [p["metadata"]["name"] for p in pods(cluster, job) if p["status"].get("phase") == "Running"]


def job_condition(job: Optional[dict], kind: str) -> bool:
    return bool(job) and any(c["type"] == kind and c["status"] == "True"
                             for c in job.get("status", {}).get("conditions", []) or [])


def where(site: Site, job: str) -> dict[str, str]:
    """Per cluster: what of `job` exists there (job / workload / pods with their phases)."""
    out = {}
    for name, live in [("manager", site.manager), *site.workers.items()]:
        parts = []
        if job_obj(live, job):
            parts.append("job")
        if workload(live, job):
            parts.append("workload")
        phases = [p["status"].get("phase", "?") for p in pods(live, job)]
        if phases:
            parts.append("pods " + ",".join(phases))
        out[name] = "+".join(parts) or "-"
    return out


# ---- the steps ----------------------------------------------------------------------------------------


def kubeconfig_rules(site: Site) -> dict[str, str]:
    """MultiKueueClusters (not in the MultiKueueConfig) whose Secrets hold kubeconfigs Kueue
    refuses: each one's Active condition (reason: message). Removed again after."""
    good = yaml.safe_load(site.kubeconfigs["w1"])

    def variant(cluster_patch=None, user=None) -> str:
        doc = yaml.safe_load(yaml.safe_dump(good))
        doc["clusters"][0]["cluster"].update(cluster_patch or {})
        if user is not None:
            doc["users"][0]["user"] = user
        return yaml.safe_dump(doc)

    ca_file = site.workers["w1"].state / "pki" / "apiserver" / "apiserver.crt"
    variants = {
        # client-go refuses an exec entry without interactiveMode before Kueue looks at it.
        "bad-exec-no-mode": variant(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/true"}}),
        "bad-exec": variant(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/true",
                                           "interactiveMode": "Never"}}),
        "bad-ca-file": variant(cluster_patch={"certificate-authority": str(ca_file)}),
        "bad-insecure": variant(cluster_patch={"insecure-skip-tls-verify": True}),
        "bad-token-file": variant(user={"tokenFile": "/tmp/token"}),
        "bad-basic-auth": variant(user={"username": "a", "password": "b"}),
        "bad-client-cert-file": variant(user={"client-certificate": "/tmp/c.crt", "client-key": "/tmp/c.key"}),
    }
    docs = []
    for name, text in variants.items():
        docs += [kubeconfig_secret(f"{name}-kubeconfig", text), multikueue_cluster(name, f"{name}-kubeconfig")]
    # A Secret without the `kubeconfig` key, and a MultiKueueCluster naming no Secret.
    docs += [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad-key-kubeconfig", "namespace": KUEUE_NAMESPACE},
              "stringData": {"config": site.kubeconfigs["w1"]}},
             multikueue_cluster("bad-key", "bad-key-kubeconfig"), multikueue_cluster("bad-no-secret", "no-such-secret")]
    site.manager.apply(*docs)
    names = [*variants, "bad-key", "bad-no-secret"]
    seen = {}
    for name in names:
        def active(name=name):
            c = condition(site.manager.get("multikueuecluster", name), "Active")
            return c if c and c["status"] == "False" else None
        c = until(active, 60, f"MultiKueueCluster {name} Active=False")
        seen[name] = f"{c['reason']}: {c['message']}" if c else "no Active condition"
        say(f"      {name}: Active=False {seen[name]}")
    site.manager.kubectl("delete", "multikueuecluster", *names, "--wait=false")
    site.manager.kubectl("delete", "secret", "-n", KUEUE_NAMESPACE,
                         *[f"{n}-kubeconfig" for n in [*variants, "bad-key"]], "--wait=false")
    check("exec plugins are not allowed" in seen["bad-exec"], "an exec plugin is refused")
    check("certificate-authority file paths are not allowed" in seen["bad-ca-file"], "a CA file path is refused")
    check("insecure TLS verification is not allowed" in seen["bad-insecure"], "insecure-skip-tls-verify is refused")
    check("tokenFile is not allowed" in seen["bad-token-file"], "a tokenFile is refused")
    check("basic auth is not allowed" in seen["bad-basic-auth"], "basic auth is refused")
    check(is_true(site.manager.get("admissioncheck", CHECK), "Active"),
          "the AdmissionCheck stays Active (the bad clusters are in no MultiKueueConfig)")
    return seen


def step_a(site: Site) -> dict[str, float]:
    """A Job created on the manager runs on a worker and completes there; the manager's Job
    shows it."""
    say("(a) Job a1 (1 CPU, runs 20s) created on the manager")
    t = {}
    start = time.monotonic()
    site.manager.apply(queued_job("a1", NS, QUEUE, cpu="1", run_for="20s"))
    job = job_obj(site.manager, "a1")
    check(job["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue" and job["spec"].get("suspend") is True,
          f"the manager's webhook made a1 suspended and managedBy kueue.x-k8s.io/multikueue "
          f"(suspend={job['spec'].get('suspend')}, managedBy={job['spec'].get('managedBy')})")
    wl = until(lambda: (w := workload(site.manager, "a1")) and (check_state(w) or {}).get("state") == "Ready"
               and w["status"].get("clusterName") and w, 120, "a1's admission check Ready")
    if not wl:
        return t
    t["created -> check Ready"] = time.monotonic() - start
    target = wl["status"]["clusterName"]
    other = next(n for n in site.workers if n != target)
    say(f"      dispatched to {target}: {check_state(wl)['message']!r}")
    seen_elsewhere: set[str] = set()

    def running_on_target():
        for name, live in [("manager", site.manager), (other, site.workers[other])]:
            if pods(live, "a1"):
                seen_elsewhere.add(name)
        return running(site.workers[target], "a1")

    pod_names = until(running_on_target, 120, f"a1's pod Running on {target}")
    t["created -> pod Running on worker"] = time.monotonic() - start
    check(bool(pod_names), f"a1's pod {pod_names} Running on {target}")
    wl = workload(site.manager, "a1")
    check(is_true(wl, "Admitted") and is_true(wl, "QuotaReserved"), "a1's manager Workload is Admitted")
    check(not pods(site.manager, "a1") and not pods(site.workers[other], "a1") and not seen_elsewhere,
          f"a1 has pods on {target} only (none on the manager nor {other})")
    done = until(lambda: job_condition(j := job_obj(site.manager, "a1"), "Complete") and j, 120,
                 "a1 Complete on the manager")
    t["created -> manager Job Complete"] = time.monotonic() - start
    if done:
        st = done["status"]
        check(st.get("succeeded") == 1, f"the manager's a1 shows the worker's completion (succeeded={st.get('succeeded')}, "
                                        f"startTime={st.get('startTime')}, completionTime={st.get('completionTime')})")
    fin = until(lambda: is_true(workload(site.manager, "a1") or {}, "Finished"), 60, "a1's manager Workload Finished")
    check(bool(fin), "a1's manager Workload is Finished")
    gone = until(lambda: not job_obj(site.workers[target], "a1") and not workload(site.workers[target], "a1"), 120,
                 f"a1's Job and Workload removed from {target}")
    t["created -> remote objects removed"] = time.monotonic() - start
    check(bool(gone), f"a1's remote Job and Workload are removed from {target} once it finished")
    check(not pods(site.manager, "a1") and not seen_elsewhere, "a1 never had a pod outside its worker")
    return t


def step_b(site: Site) -> dict[str, float]:
    """Worker 1's queue full -> the next manager Job runs on worker 2."""
    t = {}
    w1, w2 = site.workers["w1"], site.workers["w2"]
    say("(b) fill-w1 (4 CPU, runs 1h) created directly on w1, filling w1's ClusterQueue")
    start = time.monotonic()
    w1.apply(queued_job("fill-w1", NS, QUEUE, cpu="4", run_for="1h"))
    ok = until(lambda: is_true(workload(w1, "fill-w1") or {}, "Admitted") and running(w1, "fill-w1"), 120,
               "fill-w1 admitted and Running on w1")
    t["fill-w1 Running on w1"] = time.monotonic() - start
    check(bool(ok), "fill-w1 is admitted and Running on w1")

    def cpu_used():
        cq = w1.get("clusterqueue", QUEUE)
        used = [r["total"] for f in cq.get("status", {}).get("flavorsUsage", []) for r in f["resources"] if r["name"] == "cpu"]
        return used[0] if used and used[0] == "4" else None

    full = until(cpu_used, 60, "w1's ClusterQueue status showing 4 CPU in use")
    t["fill-w1 created -> w1 ClusterQueue status full"] = time.monotonic() - start
    check(bool(full), f"w1's ClusterQueue is full (its status: cpu usage {full} of 4)")
    say("(b) Job b1 (2 CPU, runs 1h) created on the manager")
    start = time.monotonic()
    site.manager.apply(queued_job("b1", NS, QUEUE, cpu="2", run_for="1h"))
    w1_copy = []

    def admitted():
        if workload(w1, "b1"):
            w1_copy.append(time.monotonic() - start)
        w = workload(site.manager, "b1")
        return w if (check_state(w) or {}).get("state") == "Ready" and w["status"].get("clusterName") else None

    wl = until(admitted, 120, "b1's admission check Ready")
    t["created -> check Ready"] = time.monotonic() - start
    if not wl:
        return t
    check(wl["status"]["clusterName"] == "w2", f"b1 dispatched to {wl['status']['clusterName']} (want w2)")
    say("      a pending copy of b1's Workload on w1 " + (f"seen {w1_copy[0]:.1f}s after b1 was created" if w1_copy
        else "not seen by the polls (w2 admitted b1 before one caught it)"))
    pod_names = until(lambda: running(w2, "b1"), 120, "b1's pod Running on w2")
    t["created -> pod Running on w2"] = time.monotonic() - start
    check(bool(pod_names), f"b1's pod {pod_names} Running on w2")
    gone = until(lambda: not workload(w1, "b1") and not job_obj(w1, "b1"), 120, "b1's pending copy removed from w1")
    t["created -> w1 copy removed"] = time.monotonic() - start
    check(bool(gone), "b1's pending Workload copy on w1 is removed once w2 admitted it")
    check(not pods(w1, "b1") and not pods(site.manager, "b1"), "b1 has pods on w2 only")
    return t


def free_w1(site: Site) -> dict[str, float]:
    """fill-w1 deleted: w1 has room for b1 again (so a second copy of b1 could land there)."""
    w1 = site.workers["w1"]
    say("freeing w1: fill-w1 deleted")
    start = time.monotonic()
    w1.kubectl("delete", "job", "-n", NS, "fill-w1", "--cascade=foreground", "--wait=true")
    until(lambda: not workload(w1, "fill-w1") and not pods(w1, "fill-w1"), 120, "fill-w1 gone from w1")
    return {"fill-w1 gone": time.monotonic() - start}


def b1_state(site: Site) -> tuple:
    """(manager check state, manager clusterName, manager Admitted)."""
    wl = workload(site.manager, "b1") or {}
    return ((check_state(wl) or {}).get("state"), wl.get("status", {}).get("clusterName"), is_true(wl, "Admitted"))


def restart_apiserver(site: Site, name: str, apiserver: Component, t: dict, observe=lambda: None) -> float:
    """Start the killed API server again; wait for /readyz and for the manager's
    MultiKueueCluster to be Active again. The monotonic time of the restart."""
    worker = site.workers[name]
    back = time.monotonic()
    apiserver.start()
    until(lambda: worker.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, 120,
          f"{name} API server ready")
    t[f"restart -> {name} readyz"] = time.monotonic() - back
    active = until(lambda: observe() or is_true(site.manager.get("multikueuecluster", name), "Active"), 420,
                   f"MultiKueueCluster {name} Active again")
    t[f"restart -> {name} Active"] = time.monotonic() - back
    check(bool(active), f"the manager reconnects to {name} ({t[f'restart -> {name} Active']:.1f}s after the restart)")
    return back


def step_d(site: Site, outage: float = 15) -> dict[str, float]:
    """A brief outage: w2's kube-apiserver killed while b1 runs there and started again
    `outage` seconds later, well within workerLostTimeout: b1 stays where it is."""
    t = {}
    w1, w2 = site.workers["w1"], site.workers["w2"]
    say(f"(d) killing w2's kube-apiserver for {outage:.0f}s (b1 runs there; w1 has room for it)")
    apiserver = Component(w2.state, "kube-apiserver")
    apiserver.crash()
    lost = time.monotonic()
    states, duplicated = set(), []

    def observe():
        states.add(b1_state(site))
        if workload(w1, "b1") or job_obj(w1, "b1"):
            duplicated.append(round(time.monotonic() - lost, 1))

    inactive = until(lambda: observe() or (x := condition(site.manager.get("multikueuecluster", "w2"), "Active"))
                     and x["status"] == "False", 60, "MultiKueueCluster w2 Active=False")
    t["killed -> w2 Active=False"] = time.monotonic() - lost
    check(bool(inactive), "the manager marks w2 inactive")
    while time.monotonic() < lost + outage:
        observe()
        time.sleep(1)
    restart_apiserver(site, "w2", apiserver, t, observe)
    t["killed -> w2 Active again"] = time.monotonic() - lost
    observe()
    check(states == {("Ready", "w2", True)},
          f"b1 stayed Admitted at w2 with its check Ready throughout ({sorted(states, key=str)})")
    check(not duplicated, f"b1 was never created on w1 ({duplicated[:3]})")
    check(bool(running(w2, "b1")) and not running(w1, "b1"), "b1's pod still Running on w2, none on w1")
    return t


def step_c(site: Site) -> dict[str, float]:
    """w2's API server gone for longer than workerLostTimeout while b1 runs there."""
    t = {}
    w1, w2 = site.workers["w1"], site.workers["w2"]
    timeout = duration(site.settings.worker_lost_timeout)
    say(f"(c) killing w2's kube-apiserver (b1 runs there); workerLostTimeout {site.settings.worker_lost_timeout}")
    apiserver = Component(w2.state, "kube-apiserver")
    apiserver.crash()
    lost = time.monotonic()
    c = until(lambda: (x := condition(site.manager.get("multikueuecluster", "w2"), "Active")) and x["status"] == "False" and x,
              120, "MultiKueueCluster w2 Active=False")
    t["killed -> w2 Active=False"] = time.monotonic() - lost
    if c:
        say(f"      w2 Active=False: {c['reason']}: {c['message'][:200]}")
    ac_active = condition(site.manager.get("admissioncheck", CHECK), "Active") or {}
    say(f"      AdmissionCheck Active={ac_active.get('status')} {ac_active.get('reason')}: {ac_active.get('message')}")
    say("(c) Job c1 (1 CPU, runs 1h) created on the manager while w2 is down")
    c_start = time.monotonic()
    site.manager.apply(queued_job("c1", NS, QUEUE, cpu="1", run_for="1h"))
    wl_c = until(lambda: (w := workload(site.manager, "c1")) and (check_state(w) or {}).get("state") == "Ready"
                 and w["status"].get("clusterName") and w, 120, "c1's admission check Ready")
    t["c1 created -> check Ready"] = time.monotonic() - c_start
    if wl_c:
        check(wl_c["status"]["clusterName"] == "w1", f"c1 dispatched to {wl_c['status']['clusterName']} (want w1)")
    until(lambda: running(w1, "c1"), 120, "c1's pod Running on w1")
    t["c1 created -> pod Running on w1"] = time.monotonic() - c_start
    # Within workerLostTimeout of the loss: b1 stays admitted at w2 and nothing of it on w1.
    states, duplicated = set(), []
    margin = 3.0
    while time.monotonic() < lost + timeout - margin:
        states.add(b1_state(site))
        if workload(w1, "b1") or job_obj(w1, "b1") or pods(w1, "b1"):
            duplicated.append(round(time.monotonic() - lost, 1))
        time.sleep(1)
    t["watched b1 for"] = time.monotonic() - lost
    check(states == {("Ready", "w2", True)},
          f"for {timeout - margin:.0f}s after the loss b1 stayed Admitted at w2 with its check Ready ({sorted(states, key=str)})")
    check(not duplicated, f"b1 was not created on w1 within workerLostTimeout (seen at {duplicated[:3]})")
    # After the timeout: what Kueue does with b1.
    say("(c) after workerLostTimeout: what happens to b1")
    left = until(lambda: (a := check_state(workload(site.manager, "b1"))) and a.get("state") != "Ready" and a,
                 2 * timeout + 60, "b1's admission check leaving Ready")
    if left:
        t["killed -> b1 check left Ready"] = time.monotonic() - lost
        say(f"      b1's check {left['state']}: {left.get('message')}")
    redispatched = until(lambda: (w := workload(site.manager, "b1")) and (check_state(w) or {}).get("state") == "Ready"
                         and w["status"].get("clusterName") == "w1" and w, 180, "b1 re-dispatched to w1")
    if redispatched:
        t["killed -> b1 Ready again at w1"] = time.monotonic() - lost
        until(lambda: running(w1, "b1"), 120, "b1's pod Running on w1")
        t["killed -> b1 pod Running on w1"] = time.monotonic() - lost
        finding(f"{t['killed -> b1 check left Ready']:.0f}s after w2 was lost b1 was evicted on the manager "
                f"({left.get('message')!r}) and re-dispatched to w1, where it runs a second time while its first "
                f"copy is still in w2's store")
    # The API server returns.
    if RECOVERY:
        # What an operator (or issue 34's program) can do about a worker lost past the
        # timeout: take it out of the MultiKueueConfig before it is back, empty it of what
        # this manager made there (the origin label), then put it back.
        say("(c) recovery: w2 taken out of the MultiKueueConfig before its API server returns")
        site.manager.apply(multikueue_config(site.config_name, ["w1"]))
    say("(c) w2's kube-apiserver started again")
    back_wall = time.time()
    back = restart_apiserver(site, "w2", apiserver, t)
    if RECOVERY:
        origin = f"kueue.x-k8s.io/multikueue-origin={site.settings.origin}"
        say(f"      w2 before the clean-up: b1 {where(site, 'b1')['w2']}; objects labelled {origin}: "
            f"{[j['metadata']['name'] for j in items(w2, 'jobs', '-A', '-l', origin)]} jobs, "
            f"{[j['metadata']['name'] for j in items(w2, 'workloads', '-A', '-l', origin)]} workloads")
        w2.kubectl("delete", "jobs", "-A", "-l", origin, "--cascade=foreground", "--wait=true")
        w2.kubectl("delete", "workloads", "-A", "-l", origin, "--wait=true")
        until(lambda: not items(w2, "workloads", "-A", "-l", origin) and not pods(w2, "b1"), 120,
              "w2 emptied of this manager's objects")
        t["restart -> w2 emptied"] = time.monotonic() - back
        site.manager.apply(multikueue_config(site.config_name, ["w1", "w2"]))
        until(lambda: (c := condition(site.manager.get("admissioncheck", CHECK), "Active")) and c["reason"] == "Active",
              120, "AdmissionCheck Active with both clusters")
        say("      w2 emptied and put back in the MultiKueueConfig")
    # What the manager does with the two copies of b1: watch a while and report each change.
    settle = max(90.0, 2 * duration(site.settings.gc_interval) + 30)
    say(f"(c) watching b1 for {settle:.0f}s after w2 returned")
    last = None
    end = time.monotonic() + settle
    while time.monotonic() < end:
        wl = workload(site.manager, "b1") or {}
        acs = check_state(wl) or {}
        job = job_obj(site.manager, "b1") or {}
        state = (wl.get("status", {}).get("clusterName"), acs.get("state"),
                 tuple(sorted(n for n, w in site.workers.items() if job_obj(w, "b1"))),
                 tuple(sorted(n for n, w in site.workers.items() if running(w, "b1"))),
                 job.get("status", {}).get("startTime"))
        if state != last:
            say(f"      +{time.monotonic() - back:.1f}s b1: manager clusterName={state[0]} check={state[1]} "
                f"Job on {list(state[2])}, pods Running on {list(state[3])}, manager Job startTime={state[4]}")
            last = state
        time.sleep(2)
    t["restart -> end of watch"] = time.monotonic() - back
    for message, count in kueue_errors(site.manager, "b1", since=back_wall).most_common(4):
        say(f"      manager Kueue error x{count}: {message}")
    cluster_name, check_now, holders, runs, _ = last
    if holders == (cluster_name,) and runs == (cluster_name,):
        finding(f"after w2 returned b1 runs only on {cluster_name}, the cluster the manager names")
    else:
        finding(f"after w2 returned b1's Job is on {list(holders)} (Running on {list(runs)}) while the manager's "
                f"Workload names {cluster_name} (check {check_now})")
    say(f"      c1 where: {where(site, 'c1')}")
    # The copy that runs ends: does the manager's Job learn it?
    (holder, *_) = runs or ("w2",)
    w = site.workers[holder]
    say(f"(c) b1's pod on {holder} ends now (kwok.x-k8s.io/run-for=0s): does the manager's Job finish?")
    ended, ended_wall = time.monotonic(), time.time()
    for pod in running(w, "b1"):
        w.kubectl("annotate", "pod", "-n", NS, pod, "--overwrite", "kwok.x-k8s.io/run-for=0s")
    done_w2 = until(lambda: job_condition(job_obj(w, "b1"), "Complete"), 60, f"b1 Complete on {holder}")
    t[f"pod ended -> b1 Complete on {holder}"] = time.monotonic() - ended
    watch = 90.0
    finished = None
    while time.monotonic() < ended + watch:
        job = job_obj(site.manager, "b1")
        if job_condition(job, "Complete") or is_true(workload(site.manager, "b1") or {}, "Finished"):
            finished = time.monotonic() - ended
            break
        time.sleep(2)
    job = job_obj(site.manager, "b1") or {}
    wl = workload(site.manager, "b1") or {}
    if finished is not None:
        t["pod ended -> manager b1 finished"] = finished
        finding(f"once b1 completed on {holder} the manager's Job finished {finished:.0f}s later "
                f"(Complete={job_condition(job, 'Complete')}, Workload Finished={is_true(wl, 'Finished')})")
    else:
        st = job.get("status", {})
        finding(f"b1 completed on {holder} (Complete={bool(done_w2)}) but {watch:.0f}s later the manager's Job is not "
                f"finished (active={st.get('active')}, succeeded={st.get('succeeded')}, startTime={st.get('startTime')}; "
                f"Workload Finished={is_true(wl, 'Finished')})")
    for message, count in kueue_errors(site.manager, "b1", since=ended_wall).most_common(2):
        say(f"      manager Kueue error x{count}: {message}")
    return t


def kueue_errors(cluster: Cluster, needle: str, since: float) -> collections.Counter:
    """Kueue's logged errors mentioning `needle` at or after wall time `since`, by message."""
    counts: collections.Counter = collections.Counter()
    for line in (cluster.state / "logs" / "kueue.log").read_text(errors="replace").splitlines():
        if not line.startswith("{") or needle not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("level") != "error":
            continue
        if datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")).timestamp() >= since:
            counts[f"{entry.get('msg')}: {str(entry.get('error'))[:220]}"] += 1
    return counts


def duration(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(ms|s|m|h)", text))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state-dir", type=Path, help="where the clusters live (default: a new temp dir)")
    parser.add_argument("--worker-lost-timeout", default="60s")
    parser.add_argument("--gc-interval", default="30s")
    parser.add_argument("--identity", choices=["serviceaccount", "admin"], default="serviceaccount")
    parser.add_argument("--recovery", action="store_true",
                        help="in (c), take w2 out of the MultiKueueConfig and empty it before it is put back")
    parser.add_argument("--skip", action="append", default=[], choices=["rules", "a", "b", "c", "d"])
    args = parser.parse_args(argv)
    global RECOVERY
    RECOVERY = args.recovery
    # A SIGTERM (timeout, CI) unwinds like Ctrl-C, so the site's clusters are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="kns-multikueue-"))
    settings = MultiKueueSettings(gc_interval=args.gc_interval, worker_lost_timeout=args.worker_lost_timeout)
    workers = {"w1": [node_manifest("w1-node-1", 8, 0)], "w2": [node_manifest("w2-node-1", 8, 0)]}
    timings: dict[str, dict[str, float]] = {}
    say(f"state in {state}")
    try:
        with multikueue_site(state, workers, settings=settings, identity=args.identity, report=say) as site:
            timings["site"] = dict(site.timings)
            timings["connect"] = site.connect()
            say("connected: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings["connect"].items()))
            q0 = time.monotonic()
            site.queues(namespace_name=NS, queue=QUEUE, cpu={"w1": 4, "w2": 4})
            timings["queues"] = {"queues Active": time.monotonic() - q0}
            say(f"queues Active in {timings['queues']['queues Active']:.1f}s")
            steps = [("rules", lambda: kubeconfig_rules(site)), ("a", lambda: step_a(site)),
                     ("b", lambda: step_b(site)), ("free-w1", lambda: free_w1(site)),
                     ("d", lambda: step_d(site)), ("c", lambda: step_c(site))]
            for name, run in steps:
                if name in args.skip or (name in ("free-w1", "d", "c") and "b" in args.skip):
                    continue
                s0 = time.monotonic()
                try:
                    result = run()
                except Exception as error:  # noqa: BLE001 - report and go on to stop the site
                    check(False, f"step {name} raised {type(error).__name__}: {error}")
                    result = {}
                timings[name] = result if name != "rules" else {}
                timings.setdefault(name, {})["step total"] = time.monotonic() - s0
                say(f"step {name}: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings[name].items()))
    except Exception as error:  # noqa: BLE001
        check(False, f"the site failed: {type(error).__name__}: {error}")
    say("timings:\n" + yaml.safe_dump({k: {kk: round(vv, 1) for kk, vv in v.items()} for k, v in timings.items()},
                                      sort_keys=False))
    if FINDINGS:
        say("findings:\n  " + "\n  ".join(FINDINGS))
    if FAILURES:
        say(f"{len(FAILURES)} check(s) failed:\n  " + "\n  ".join(FAILURES))
        return 1
    say("all checks held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
