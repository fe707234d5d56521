"""The field's own manifest linters on what the program renders: kubeconform (strict, against
the schemas of the pinned Kubernetes) and kube-score, both built from Go modules by
scripts/linters.sh, on the dev stack and on the e2e `local` stack (tests/e2e/Pulumi.local.yaml,
rendered instead of applied), through the real engine on a copy of the project.

Every finding fails, except the exceptions listed here with the reason they are right for
this platform (KUBE_SCORE_IGNORED_TESTS for the whole run, ANNOTATED_EXCEPTIONS for the
`kube-score/ignore` annotations the program sets on single objects). The last tests show
each linter step fails on a manifest with a known finding, so a green run means something.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kns_testing import apiserver
from kns_testing.program import PROJECT_FILES, ROOT, engine_project, pinned_versions
from plan import kueue_install, queues

PASSPHRASE = "kns-dev-local"  # the dev stack's committed encryptionsalt belongs to it
KUBERNETES_VERSION = pinned_versions()["KUBERNETES_VERSION"]
KUBE_SCORE_K8S = "v" + ".".join(KUBERNETES_VERSION.split(".")[:2])  # kube-score wants vN.NN

# kube-score checks off for every object, and why. Prefer a `kube-score/ignore` annotation
# set by the program on the objects concerned (ANNOTATED_EXCEPTIONS); a check is only
# here when it is wrong for every object the platform renders.
KUBE_SCORE_IGNORED_TESTS: dict[str, str] = {
    # None: every check is right for some object the platform renders.
}

# check id -> why the program may set `kube-score/ignore: <check id>` on an object.
ANNOTATED_EXCEPTIONS: dict[str, str] = {
    "container-security-context-user-group-id":
        "user workloads (Job/CronJob of a kns:jobs or kns:schedules entry) run the user's image as built: "
        "its user is the image's business, the platform cannot pick a UID that image works with",
    "container-security-context-readonlyrootfilesystem":
        "user workloads again: arbitrary user images write to their root filesystem (caches, /tmp)",
    "container-ephemeral-storage-request-and-limit":
        "user workloads whose entry sets no `storage`: local disk is left unbounded on purpose, a default "
        "limit would evict jobs that write more than it",
    "container-image-pull-policy":
        "user workloads: imagePullPolicy is the entry's own key; unset, Kubernetes' default applies "
        "(the platform's Deployments pull Always)",
    "pod-probes-identical":
        "the KNS scheduler Deployment: the JARVICE image offers only its TCP port to probe, so readiness and "
        "liveness can only differ in their timings",
    "pod-networkpolicy":
        "with kns:network.isolation: none the network is the site's (the CNI, the ingress controller, where the "
        "API server, the JARVICE upstream and the users' data are) and the platform emits no NetworkPolicy; "
        "isolated (the default), every namespace it makes has one and no object carries this exception",
    "networkpolicy-targets-pod":
        "the NetworkPolicy of a `type: namespace` entry (docs/network.md): the namespace holds what its users "
        "start, so no object of the stack runs a pod there for the policy to select",
    "deployment-replicas":
        "the KNS scheduler Deployment with replicas: 1, the KNS's documented default; `replicas` is the site's. "
        "The Kueue controller the program installs (kns:queueing.install): upstream's single replica, whose "
        "manager leader-elects, so a second replica would only stand by (docs/queueing.md)",
}


@dataclass(frozen=True)
class Linters:
    bin: Path
    schemas: Path
    crd_schemas: Path

    @property
    def kubeconform(self) -> str:
        return str(self.bin / "kubeconform")

    @property
    def kube_score(self) -> str:
        return str(self.bin / "kube-score")


@pytest.fixture(scope="module")
def linters(tmp_path_factory) -> Linters:
    build = subprocess.run(["bash", str(ROOT / "scripts" / "linters.sh")], capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, f"scripts/linters.sh failed:\n{build.stderr[-3000:]}"
    lines = build.stdout.splitlines()
    assert len(lines) == 3, f"scripts/linters.sh must print the bin dir, the schema dir and netpol-check's:\n{build.stdout}"
    found = Linters(Path(lines[0]), Path(lines[1]), crd_schemas(tmp_path_factory.mktemp("crd-schemas")))
    assert Path(found.kubeconform).is_file() and Path(found.kube_score).is_file(), found
    assert (found.schemas / "deployment-apps-v1.json").is_file() and (found.schemas / "namespace-v1.json").is_file()
    return found


def _strict(schema: Any) -> Any:
    """A CRD's structural schema made strict as kubeconform's own schemas are: an object
    with properties and no additionalProperties of its own takes no unknown field."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _write_crd_schema(directory: Path, api_version: str, kind: str, schema: dict[str, Any]) -> None:
    """One kind's schema, strict, as `<kind>-<group's first label>-<version>.json`."""
    group, _, version = api_version.rpartition("/")
    schema = _strict(schema)
    schema["properties"]["apiVersion"] = {"enum": [api_version]}
    schema["properties"]["kind"] = {"enum": [kind]}
    (directory / f"{kind.lower()}-{group.split('.')[0]}-{version}.json").write_text(json.dumps(schema))


