"""The JSON Schemas of docs/schema: generated from the models, valid for every example file,
and in agreement with the loader (what one rejects the other rejects, at the same path)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from config import models
from config.errors import ConfigError
from config.loader import parse_config
from config.source import NAMESPACE, STRING_KEYS
from kns_testing.program import ROOT
from tools import schema

SCHEMA_DIR = ROOT / "docs" / "schema"
MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")
JOB_FILES = sorted((ROOT / "jobs").glob("*.yaml"))
STACK_FILES = sorted([*ROOT.glob("Pulumi.*.yaml"), *(ROOT / "tests" / "e2e").glob("Pulumi.*.yaml")])

CLUSTER = {"name": "kns-test", "renderDir": "out"}
GPU_POOL = {"name": "a100", "role": "gpu", "nodes": ["g1"], "gpu": {"vendor": "nvidia", "perNode": 8}}
KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: kns
clusters:
- name: kns
  cluster: {server: "https://127.0.0.1:6443"}
contexts:
- name: kns
  context: {cluster: kns, user: admin}
"""


def checked_in(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))


def validator(name: str) -> jsonschema.Draft202012Validator:
    # No format_checker: formats are annotations only.
    return jsonschema.Draft202012Validator(checked_in(name))


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ---- the files are current --------------------------------------------------------------


def test_checked_in_schemas_are_what_the_models_generate():
    stale = schema.stale(SCHEMA_DIR)
    assert not stale, (
        f"docs/schema/{', '.join(stale)} differ from what config/models.py generates: run `make schema` "
        "and commit the result"
    )


def test_the_freshness_check_fails_when_a_model_changes(monkeypatch):
    before = schema.rendered()

    class Job(models.Job):
        added_by_test: int = 0

    monkeypatch.setattr(models, "Job", Job)
    after = schema.rendered()
    assert sorted(schema.stale(SCHEMA_DIR)) == sorted([schema.JOB_FILE, schema.STACK_CONFIG])
    for name in (schema.JOB_FILE, schema.STACK_CONFIG):
        assert after[name] != before[name]
        assert '"addedByTest"' in after[name] and '"addedByTest"' not in before[name]


def test_output_is_deterministic_and_formatted():
    first, second = schema.rendered(), schema.rendered()
    assert first == second
    for name, text in first.items():
        assert text.endswith("}\n") and not text.endswith("\n\n")
        document = json.loads(text)
        assert text == json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", [schema.JOB_FILE, schema.STACK_CONFIG])
def test_schemas_are_draft_2020_12(name):
    document = checked_in(name)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(document)


def test_models_forbid_extra_keys_and_so_do_their_schemas():
    definitions = checked_in(schema.STACK_CONFIG)["$defs"]
    for name, definition in definitions.items():
        if name != schema.CREDENTIALS:
            assert definition["additionalProperties"] is False, name
    assert checked_in(schema.JOB_FILE)["additionalProperties"] is False
    assert checked_in(schema.STACK_CONFIG)["properties"]["config"]["additionalProperties"] is False


def test_help_comes_from_docstrings():
    definitions = checked_in(schema.STACK_CONFIG)["$defs"]
    assert definitions["KnsScheduler"]["description"] == models.KnsScheduler.__doc__.strip()
    assert definitions["Profile"]["description"].startswith("One profile rule.")
    assert all(d.get("description") for d in definitions.values())


# ---- every example validates, and names its schema ---------------------------------------


def _modeline_target(path: Path) -> Path:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    match = MODELINE.match(first)
    assert match, f"{rel(path)}: the first line is not a yaml-language-server modeline: {first!r}"
    return (path.parent / match[1]).resolve()


@pytest.mark.parametrize("path", JOB_FILES, ids=rel)
def test_job_files_validate_and_name_their_schema(path):
    assert _modeline_target(path) == (SCHEMA_DIR / schema.JOB_FILE).resolve()
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator(schema.JOB_FILE).iter_errors(document)]
    assert not errors