def crd_schemas(directory: Path) -> Path:
    """kubeconform schemas for the CRD kinds the program emits, named as kubeconform looks
    them up: the Karpenter NodePool, from the CRD of the pinned Karpenter module, and every
    Kueue kind at the version the program writes (ClusterQueue, ResourceFlavor, LocalQueue,
    WorkloadPriorityClass, Topology), from the CRDs of the vendored Kueue install."""
    _write_crd_schema(directory, "karpenter.sh/v1", "NodePool", apiserver.crd_schema("karpenter.sh", "v1", "NodePool"))
    for crd in kueue_install.load(ROOT):
        if crd["kind"] != "CustomResourceDefinition":
            continue
        kind, group = crd["spec"]["names"]["kind"], crd["spec"]["group"]
        version = queues.API_VERSION.rpartition("/")[2]
        if group == queues.API_VERSION.rpartition("/")[0] and any(v["name"] == version for v in crd["spec"]["versions"]):
            _write_crd_schema(directory, queues.API_VERSION, kind, apiserver.kueue_crd_schema(version, kind))
    return directory


# ---- running the linters -------------------------------------------------------------------


def kubeconform(linters: Linters, *paths: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """kubeconform -strict on files or directories; the findings as `Kind namespace/name (file): message`."""
    done = subprocess.run(
        [linters.kubeconform, "-strict", "-summary", "-output", "json",
         "-kubernetes-version", KUBERNETES_VERSION,
         "-schema-location", f"{linters.schemas}/{{{{.ResourceKind}}}}{{{{.KindSuffix}}}}.json",
         "-schema-location", f"{linters.crd_schemas}/{{{{.ResourceKind}}}}{{{{.KindSuffix}}}}.json", *map(str, paths)],
        capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    findings = []
    for result in report["resources"]:
        if result["status"] in ("statusValid", "statusEmpty"):
            continue
        where = f"{result.get('kind')} {result.get('name')} ({Path(result['filename']).name})"
        errors = result.get("validationErrors") or [{"path": "", "msg": result.get("msg", "")}]
        findings += [f"{where}: {result['status']} at {e['path'] or '/'}: {e['msg']}" for e in errors]
    return done, findings


def kube_score(linters: Linters, *files: Path, ignore: dict[str, str] = KUBE_SCORE_IGNORED_TESTS
               ) -> tuple[subprocess.CompletedProcess, list[str]]:
    """kube-score on files; every check graded below OK (warning or critical) is a finding,
    `<object> [<check id>] <GRADE>: <comments>`."""
    args = [arg for test in ignore for arg in ("--ignore-test", test)]
    done = subprocess.run(
        [linters.kube_score, "score", "--output-format", "json", "--kubernetes-version", KUBE_SCORE_K8S,
         "--exit-one-on-warning", *args, *map(str, files)],
        capture_output=True, text=True, timeout=300)
    assert done.stdout.strip(), done.stderr
    findings = []
    for scored in json.loads(done.stdout):
        for check in scored["checks"]:
            if check["skipped"] or check["grade"] >= 10:
                continue
            grade = "CRITICAL" if check["grade"] <= 1 else "WARNING"
            comments = "; ".join(" ".join(filter(None, (c.get("path"), c.get("summary"))))
                                 for c in check.get("comments") or [])
            findings.append(f"{scored['object_name']} [{check['check']['id']}] {grade}: {comments}")
    return done, sorted(findings)


def manifests(directory: Path) -> list[Path]:
    files = sorted(directory.rglob("*.yaml"))
    assert files, f"nothing rendered in {directory}"
    return files


# ---- rendering the stacks ------------------------------------------------------------------


@pytest.fixture(scope="module")
def toolchain() -> str:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], capture_output=True, text=True, timeout=5400)
    assert done.returncode == 0, f"scripts/toolchain.sh failed:\n{done.stderr[-3000:]}"
    return done.stdout.strip()


def render(root: Path, bin_dir: str, stack: str, stack_file: str) -> Path:
    env = engine_project(root, bin_dir, PASSPHRASE)
    (root / f"Pulumi.{stack}.yaml").write_text(stack_file)
    for args in (("stack", "init", stack), ("up", "--yes")):
        done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=root, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"pulumi {' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    render_dir = yaml.safe_load(stack_file)["config"]["kns:cluster"]["renderDir"]
    return root / render_dir