@pytest.mark.parametrize("path", STACK_FILES, ids=rel)
def test_stack_files_validate_name_their_schema_and_load(path, tmp_path):
    assert _modeline_target(path) == (SCHEMA_DIR / schema.STACK_CONFIG).resolve()
    text = path.read_text(encoding="utf-8")
    document = yaml.safe_load(text)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator(schema.STACK_CONFIG).iter_errors(document)]
    assert not errors
    # The program reads the file as it did before the modeline (the e2e stack's kubeconfig
    # placeholder is filled in as tests/test_e2e.py does).
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    document = yaml.safe_load(text.replace("KUBECONFIG_PATH", str(tmp_path / "kubeconfig")))
    assert loader_problems(document) == []


def test_the_modeline_is_only_a_comment():
    for path in [*JOB_FILES, *STACK_FILES]:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        assert yaml.safe_load("".join(lines)) == yaml.safe_load("".join(lines[1:]))


# ---- agreement with the loader ----------------------------------------------------------

# Ciphertexts the tests "decrypt"; any other secure value decrypts to "decrypted".
PLAINTEXT = {"v1:creds": json.dumps({"s3": {"access-key": "AKIA", "secret-key": "x"}})}


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def _unseal(value: Any) -> tuple[Any, bool]:
    """`value` decrypted, and whether anything in it was secure (then the engine marks the key secret)."""
    if _is_secure(value):
        return PLAINTEXT.get(value["secure"], "decrypted"), True
    if isinstance(value, dict):
        pairs = {k: _unseal(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        pairs = [_unseal(v) for v in value]
        return [v for v, _ in pairs], any(s for _, s in pairs)
    return value, False


def loader_view(document: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """What the engine hands the program for this stack file: `kns:` keys without the prefix,
    secure values decrypted (their keys secret), text decoded as JSON (read_pulumi_config)."""
    raw: dict[str, Any] = {}
    secret = set()
    for key, value in ((document or {}).get("config") or {}).items():
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        value, sealed = _unseal(value)
        if name not in STRING_KEYS and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        raw[name] = value
        if sealed:
            secret.add(name)
    return raw, frozenset(secret)


def loader_problems(document: Any, project_dir: Path = ROOT) -> list[str]:
    raw, secret = loader_view(document)
    try:
        parse_config(raw, project_dir=project_dir, secret_keys=secret, environ={})
    except ConfigError as exc:
        return [p.path for p in exc.problems]
    return []


def _leaf_errors(error: jsonschema.ValidationError) -> Iterator[jsonschema.ValidationError]:
    """The errors that say what is wrong: inside anyOf, those of the alternative that fits
    best (as editors pick the best-matching alternative): whose errors go deepest, and then
    whose shape (type, keys) the value has."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        branches: dict[Any, list] = defaultdict(list)
        for sub in error.context:
            branches[sub.relative_schema_path[0]].append(sub)

        def fit(subs: list) -> tuple[int, int]:
            shape = sum(1 for s in subs if not s.path and s.validator in SHAPE)
            return max(len(s.absolute_path) for s in subs), -shape

        best = max(branches.values(), key=fit)
        for sub in best:
            yield from _leaf_errors(sub)
    else:
        yield error


ENTRY_LISTS = ("jobs", "schedules", "nodePools")
SHAPE = {"type", "required", "additionalProperties", "const", "enum"}


def _loader_path(steps: list[Any], document: Any, job_file: Optional[str]) -> str:
    """A document path in the loader's notation: `kns:jobs[name].memory`, `a.yaml:jobs[0].name`."""
    if job_file is None:
        assert steps[0] == "config", steps
        steps = steps[1:]
        key = steps[0]
        out, node = key, document["config"].get(key)
        short = key.partition(":")[2]
    else:
        if not steps:
            return job_file
        key = steps[0]
        out, node, short = f"{job_file}:{key}", document.get(key), key
    rest = steps[1:]
    if rest and short in ENTRY_LISTS and isinstance(rest[0], int):
        item = node[rest[0]]
        name = item.get("name") if isinstance(item, dict) else None
        out += f"[{name}]" if isinstance(name, str) and name else f"[{rest[0]}]"
        rest = rest[1:]
    elif rest and short == "profiles":
        out += f"[{rest[0]}]"
        rest = rest[1:]
    for step in rest:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


def schema_problems(document: Any, name: str, job_file: Optional[str] = None) -> list[str]:
    """The paths, in the loader's notation, of every schema error in `document`."""
    paths = []
    for top in validator(name).iter_errors(document):
        for error in _leaf_errors(top):
            steps = list(error.absolute_path)
            where = list(error.absolute_schema_path)
            if error.validator == "additionalProperties":
                allowed = set(error.schema.get("properties", {}))
                patterns = list(error.schema.get("patternProperties", {}))
                extra = [k for k in error.instance if k not in allowed and not any(re.search(p, k) for p in patterns)]
                paths += [_loader_path(steps + [k], document, job_file) for k in extra]
                continue
            if error.validator == "required" and "then" not in where:
                # A missing field is reported at the field; a rule's (then) at the object.
                steps.append(re.match(r"^'(.*)' is a required property$", error.message)[1])
            elif "propertyNames" in where:
                steps.append(error.instance)
            paths.append(_loader_path(steps, document, job_file))
    return paths


def stack(config: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"config": {"kns:cluster": CLUSTER, "kns:nodePools": [GPU_POOL], **config}, **top}


JOB = {"name": "j", "image": "busybox:1.37"}
SCHEDULE = {"name": "s", "image": "busybox:1.37", "schedule": "0 3 * * *"}

AUTO = {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}
AUTOSCALED = {"name": "auto", "role": "compute", "autoscale": AUTO}

# Stack files both reject: the document and the path both report.
REJECTED = {
    # unknown keys, typos of known ones
    "unknown kns: key": ({"kns:job": []}, "kns:job"),
    "typo in an entry": ({"kns:jobs": [JOB | {"memroy": "1Gi"}]}, "kns:jobs[j].memroy"),
    "typo in kns:cluster": ({"kns:cluster": CLUSTER | {"forbiddenContext": ["x"]}}, "kns:cluster.forbiddenContext"),
    "typo in a nested object": ({"kns:jobs": [JOB | {"limitRange": {"defaults": {"cpu": 1}}}]}, "kns:jobs[j].limitRange.defaults"),
    "typo in kns:knsScheduler": ({"kns:knsScheduler": {"jobDomain": "x"}}, "kns:knsScheduler.jobDomain"),
    # wrong types
    "string for an integer": ({"kns:jobs": [JOB | {"gpus": "two"}]}, "kns:jobs[j].gpus"),
    "number in a string list": ({"kns:jobs": [JOB | {"args": ["--epochs", 90]}]}, "kns:jobs[j].args[1]"),
    "string for a list": ({"kns:jobs": "oops"}, "kns:jobs"),
    "string for the node list": ({"kns:nodePools": [{"name": "c", "role": "compute", "nodes": "n1"}]}, "kns:nodePools[c].nodes"),
    "list as an env value": ({"kns:jobs": [JOB | {"env": {"A": [1]}}]}, "kns:jobs[j].env.A"),
    "string for a mapping": ({"kns:packingScheduler": "fast"}, "kns:packingScheduler"),
    # bad enum values
    "taint effect": ({"kns:nodePools": [{"name": "c", "role": "compute", "nodes": ["n"], "taints": [{"key": "k", "effect": "Never"}]}]},
                     "kns:nodePools[c].taints[0].effect"),
    "pool role": ({"kns:nodePools": [{"name": "c", "role": "gpus", "nodes": ["n"]}]}, "kns:nodePools[c].role"),
    "image pull policy": ({"kns:jobs": [JOB | {"imagePullPolicy": "Sometimes"}]}, "kns:jobs[j].imagePullPolicy"),
    "packing strategy": ({"kns:packingScheduler": {"strategy": "LeastAllocated"}}, "kns:packingScheduler.strategy"),
    # missing required fields
    "autoscale without nodeClassRef": ({"kns:nodePools": [{"name": "c", "role": "compute", "autoscale": {}}]},
                                       "kns:nodePools[c].autoscale.nodeClassRef"),
    "schedule without schedule": ({"kns:schedules": [{"name": "s", "image": "i"}]}, "kns:schedules[s].schedule"),
    "entry without a name": ({"kns:jobs": [{"image": "i"}]}, "kns:jobs[0].name"),
    "GPU spec without perNode": ({"kns:nodePools": [{"name": "g", "role": "gpu", "nodes": ["n"], "gpu": {"vendor": "amd"}}]},
                                 "kns:nodePools[g].gpu.perNode"),
    "keycloak without clientId": ({"kns:knsScheduler": {"keycloak": {"url": "https://k", "realm": "r"}}},
                                  "kns:knsScheduler.keycloak.clientId"),
    "cluster without a name": ({"kns:cluster": {"renderDir": "out"}}, "kns:cluster.name"),
    # values the validators refuse
    "bad quantity": ({"kns:jobs": [JOB | {"memory": "12Qi"}]}, "kns:jobs[j].memory"),
    "negative CPU": ({"kns:jobs": [JOB | {"cpu": -2}]}, "kns:jobs[j].cpu"),
    "negative CPU string": ({"kns:jobs": [JOB | {"cpu": "-500m"}]}, "kns:jobs[j].cpu"),
    "zero CPU": ({"kns:jobs": [JOB | {"cpu": 0}]}, "kns:jobs[j].cpu"),
    "bad name": ({"kns:jobs": [JOB | {"name": "Train_ResNet"}]}, "kns:jobs[Train_ResNet].name"),
    "name too long": ({"kns:jobs": [JOB | {"name": "a" * 41}]}, f"kns:jobs[{'a' * 41}].name"),
    "six-field cron": ({"kns:schedules": [SCHEDULE | {"schedule": "0 30 2 * * *"}]}, "kns:schedules[s].schedule"),
    "interval descriptor": ({"kns:schedules": [SCHEDULE | {"schedule": "@every 1h"}]}, "kns:schedules[s].schedule"),
    "JSON pointer": ({"kns:jobs": [JOB | {"jsonOverrides": [{"path": "spec/x", "value": 1}]}]}, "kns:jobs[j].jsonOverrides[0].path"),
    "podSpec without containers": ({"kns:jobs": [{"name": "j", "podSpec": {"containers": []}}]},
                                   "kns:jobs[j].podSpec.containers"),
    "bad credential set name": ({"kns:credentials": {"S3": {"key": {"secure": "v1:x"}}}}, "kns:credentials.S3"),
    "requirement operator": ({"kns:nodePools": [AUTOSCALED | {"autoscale": AUTO | {"requirements": [
        {"key": "kubernetes.io/os", "operator": "Equals", "values": ["linux"]}]}}]},
        "kns:nodePools[auto].autoscale.requirements[0].operator"),
    "consolidateAfter": ({"kns:nodePools": [AUTOSCALED | {"autoscale": AUTO | {"consolidateAfter": "5 minutes"}}]},
                         "kns:nodePools[auto].autoscale.consolidateAfter"),
    "NodePool weight": ({"kns:nodePools": [AUTOSCALED | {"autoscale": AUTO | {"weight": 0}}]},
                        "kns:nodePools[auto].autoscale.weight"),
    # secret keys stored in plain text
    "plain keycloakClientSecret": ({"kns:keycloakClientSecret": "hunter2"}, "kns:keycloakClientSecret"),
    "plain credentials": ({"kns:credentials": {"s3": {"access-key": "AKIA"}}}, "kns:credentials"),
}

# Rules of the model validators that one object shows alone: the program reports them at
# the object, the schema at the object or at the field the rule is about.
RULES = {
    "NodePool limit": ({"kns:nodePools": [AUTOSCALED | {"autoscale": AUTO | {"limits": {"cpu": "lots"}}}]},
                       "kns:nodePools[auto].autoscale.limits"),
    "pool without nodes or autoscale": ({"kns:nodePools": [{"name": "c", "role": "compute"}]}, "kns:nodePools[c]"),
    "pool with nodes and autoscale": ({"kns:nodePools": [AUTOSCALED | {"nodes": ["n"]}]}, "kns:nodePools[auto]"),
    "In without values": ({"kns:nodePools": [AUTOSCALED | {"autoscale": AUTO | {"requirements": [
        {"key": "kubernetes.io/os", "operator": "In"}]}}]}, "kns:nodePools[auto].autoscale.requirements[0]"),
    "Gt with a word": ({"kns:nodePools": [AUTOSCALED | {"autoscale": AUTO | {"requirements": [
        {"key": "example.com/cores", "operator": "Gt", "values": ["many"]}]}}]},
        "kns:nodePools[auto].autoscale.requirements[0]"),
    "Exists with values": ({"kns:nodePools": [AUTOSCALED | {"autoscale": AUTO | {"requirements": [
        {"key": "example.com/x", "operator": "Exists", "values": ["a"]}]}}]},
        "kns:nodePools[auto].autoscale.requirements[0]"),
    "GPU pool without gpu": ({"kns:nodePools": [{"name": "g", "role": "gpu", "nodes": ["n"]}]}, "kns:nodePools[g]"),
    "gpu on a compute pool": ({"kns:nodePools": [{"name": "c", "role": "compute", "nodes": ["n"], "gpu": {"perNode": 1}}]},
                              "kns:nodePools[c]"),
    "KNS scheduler without image": ({"kns:knsScheduler": {"enabled": True}}, "kns:knsScheduler"),
    "type namespace with an image": ({"kns:jobs": [JOB | {"type": "namespace"}]}, "kns:jobs[j].image"),
    "podSpec beside cpu": ({"kns:jobs": [{"name": "j", "cpu": 1, "podSpec": {"containers": [{"name": "c", "image": "i"}]}}]},
                           "kns:jobs[j].cpu"),
    "both warm-up keys": ({"kns:schedules": [SCHEDULE | {"warmUpMinutes": 10, "primerSchedule": "50 2 * * *"}]},
                          "kns:schedules[s].primerSchedule"),
}

# Stack files both accept.
ACCEPTED = {
    "an autoscaled pool": stack({"kns:nodePools": [GPU_POOL, AUTOSCALED | {"autoscale": AUTO | {
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"], "minValues": 1},
                         {"key": "example.com/cores", "operator": "Gte", "values": ["4"]},
                         {"key": "example.com/x", "operator": "DoesNotExist"}],
        "limits": {"cpu": 64, "memory": 4096, "nvidia.com/gpu": "8", "nodes": 10},
        "consolidation": "WhenEmpty", "consolidateAfter": "1m30s", "expireAfter": "Never", "weight": 100}}]}),
    "only the cluster": {"config": {"kns:cluster": CLUSTER}},
    "null sections": {"config": {"kns:cluster": CLUSTER, "kns:packingScheduler": None, "kns:knsScheduler": None,
                                 "kns:jobs": None, "kns:profiles": {"*": None}, "kns:jobFiles": None}},
    "other namespaces and Pulumi settings": stack({"kubernetes:context": "x", "kns-platform:note": {"any": 1}},
                                                  encryptionsalt="v1:abc", secretsprovider="passphrase"),
    "numbers and strings for quantities": stack({"kns:jobs": [
        JOB | {"name": "a", "cpu": 0.5, "memory": 4096, "storage": "10Gi"},
        JOB | {"name": "b", "cpu": "500m", "memory": "4Gi", "memoryLimit": 8192, "cpuLimit": 2},
        JOB | {"name": "c", "cpu": "2", "memory": "4096Mi", "extraResources": {"example.com/fpga": 1}},
    ]}),
    "quoted integers, numbers and booleans": stack({
        "kns:jobs": [JOB | {"gpus": "2", "ttlHours": "48", "backoffLimit": "3"}],
        "kns:schedules": [SCHEDULE | {"suspend": "yes", "warmUpMinutes": "10"}],
        "kns:packingScheduler": {"enabled": "on", "replicas": 2.0},
    }),
    "snake_case keys": stack({"kns:jobs": [JOB | {"ttl_hours": 2, "backoff_limit": 1}],
                              "kns:nodePools": [GPU_POOL | {"gpu": {"per_node": 4}}]}),
    "namespace entry with a quota": stack({"kns:jobs": [{"name": "sandbox", "type": "namespace", "user": "eve",
                                                         "quota": {"pods": 2, "requests.cpu": 1, "limits.memory": "1Gi"}}]}),
    "env values": stack({"kns:jobs": [JOB | {"env": {"A": "x", "B": 2, "C": True, "D": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}}}]}),
    "podSpec": stack({"kns:jobs": [{"name": "raw", "podSpec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}}]}),
    "secure keycloakClientSecret": stack({
        "kns:knsScheduler": {"enabled": True, "image": "kns:1", "keycloak": {"url": "https://k", "realm": "r", "clientId": "kns"}},
        "kns:keycloakClientSecret": {"secure": "v1:kc"},
    }),
    "secure credential files": stack({
        "kns:credentials": {"s3": {"access-key": {"secure": "v1:a"}, "secret-key": {"secure": "v1:b"}}},
        "kns:jobs": [JOB | {"credentials": ["s3"], "credentialsMountPath": "/proxy"}],
    }),
    "credentials secured whole": stack({"kns:credentials": {"secure": "v1:creds"}, "kns:jobs": [JOB | {"credentials": ["s3"]}]}),
    "secure inline kubeconfig": stack({"kns:cluster": CLUSTER | {"kubeconfig": {"secure": "v1:kubeconfig"}}}),
    "schedule with warm-up": stack({"kns:schedules": [SCHEDULE | {"schedule": "0 6 * * *", "timeZone": "Europe/Paris",
                                                                  "warmUpMinutes": 10}]}),
    "descriptor schedule": stack({"kns:schedules": [SCHEDULE | {"schedule": "@daily", "warmUpMinutes": 10}]}),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_what_the_loader_rejects_the_schema_rejects_at_the_same_path(case):
    config, path = REJECTED[case]
    document = stack(config)
    found_by_loader = loader_problems(document)
    found_by_schema = schema_problems(document, schema.STACK_CONFIG)
    assert path in found_by_loader, found_by_loader
    assert path in found_by_schema, found_by_schema
    # and nothing the program would not report
    assert set(found_by_schema) <= set(found_by_loader), found_by_schema


@pytest.mark.parametrize("case", sorted(RULES))
def test_rules_of_one_object_are_reported_at_or_under_the_same_path(case):
    config, path = RULES[case]
    document = stack(config)
    found_by_loader = loader_problems(document)
    found_by_schema = schema_problems(document, schema.STACK_CONFIG)
    assert path in found_by_loader, found_by_loader
    assert found_by_schema and all(p == path or p.startswith(path + ".") for p in found_by_schema), found_by_schema


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_the_schema_accepts_the_loader_accepts(case):
    document = ACCEPTED[case]
    assert schema_problems(document, schema.STACK_CONFIG) == []
    assert loader_problems(document) == []


JOB_FILE_CASES = {
    "unknown top-level key": ("jobs: []\nextra: 1\n", ["team/a.yaml:extra"]),
    "typo in an entry": ("jobs:\n  - {name: j, image: i, imagee: x}\n", ["team/a.yaml:jobs[j].imagee"]),
    "entry without a name": ("jobs:\n  - {image: i}\n", ["team/a.yaml:jobs[0].name"]),
    "bad quantity": ("jobs:\n  - {name: j, image: i, cpu: lots}\n", ["team/a.yaml:jobs[j].cpu"]),
    "bad enum": ("schedules:\n  - {name: s, image: i, schedule: '0 * * * *', concurrencyPolicy: Never}\n",
                 ["team/a.yaml:schedules[s].concurrencyPolicy"]),
    "schedule of type namespace": ("schedules:\n  - {name: s, schedule: '0 * * * *', type: namespace}\n",
                                   ["team/a.yaml:schedules[s].type"]),
    "not a list": ("jobs: {name: j}\n", ["team/a.yaml:jobs"]),
    "empty file": ("", []),
    "only schedules": ("schedules:\n  - {name: s, image: i, schedule: '*/5 * * * *', cpu: 250m, memory: 128}\n", []),
    "null lists": ("jobs:\nschedules:\n", []),
}


@pytest.mark.parametrize("case", sorted(JOB_FILE_CASES))
def test_job_files_agree_with_the_loader(case, tmp_path):
    text, paths = JOB_FILE_CASES[case]
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "a.yaml").write_text(text)
    document = {"config": {"kns:cluster": CLUSTER, "kns:jobFiles": ["team/*.yaml"]}}
    found_by_loader = loader_problems(document, project_dir=tmp_path)
    found_by_schema = schema_problems(yaml.safe_load(text), schema.JOB_FILE, job_file="team/a.yaml")
    for path in paths:
        assert path in found_by_loader, found_by_loader
        assert any(p == path or p.startswith(path + ".") for p in found_by_schema), found_by_schema
    if not paths:
        assert found_by_loader == [] and found_by_schema == []


# ---- what the validators accept, the schema accepts --------------------------------------


def _model_accepts(model: type, item: dict[str, Any]) -> bool:
    try:
        model.model_validate(item)
    except ValidationError:
        return False
    return True


def _schema_accepts(config: dict[str, Any]) -> bool:
    return not list(validator(schema.STACK_CONFIG).iter_errors({"config": {"kns:cluster": CLUSTER, **config}}))


# field, samples the program accepts (so must the schema), samples both refuse
SCALARS = {
    "cpu": ([1, 2, 0.5, 0.25, "500m", "2", " 1 ", "+1", "1e3", "1.5", ".5", 1e-3],
            ["12Qi", "-1", -1, 0, "0", "0m", "", "m", "1 m", True, [1]]),
    "memory": ([1, 4096, 1.5, "4Gi", "512Mi", "1Mi", "1e9", " 2Gi "],
               ["12Qi", "-1Gi", -1, 0, 0.5, "0", "", True]),
    "gpus": ([0, 2, 2.0, "2", " 2 ", "+2", "2.00", "02"],
             ["two", "2.5", 2.5, "", None, -1, [2]]),
    "ttlHours": ([48, 0.5, 0, "48", "0.5", "1e1", ".5", "1."],
                 ["abc", "", None, -1, [1]]),
    "privileged": ([True, False, "yes", "No", "on", "OFF", "t", "F", "1", "0", 0, 1],
                   ["maybe", 2, "", None, " yes", [True]]),
}


@pytest.mark.parametrize("field", sorted(SCALARS))
def test_scalars_the_models_accept_the_schema_accepts(field):
    accepted, refused = SCALARS[field]
    for value in accepted:
        item = JOB | {field: value}
        assert _model_accepts(models.Job, item), value
        assert _schema_accepts({"kns:jobs": [item]}), value
    for value in refused:
        item = JOB | {field: value}
        assert not _model_accepts(models.Job, item), value
        assert not _schema_accepts({"kns:jobs": [item]}), value


def test_resource_maps_take_numbers_strings_and_zero():
    item = JOB | {"extraResources": {"example.com/fpga": 0, "hugepages-2Mi": "1Gi"}, "quota": {"pods": "2", "requests.memory": 512}}
    assert _model_accepts(models.Job, item) and _schema_accepts({"kns:jobs": [item]})
    item = JOB | {"quota": {"pods": -1}}
    assert not _model_accepts(models.Job, item) and not _schema_accepts({"kns:jobs": [item]})


def test_labels_follow_the_kubernetes_rules():
    good = {"app": "x", "kns.io/team": "ml", "example.com/a_b.c": "v-1", "x": ""}
    for key, value in good.items():
        item = JOB | {"labels": {key: value}}
        assert _model_accepts(models.Job, item) and _schema_accepts({"kns:jobs": [item]}), key
    for key, value in {"Bad Key": "v", "x": "-v", "UPPER.com/x": "v", "a" * 64: "v", "k": "v" * 64}.items():
        item = JOB | {"labels": {key: value}}
        assert not _model_accepts(models.Job, item) and not _schema_accepts({"kns:jobs": [item]}), key


def test_unknown_before_validators_stop_generation(monkeypatch):
    from pydantic import BeforeValidator

    class Job(models.Job):
        weird: Optional[Annotated[str, BeforeValidator(str)]] = None

    monkeypatch.setattr(models, "Job", Job)
    with pytest.raises(TypeError, match="before-validator"):
        schema.documents()


def test_every_kns_key_of_the_loader_is_described(monkeypatch):
    from config import loader

    monkeypatch.setattr(loader, "KNOWN_KEYS", (*loader.KNOWN_KEYS, "newKey"))
    with pytest.raises(TypeError, match="newKey"):
        schema.documents()
    config = checked_in(schema.STACK_CONFIG)["properties"]["config"]["properties"]
    assert all(config[key].get("description") for key in config)