def local_stack_file() -> str:
    """tests/e2e/Pulumi.local.yaml, rendered to a directory instead of applied."""
    document = yaml.safe_load((ROOT / "tests" / "e2e" / "Pulumi.local.yaml").read_text())
    cluster = document["config"]["kns:cluster"]
    assert cluster.pop("kubeconfig") == "KUBECONFIG_PATH"
    cluster["renderDir"] = "build/manifests/local"
    return yaml.safe_dump(document, sort_keys=False)


STACKS = {
    "dev": lambda: (ROOT / "Pulumi.dev.yaml").read_text(),
    "local": local_stack_file,
}


@pytest.fixture(scope="module", params=sorted(STACKS))
def rendered(request, toolchain, tmp_path_factory) -> Path:
    stack = request.param
    root = tmp_path_factory.mktemp(f"lint-{stack}") / "kns-platform"
    return render(root, toolchain, stack, STACKS[stack]())


# ---- the rendered stacks pass ---------------------------------------------------------------


def test_the_linters_are_the_pinned_versions(linters):
    versions = pinned_versions()
    done = subprocess.run([linters.kube_score, "version"], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith(f"kube-score version: {versions['KUBE_SCORE_VERSION']},"), done.stdout
    done = subprocess.run([linters.kubeconform, "-v"], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == f"v{versions['KUBECONFORM_VERSION']}"
    assert linters.schemas.name == f"kubeconform-schemas-{KUBERNETES_VERSION}"


def test_kubeconform_strict_finds_nothing(linters, rendered):
    done, findings = kubeconform(linters, rendered)
    assert findings == [], "\n".join(findings)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)["summary"]
    assert summary["valid"] == len([d for f in manifests(rendered) for d in yaml.safe_load_all(f.read_text()) if d])
    assert summary["skipped"] == 0  # every kind has its schema: nothing passes unchecked


def test_kube_score_finds_nothing_outside_the_documented_exceptions(linters, rendered):
    done, findings = kube_score(linters, *manifests(rendered))
    assert findings == [], "\n".join(findings)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr


def test_every_kube_score_ignore_annotation_is_a_documented_exception(rendered):
    for path in manifests(rendered):
        for document in filter(None, yaml.safe_load_all(path.read_text())):
            annotations = (document.get("metadata") or {}).get("annotations") or {}
            ignored = [t.strip() for t in annotations.get("kube-score/ignore", "").split(",") if t.strip()]
            undocumented = set(ignored) - set(ANNOTATED_EXCEPTIONS)
            assert not undocumented, f"{path.name}: kube-score/ignore {sorted(undocumented)} is not in ANNOTATED_EXCEPTIONS"


# ---- and the linters can fail ---------------------------------------------------------------

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: lint}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: registry.k8s.io/pause:3.10
"""


def test_kubeconform_fails_on_an_unknown_field_and_a_wrong_type(linters, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(DEPLOYMENT)
    done, findings = kubeconform(linters, good)
    assert done.returncode == 0 and findings == [], findings
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEPLOYMENT.replace("          image:", "          imagePullPolicyy: Always\n          image:")
                   .replace("replicas: 2", 'replicas: "2"'))
    done, findings = kubeconform(linters, bad)
    assert done.returncode == 1, done.stdout
    assert any(re.search(r"/spec/template/spec/containers/0: additional properties 'imagePullPolicyy' not allowed", f)
               for f in findings), findings
    assert any(re.search(r"/spec/replicas: got string, want integer", f) for f in findings), findings
    # A kind with no schema is an error, never a silent pass.
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("apiVersion: example.org/v1\nkind: Widget\nmetadata: {name: w}\n")
    done, findings = kubeconform(linters, unknown)
    assert done.returncode == 1 and any("could not find schema" in f for f in findings), findings


def test_kube_score_fails_on_a_deployment_without_resource_limits(linters, tmp_path):
    bad = tmp_path / "deployment.yaml"
    bad.write_text(DEPLOYMENT)
    done, findings = kube_score(linters, bad)
    assert done.returncode != 0
    assert any(re.search(r"^Deployment/apps/v1/lint/web \[container-resources\] CRITICAL: .*CPU limit is not set", f)
               for f in findings), findings
    # The same object, its finding ignored by the annotation the program would set.
    annotated = tmp_path / "annotated.yaml"
    annotated.write_text(DEPLOYMENT.replace("metadata: {name: web, namespace: lint}",
                                            "metadata: {name: web, namespace: lint, "
                                            "annotations: {kube-score/ignore: container-resources}}"))
    _, findings_annotated = kube_score(linters, annotated)
    assert not [f for f in findings_annotated if "[container-resources]" in f]
    assert len(findings_annotated) < len(findings)
