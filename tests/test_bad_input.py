"""Bad input through both doors: the real `__main__.py` under recording mocks and `./kns
validate`, on the same project copy (its stack file, job files and kubeconfig).

Each case is a member of one class of mistakes (docs/validation.md); it must give the same
path-qualified lines through both, with no traceback and nothing registered. Stack files
are written as text, because several classes live in the text itself (a key given twice,
a YAML 1.1 scalar, bytes that are not UTF-8).
"""

from __future__ import annotations

import re

from pathlib import Path
from typing import Callable

import pytest

from config import rules, yamldoc
from kns_testing.doors import STACK, both, delivered, job_file, problem_at, program_lines, project, stack_text, validate_lines, with_job_files
from kns_testing.program import ROOT, dev_stack_config, run_program, without_places


# ---- reading: bytes, depth, duplicate keys, YAML 1.1 scalars, keys ----------------------


@pytest.mark.parametrize("where", ["job file", "stack file", "kubeconfig"])
def test_bytes_that_are_not_utf8_are_a_config_error_wherever_they_are(tmp_path, capsys, where):
    bad = b"jobs:\n  - name: caf\xe9\n"
    if where == "job file":
        root = project(tmp_path, stack_text(with_job_files), job_file("latin1.yaml", bad))
        path = "jobs/latin1.yaml"
    elif where == "stack file":
        root = project(tmp_path, stack_text().encode() + b"# r\xe9sum\xe9\n")
        path = f"Pulumi.{STACK}.yaml"
    else:
        def kubeconfig(config):
            config["cluster"] = {"name": "kns-dev", "kubeconfig": "kube.yaml"}
        root = project(tmp_path, stack_text(kubeconfig), {"kube.yaml": b"current-context: \xff\n"})
        path = "kns:cluster.kubeconfig"
    if where == "stack file":
        # the engine would not start on it; both the program and validate stop on it
        code, lines, _ = validate_lines(capsys, root)
        assert code == 1 and lines == program_lines(root, config=dev_stack_config())
        lines = [line.removeprefix("  - ") for line in lines[1:]]
    else:
        lines = both(capsys, root)
    assert "is not UTF-8 text" in problem_at(lines, path)


def test_deep_nesting_is_refused_before_the_parser_recurses(tmp_path, capsys):
    deep = "jobs:\n  - name: deep\n    env: " + "[" * 5000 + "]" * 5000 + "\n"
    root = project(tmp_path, stack_text(with_job_files), job_file("deep.yaml", deep))
    lines = both(capsys, root)
    assert problem_at(lines, "jobs/deep.yaml") == f"is nested more than {yamldoc.MAX_DEPTH} levels deep (at line 3)"


@pytest.mark.parametrize("where", ["job file", "stack file"])
def test_a_key_given_twice_is_an_error_not_a_silent_replacement(tmp_path, capsys, where):
    if where == "job file":
        text = ("jobs:\n  - {name: first-list, user: bob, image: busybox:1.37}\n"
                "jobs:\n  - {name: second-list, user: bob, image: busybox:1.37}\n")
        root = project(tmp_path, stack_text(with_job_files), job_file("twice.yaml", text))
        path = "jobs/twice.yaml:jobs"
    else:
        root = project(tmp_path, stack_text(extra="kns:jobs: []"))
        path = "kns:jobs"
    lines = both(capsys, root)
    assert "is given twice (lines " in problem_at(lines, path)


def test_yaml_11_scalars_keep_the_text_or_are_refused(tmp_path, capsys):
    text = ("jobs:\n  - name: yaml-words\n    user: bob\n    image: busybox:1.37\n"
            "    env: {COUNTRY: NO, MODE: 0755, START: 12:30, RATIO: 1.10, SIZE: 10, FLAG: true}\n")
    root = project(tmp_path, stack_text(with_job_files), job_file("words.yaml", text))
    lines = both(capsys, root)
    base = "jobs/words.yaml:jobs[yaml-words].env"
    assert problem_at(lines, f"{base}.COUNTRY").startswith('is read as a boolean by some YAML readers')
    assert problem_at(lines, f"{base}.MODE").startswith('is read as an integer by some YAML readers')
    assert problem_at(lines, f"{base}.START").startswith('is read as an integer by some YAML readers')
    assert not [line for line in lines if line.startswith((f"{base}.RATIO", f"{base}.SIZE", f"{base}.FLAG"))]


@pytest.mark.parametrize("value", ["0x1f2e3d4c", "0755123", "0b1010", "12:30:45", "2026-01-01", "yes", ".inf"])
def test_an_ambiguous_value_is_never_repeated_in_its_problem(tmp_path, capsys, value):
    """It may be a secret (a client secret, a token in a job file's env) and problem lines
    reach CI logs: the line names the place and the reading, not the value."""
    text = ("jobs:\n  - name: yaml-secret\n    user: bob\n    image: busybox:1.37\n"
            f"    env: {{API_TOKEN: {value}}}\n")
    stack = stack_text(with_job_files, extra=f"kns:keycloakClientSecret: {value}")
    lines = both(capsys, project(tmp_path, stack, job_file("secret.yaml", text)))
    assert problem_at(lines, "jobs/secret.yaml:jobs[yaml-secret].env.API_TOKEN").startswith("is read as ")
    assert problem_at(lines, "kns:keycloakClientSecret").startswith("is read as ")
    assert not [line for line in lines if value in line], lines


def test_an_ambiguous_scalar_in_the_stack_file_is_one_problem_whichever_reader_delivered_it(tmp_path, capsys):
    """The engine reads the stack file as YAML 1.2 (0755 is 493 there), validate as YAML
    1.1 text: the problem is the text, said once, so both say the same."""
    text = stack_text(entry_change("cpu", "PLACEHOLDER")).replace("cpu: PLACEHOLDER", "cpu: 0755")
    root = project(tmp_path, text)
    config, _ = delivered(root)
    config["jobs"][0]["cpu"] = 493  # what a YAML 1.2 reader delivers
    code, lines, _ = validate_lines(capsys, root)
    assert code == 1 and lines == program_lines(root, config=config)
    assert [without_places(line) for line in lines[1:]] == [f'  - kns:jobs[{FIRST}].cpu: is read as an integer by some YAML readers and as text by '
                         'others; quote the value for the text, or write the number in plain decimal digits']


def test_user_no_is_refused_as_ambiguous_and_a_numeric_user_is_its_digits(tmp_path, capsys):
    def users(config):
        config["jobs"][0]["user"] = "PLACEHOLDER"
    text = stack_text(users).replace("user: PLACEHOLDER", "user: no")
    lines = both(capsys, project(tmp_path / "no", text))
    name = dev_stack_config()["jobs"][0]["name"]
    assert problem_at(lines, f"kns:jobs[{name}].user").startswith("is read as a boolean")

    def uid(config):
        config["profiles"] = {"1001": {"maxCpu": "2"}}
        config["jobs"][0]["user"] = "1001"
        config["jobs"][0]["cpu"] = "4"
    # a plain number as a profile key is a uid, taken as its digits
    lines = both(capsys, project(tmp_path / "uid", stack_text(uid).replace("'1001':", "1001:")))
    assert problem_at(lines, f"kns:jobs[{name}].cpu") == '4 CPU is over maxCpu 2 of profile rule "1001"'
    # a plain number where a name is expected is refused with the way out
    lines = both(capsys, project(tmp_path / "number", stack_text(uid).replace("user: '1001'", "user: 1001")))
    assert problem_at(lines, f"kns:jobs[{name}].user") == '1001 is a number; quote it ("1001") if you mean the text'


def test_a_profile_key_yaml_reads_as_a_boolean_must_be_quoted(tmp_path, capsys):
    def profiles(config):
        config["profiles"] = {"*": {"maxCpu": "8"}, "PLACEHOLDER": {"maxCpu": "2"}}
    lines = both(capsys, project(tmp_path, stack_text(profiles).replace("PLACEHOLDER:", "on:")))
    assert problem_at(lines, "kns:profiles[on]") == '"on" as a key is read as a boolean by some YAML readers; quote this key'


# ---- the same verdict from both doors ------------------------------------------------------


def test_an_empty_list_key_is_unset_in_both(tmp_path, capsys):
    def drop_jobs(config):
        config.pop("jobs")
    root = project(tmp_path, stack_text(drop_jobs, extra="kns:jobs:"))
    assert both(capsys, root) == []


def test_a_secret_inline_kubeconfig_is_left_to_the_program(tmp_path, capsys):
    def inline(config):
        config["cluster"] = {"name": "kns-dev", "kubeconfig": {"secure": "v1:AAAAAAAAAAAAAAAA:BBBBBBBB"}}
    root = project(tmp_path, stack_text(inline))
    code, lines, out = validate_lines(capsys, root)
    assert (code, lines) == (0, [])
    assert "not checked offline: kns:cluster.kubeconfig: encrypted" in out
    # the program has the decrypted text, and still guards against a forbidden context
    config = dev_stack_config()
    config["cluster"] = {"name": "kns-dev", "forbiddenContexts": ["jarvice-upstream"],
                         "kubeconfig": "apiVersion: v1\nkind: Config\ncurrent-context: Jarvice-Upstream \n"}
    assert program_lines(root, config=config, secret=("cluster",))[1:] == [
        '  - kns:cluster: the kubeconfig\'s current context "Jarvice-Upstream" is listed in forbiddenContexts: '
        "set kns:cluster.context to the dedicated KNS cluster"]


# ---- names and numbers the API server refuses ---------------------------------------------


def entry_change(field: str, value) -> Callable[[dict], None]:
    def change(config):
        config["jobs"][0][field] = value
    return change


FIRST = dev_stack_config()["jobs"][0]["name"]
API_REFUSES = {
    "system namespace of Kubernetes": (
        lambda c: c["cluster"].update(systemNamespace="kube-system"), "kns:cluster.systemNamespace",
        '"kube-system" is a namespace of Kubernetes itself'),
    "another kube- namespace": (
        lambda c: c["cluster"].update(systemNamespace="kube-flannel"), "kns:cluster.systemNamespace",
        '"kube-flannel" is a namespace of Kubernetes itself'),
    "packing scheduler named like the default one": (
        lambda c: c.setdefault("packingScheduler", {}).update(name="default-scheduler"), "kns:packingScheduler.name",
        '"default-scheduler" is the name of the cluster\'s own scheduler'),
    "packing scheduler named like the KNS": (
        lambda c: c.setdefault("packingScheduler", {}).update(name="kns-scheduler"), "kns:packingScheduler.name",
        '"kns-scheduler" is the name of the KNS scheduler\'s objects'),
    "ttl beyond int32": (entry_change("ttlHours", 10**7), f"kns:jobs[{FIRST}].ttlHours", "10000000 is invalid"),
    "ttl infinite": (entry_change("ttlHours", "inf"), f"kns:jobs[{FIRST}].ttlHours",
                     '"inf" is invalid: input should be a finite number'),
    "backoffLimit beyond int32": (entry_change("backoffLimit", 2**31), f"kns:jobs[{FIRST}].backoffLimit", "2147483648 is invalid"),
    "parallelism beyond int32": (entry_change("parallelism", 2**40), f"kns:jobs[{FIRST}].parallelism", "1099511627776 is invalid"),
    "cpu beyond what the API server holds": (entry_change("cpu", "1e400"), f"kns:jobs[{FIRST}].cpu",
                                             '"1e400" is larger than Kubernetes can hold'),
    "placement label key": (entry_change("placement", {"bad key": "x"}), f"kns:jobs[{FIRST}].placement",
                            '"bad key" is not a valid key'),
    "placement label value": (entry_change("placement", {"zone": "a b"}), f"kns:jobs[{FIRST}].placement",
                              '"a b" is not a valid label value'),
    "toleration key": (entry_change("tolerations", [{"key": "not ok/", "operator": "Exists"}]),
                       f"kns:jobs[{FIRST}].tolerations[0]", '"not ok/" '),
    "toleration without key, Equal": (entry_change("tolerations", [{"value": "x"}]), f"kns:jobs[{FIRST}].tolerations[0]",
                                      'a toleration without key must have operator "Exists"'),
    "env var name": (entry_change("env", {"1ST": "x"}), f"kns:jobs[{FIRST}].env",
                     '"1ST" is not a valid environment variable name'),
    "gpuResource not an extended resource": (
        lambda c: c["jobs"][0].update(gpus=1, gpuResource="memory", pool="a100"), f"kns:jobs[{FIRST}].gpuResource",
        '"memory" is not an extended resource name'),
    "scheduler weight resource": (
        lambda c: c.setdefault("packingScheduler", {}).update(weights={"gpus": 1}), "kns:packingScheduler.weights.gpus",
        '"gpus" is not a resource Kubernetes knows'),
    "quota resource": (entry_change("quota", {"cpus": 4}), f"kns:jobs[{FIRST}].quota",
                       '"cpus" is not a resource Kubernetes knows'),
    "node name": (lambda c: c["nodePools"][0].update(nodes=["Node_1"]), f"kns:nodePools[{dev_stack_config()['nodePools'][0]['name']}]",
                  'node name "Node_1" is not a DNS-1123 subdomain'),
    "jobsDomain": (lambda c: c["knsScheduler"].update(jobsDomain="jobs example.org"), "kns:knsScheduler.jobsDomain",
                   '"jobs example.org" is not a DNS-1123 subdomain'),
    "annotations over 256 KiB": (entry_change("annotations", {"note": "x" * 300_000}), f"kns:jobs[{FIRST}].annotations",
                                 "annotations hold 300004 bytes; Kubernetes allows 262144 in all"),
    "LimitRange min above max": (entry_change("limitRange", {"min": {"cpu": "2"}, "max": {"cpu": "1"}}),
                                 f"kns:jobs[{FIRST}].limitRange", "cpu: min 2 is more than max 1"),
}


@pytest.mark.parametrize("case", sorted(API_REFUSES))
def test_names_and_numbers_the_api_server_refuses_are_config_errors(tmp_path, capsys, case):
    change, path, expected = API_REFUSES[case]
    lines = both(capsys, project(tmp_path, stack_text(change)))
    assert expected in problem_at(lines, path), lines


@pytest.mark.parametrize("spelling", ["Jarvice-Upstream", "jarvice-upstream ", " JARVICE-UPSTREAM"])
def test_the_forbidden_context_guard_ignores_case_and_blanks(tmp_path, capsys, spelling):
    def explicit(config):
        config["cluster"] = {"name": "kns-dev", "context": spelling, "forbiddenContexts": ["jarvice-upstream"]}
    lines = both(capsys, project(tmp_path / "explicit", stack_text(explicit)))
    assert problem_at(lines, "kns:cluster.context").startswith(f'"{spelling}" is listed in forbiddenContexts')

    def listed(config):
        config["cluster"] = {"name": "kns-dev", "context": "jarvice-upstream", "forbiddenContexts": [spelling]}
    lines = both(capsys, project(tmp_path / "listed", stack_text(listed)))
    assert problem_at(lines, "kns:cluster.context").startswith('"jarvice-upstream" is listed in forbiddenContexts')


# ---- files: where they may be, what an error may show ------------------------------------


@pytest.mark.parametrize("pattern", ["/etc/hostname", "../../etc/*", "jobs/../../outside.yaml", "~/jobs.yaml"])
def test_job_file_patterns_stay_in_the_project(tmp_path, capsys, pattern):
    (tmp_path / "outside.yaml").write_text("jobs: []\n")
    root = project(tmp_path, stack_text(lambda c: c.update(jobFiles=[pattern])))
    lines = both(capsys, root)
    assert problem_at(lines, "kns:jobFiles[0]").endswith("leaves the project directory; job files are named relative "
                                                         "to it, without .. (for example jobs/*.yaml)")


def test_a_job_file_link_out_of_the_project_is_refused(tmp_path, capsys):
    secret = tmp_path / "elsewhere.yaml"
    secret.write_text("jobs:\n  - {name: leaked, user: bob, image: busybox:1.37}\n")
    root = project(tmp_path, stack_text(lambda c: c.update(jobFiles=["jobs/*.yaml"])))
    (root / "jobs" / "link.yaml").symlink_to(secret)
    lines = both(capsys, root)
    assert problem_at(lines, "kns:jobFiles[0]") == '"jobs/link.yaml" is a link to a file outside the project directory'
    assert not any("leaked" in line for line in lines)


@pytest.mark.parametrize("link, target", [("jobs/sub/up", ".."), ("jobs/a/b/top", "../../.."), ("jobs/self", ".")])
def test_a_directory_link_loop_under_a_double_star_glob_is_refused_not_followed(tmp_path, capsys, link, target):
    """`**` follows directory links; through a loop the glob would grow without end (with
    two links, exponentially)."""
    root = project(tmp_path, stack_text(lambda c: c.update(jobFiles=["jobs/**/*.yaml"])))
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(target, target_is_directory=True)
    lines = both(capsys, root)
    assert problem_at(lines, "kns:jobFiles[0]") == (
        f'"jobs/**/*.yaml" would follow the directory link "{link}" round in a loop (it leads back to a directory '
        "that contains it); remove the link or name the files without **")


def test_a_directory_link_that_does_not_loop_is_followed(tmp_path, capsys):
    root = project(tmp_path, stack_text(lambda c: c.update(jobFiles=["jobs/**/*.yaml"])))
    (root / "shared").mkdir()
    (root / "jobs" / "shared").symlink_to("../shared", target_is_directory=True)
    (root / "shared" / "extra.yaml").write_text("jobs:\n  - {name: linked-in, user: bob, image: busybox:1.37, cpu: 0}\n")
    lines = both(capsys, root)
    assert problem_at(lines, "jobs/shared/extra.yaml:jobs[linked-in].cpu").startswith("0 must be greater than zero")


def test_a_kubeconfig_parse_error_never_shows_its_content(tmp_path, capsys):
    key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
    text = f"apiVersion: v1\nusers:\n- name: admin\n  user:\n    client-key-data: {key}\n   bad: [indent\n"
    root = project(tmp_path, stack_text(lambda c: c.update(cluster={"name": "kns-dev", "kubeconfig": "kube.yaml"})),
                   {"kube.yaml": text})
    lines = both(capsys, root)
    message = problem_at(lines, "kns:cluster.kubeconfig")
    assert message.startswith(f"{root / 'kube.yaml'} is not valid YAML (line ")
    assert key not in message and "indent" not in message and "client-key" not in message


def test_duplicate_entry_names_are_named_by_entry_not_position(tmp_path, capsys):
    def twice(config):
        config["schedules"].append({**config["jobs"][0], "schedule": "0 1 * * *"})
    lines = both(capsys, project(tmp_path, stack_text(twice)))
    assert problem_at(lines, f"kns:schedules[{FIRST}].name") == (
        f'"{FIRST}" is already used by an earlier entry, kns:jobs[{FIRST}]; names are unique across jobs and schedules')
    assert not any("[0]" in line.split(":", 2)[1] for line in lines if line.startswith("kns:"))


@pytest.mark.parametrize("tagged", ["!vault s3cr3t-token", "!!float 's3cr3t-token'", "!!binary s3cr3t-token!", "!Ref s3cr3t-token"])
def test_a_tag_that_cannot_be_read_is_a_problem_at_its_place_without_its_value(tmp_path, capsys, tagged):
    """A tag PyYAML cannot construct (a custom one, or a value its tag refuses) was a
    traceback quoting the line; it is one problem at its place, the value not repeated."""
    text = ("jobs:\n  - name: tagged\n    user: bob\n    image: busybox:1.37\n"
            f"    env: {{API_TOKEN: {tagged}}}\n")
    lines = both(capsys, project(tmp_path, stack_text(with_job_files), job_file("tagged.yaml", text)))
    assert problem_at(lines, "jobs/tagged.yaml:jobs[tagged].env.API_TOKEN") == \
        "has a YAML tag (`!...`) whose value cannot be read here; remove the tag"
    assert not [line for line in lines if "s3cr3t" in line], lines


def test_yamldoc_error_messages_name_places_not_content():
    with pytest.raises(yamldoc.YamlError) as info:
        yamldoc.load("token: abc\n  nested: [secret-value\n", secret=True)
    assert "secret-value" not in str(info.value) and "(line " in str(info.value)


@pytest.mark.parametrize("char", ["\u200b", "\t", "\u00a0", "\u202e", "\u2028"])
def test_invisible_characters_are_shown_escaped_in_problem_lines(tmp_path, capsys, char):
    """Two names that print alike must not read alike: what is not visible is written
    \\uXXXX, wherever it is (here in a pool name and in an entry's pool reference)."""
    def change(config):
        config["jobs"][0]["pool"] = f"a100{char}"
    lines = both(capsys, project(tmp_path, stack_text(change)))
    escaped = f"\\u{ord(char):04x}"
    assert lines and all(char not in line for line in lines)
    assert any(f"a100{escaped}" in line for line in lines), lines


def test_multikueue_settings_off_a_site_and_bad_durations_through_both_doors(tmp_path, capsys):
    """kns:queueing.multiKueue configures a site's manager (docs/multicluster.md): on the
    single-cluster dev stack it is refused, and a bad duration names its own key."""
    def change(config):
        config["queueing"] = {**config["queueing"], "multiKueue": {"workerLostTimeout": "20m"}}
    lines = both(capsys, project(tmp_path / "a", stack_text(change)))
    assert lines == ["kns:queueing.multiKueue: configures the manager of a MultiKueue site; this stack has no "
                     "kns:workers"]

    def bad(config):
        config["queueing"] = {**config["queueing"], "multiKueue": {"workerLostTimeout": "0m", "gcInterval": "soon"}}
    lines = both(capsys, project(tmp_path / "b", stack_text(bad)))
    assert [line.split(":")[1] for line in lines] == ["queueing.multiKueue.workerLostTimeout",
                                                      "queueing.multiKueue.gcInterval"]


# ---- workloads that can never run: every kind against every limit (plan/fits.py) ----------

SMALL = {"name": "small", "role": "compute",
         "autoscale": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                       "limits": {"cpu": "16", "memory": "64Gi"}}}
RACKS = {"levels": ["example.com/rack", "kubernetes.io/hostname"]}


def job(name: str, **fields) -> dict:
    return {"name": name, "user": "ann", "image": "busybox:1.37", "cpu": 1, "memory": "1Gi", **fields}


def schedule(name: str, **fields) -> dict:
    return job(name, schedule="30 2 * * *", timeZone="Europe/Paris", warmUpMinutes=10, **fields)


def never_run_lines(tmp_path, capsys, *entries: dict) -> list[str]:
    """The problem lines of the dev stack plus a small autoscaled pool (16 CPU in all), rack
    topology on a100, and `entries` (schedules have a `schedule`)."""
    def change(config):
        config["nodePools"] = [*config["nodePools"], dict(SMALL)]
        config["nodePools"][1] = {**config["nodePools"][1], "topology": RACKS}
        config["jobs"] = [*config["jobs"], *(e for e in entries if "schedule" not in e)]
        config["schedules"] = [*config["schedules"], *(e for e in entries if "schedule" in e)]
    return both(capsys, project(tmp_path, stack_text(change)))


def site_lines(tmp_path, capsys, *entries: dict) -> list[str]:
    """The problem lines of the MultiKueue site of tests/test_multicluster.py (east's
    kubeconfig a file of the project), with rack topology on west's CPU pool, which queue
    research then holds quota on, and `entries`."""
    from kns_testing.sites import EAST_KUBECONFIG, site

    def change(config):
        config.clear()
        config.update(site())
        del config["credentials"]
        config["jobs"] = [{k: v for k, v in e.items() if k != "credentials"} for e in config["jobs"]]
        config["jobs"] += [e for e in entries if "schedule" not in e]
        config["schedules"] = [e for e in entries if "schedule" in e]
        config["workers"][0]["kubeconfig"] = "kubeconfigs/east.yaml"
        config["workers"][1]["nodePools"][1]["topology"] = RACKS
        config["queues"][0]["quota"]["west-cpu"] = {"cpu": "8", "memory": "32Gi"}
    return both(capsys, project(tmp_path, stack_text(change), {"kubeconfigs/east.yaml": EAST_KUBECONFIG}))


NEVER_RUN = {
    # A single pod: each limit counts the one pod.
    "a job whose own quota is below its one pod": (never_run_lines, job("one", cpu=2, pool="small",
                                                                         quota={"requests.cpu": "1"}),
        "kns:jobs[one].quota.requests.cpu: its pod needs 2 requests.cpu; quota requests.cpu is 1: it never runs"),
    "a job whose quota holds no pod": (never_run_lines, job("one", quota={"pods": "0"}),
        "kns:jobs[one].quota.pods: its pod needs 1 pod; quota pods is 0: it never runs"),
    "a job whose LimitRange max is below its container": (never_run_lines, job("one", cpu=2, limitRange={"max": {"cpu": "1"}}),
        'kns:jobs[one].limitRange.max.cpu: container "one" limits 2, LimitRange max 1: the API server refuses its pod'),
    # A parallel Job: its pods start as they fit, so one must; Kueue places a topology run whole.
    "a parallel job whose quota is below each pod": (never_run_lines, job("many", memory="2Gi", parallelism=4,
                                                                          quota={"limits.memory": "1Gi"}),
        "kns:jobs[many].quota.limits.memory: each of its pods needs 2Gi limits.memory; quota limits.memory is 1Gi: it "
        "never runs"),
    "a parallel job whose run is over one node by topology": (never_run_lines, job(
        "close", gpus=4, pool="a100", parallelism=4, queue="gpu", topology={"level": "kubernetes.io/hostname"}),
        "kns:jobs[close].topology: 4 pods x 4 nvidia.com/gpu need 16 nvidia.com/gpu at once; topology "
        "kubernetes.io/hostname puts all on one node, which has 8; at most 2 of the 4 pods at once: it never runs"),
    # A prescaled schedule: all of a run's primed pods are held warm together.
    "a prescaled schedule over its pool's Karpenter limits": (never_run_lines, schedule(
        "warm", cpu=8, memory="8Gi", pool="small", parallelism=4),
        'kns:schedules[warm].parallelism: 4 primed pods x 8 cpu need 32 cpu at once; pool "small" may grow to 16 '
        "(autoscale.limits.cpu); at most 2 of the 4 primed pods at once: " + rules.WARM_UP_NEVER_WHOLE.message),
    "a prescaled schedule over its static pool's GPUs": (never_run_lines, schedule(
        "warm", gpus=8, pool="a100", parallelism=3),
        'kns:schedules[warm].parallelism: 3 primed pods x 8 nvidia.com/gpu need 24 nvidia.com/gpu at once; pool '
        '"a100" has 16 (2 nodes x 8); at most 2 of the 3 primed pods at once: ' + rules.WARM_UP_NEVER_WHOLE.message),
    "a prescaled schedule whose quota holds fewer pods than a run": (never_run_lines, schedule(
        "warm", parallelism=3, quota={"pods": "2"}),
        "kns:schedules[warm].quota.pods: 3 primed pods need 3 pods at once; quota pods is 2; at most 2 of the 3 primed "
        "pods at once: " + rules.WARM_UP_NEVER_WHOLE.message),
    # A gang: a quota key counted by objects of the kind of its pods.
    "a gang whose quota counts fewer pod objects": (never_run_lines, job("gang", workers=3, quota={"count/pods": "2"}),
        "kns:jobs[gang].quota.count/pods: 3 workers need 3 pods at once; quota count/pods is 2; at most 2 of the 3 "
        "workers at once: the gang never starts whole"),
    # A site: the manager admits, on its one flavor; the workers run.
    "a site's job asking topology": (site_lines, job("close", queue="research", pool="west-cpu", workers=2,
                                                     topology={"level": "example.com/rack"}),
        'kns:jobs[close].topology: queue "research" admits on the manager\'s one flavor "kns-multikueue" (a '
        "MultiKueue site), which names no Topology: " + rules.TOPOLOGY_NEEDS_TOPOLOGY_FLAVOR.message),
    "a site's job whose quota is below its pod": (site_lines, job("one", queue="batch", memory="2Gi",
                                                                  quota={"requests.memory": "1Gi"}),
        "kns:jobs[one].quota.requests.memory: its pod needs 2Gi requests.memory; quota requests.memory is 1Gi: it "
        "never runs"),
    "a site's prescaled schedule whose quota holds fewer pods than a run": (site_lines, schedule(
        "warm", queue="batch", pool="east-cpu", parallelism=2, quota={"pods": "1"}),
        "kns:schedules[warm].quota.pods: 2 primed pods need 2 pods at once; quota pods is 1; at most 1 of the 2 primed "
        "pods at once: " + rules.WARM_UP_NEVER_WHOLE.message),
}


@pytest.mark.parametrize("case", list(NEVER_RUN))
def test_a_workload_that_can_never_run_is_refused_at_the_field_and_limit(tmp_path, capsys, case):
    lines_of, entry, expected = NEVER_RUN[case]
    assert lines_of(tmp_path, capsys, entry) == [expected]


def test_a_parallel_job_s_pods_start_as_they_fit_so_only_one_pod_must(tmp_path, capsys):
    """A parallel Job's pods start as they fit: a quota for fewer pods than its parallelism,
    or a pool that holds fewer at once, slows it and does not stop it; only a limit under
    one pod is refused. A run that must be held whole (a topology, a prescaled schedule's
    warm-up) within its limits is accepted too."""
    assert never_run_lines(tmp_path / "a", capsys,
                           job("one", cpu=2, pool="small", quota={"requests.cpu": "2", "pods": "1"}),
                           job("many", cpu=8, pool="small", parallelism=4, quota={"pods": "2"}),
                           job("over", cpu=8, pool="small", parallelism=4, quota={"pods": "2", "requests.cpu": "4"}),
                           job("close", gpus=4, pool="a100", parallelism=2, queue="gpu",
                               topology={"level": "kubernetes.io/hostname"}),
                           schedule("warm", cpu=8, memory="8Gi", pool="small", parallelism=2),
                           schedule("warm-gpus", gpus=8, pool="a100", parallelism=2, quota={"pods": "2"})) == [
        "kns:jobs[over].quota.requests.cpu: each of its pods needs 8 requests.cpu; quota requests.cpu is 4: it never "
        "runs"]
    assert site_lines(tmp_path / "b", capsys, job("one", queue="batch", quota={"pods": "1"}),
                      job("two", queue="batch", quota={"pods": "0"})) == [
        "kns:jobs[two].quota.pods: its pod needs 1 pod; quota pods is 0: it never runs"]


def test_a_credential_secret_the_entry_s_quota_cannot_hold_is_refused(tmp_path, capsys):
    """The program makes a Secret per credential set in the entry's namespace: a `secrets`
    quota under them refuses one, and the pod that mounts it never starts."""
    entry = job("creds", credentials=["data", "model"], quota={"secrets": "1"})

    def change(config):
        config["jobs"] = [*config["jobs"], entry]
    config = dev_stack_config()
    change(config)
    config["credentials"] = {"data": {"token.txt": "data-token"}, "model": {"key.txt": "model-key"}}
    text = stack_text(change) + "".join(
        f"  kns:credentials:\n    data: {{token.txt: {{secure: v1:AAAA:BBBB}}}}\n"
        f"    model: {{key.txt: {{secure: v1:AAAA:BBBB}}}}\n".splitlines(keepends=True))
    lines = both(capsys, project(tmp_path, text), config=config, secret=("credentials",))
    assert lines == ["kns:jobs[creds].quota.secrets: its 2 credential Secrets need 2 secrets; quota secrets is 1: it "
                     "never runs"]


# ---- positions and words: the line of the key, what null and number-like text are ----------

NUMBERED = re.compile(r"^([^:]+\.ya?ml):([0-9]+):(.*?): (.*)$")


def numbered(lines: list[str], path: str) -> list[tuple[int, str]]:
    """(line, message) of every problem at `path` (a job file's path, without the number)."""
    found = [NUMBERED.match(line) for line in lines]
    return [(int(m[2]), m[4]) for m in found if m and f"{m[1]}:{m[3]}" == path]


FIELDS = """\
jobs:
  - name: sandbox
    user: bob
    type: namespace
    leaderPort: 29501
  - name: verbatim
    user: bob
    podSpec:
      restartPolicy: Never
      containers: [{name: c, image: "busybox:1.37"}]
    cpu: 1
  - name: pinned
    user: bob
    image: busybox:1.37
    nodeSelector:
      zone: a
      kns.io/pool: a100
  - name: capped
    user: bob
    image: busybox:1.37
    memory: 2Gi
    memoryLimit: 1Gi
  - name: mounted
    user: bob
    image: busybox:1.37
    credentialsMountPath: /creds
schedules:
  - name: primed
    user: bob
    image: busybox:1.37
    schedule: "0 3 * * *"
    warmUpMinutes: 10
    primerSchedule: "50 2 * * *"
"""


@pytest.mark.parametrize("path, line", [
    ("jobs[sandbox].leaderPort", 5), ("jobs[verbatim].cpu", 11), ("jobs[pinned].nodeSelector.kns.io/pool", 17),
    ("jobs[capped].memory", 21), ("jobs[mounted].credentialsMountPath", 26), ("schedules[primed].primerSchedule", 33),
])
def test_a_rule_about_keys_that_go_together_is_at_the_key_it_refuses_and_its_line(tmp_path, capsys, path, line):
    """A namespace entry's leaderPort, a field beside podSpec, a label a nested mapping may
    not set, a request over its limit: each is about one key, so it is reported at that key
    and on its line, where an editor's schema marks it, not at the entry's first line."""
    lines = both(capsys, project(tmp_path, stack_text(with_job_files), job_file("fields.yaml", FIELDS)))
    found = numbered(lines, f"jobs/fields.yaml:{path}")
    assert [number for number, _ in found] == [line], lines


DUPLICATES = """\
schedules:
  - name: twin
    user: bob
    image: busybox:1.37
    schedule: "0 3 * * *"
jobs:
  - name: twin
    user: bob
    image: busybox:1.37
  - name: solo
    user: bob
    image: busybox:1.37
    cpu: lots
  - name: solo
    user: bob
    image: busybox:1.37
    cpu: many
  - name: placed
    user: bob
    image: busybox:1.37
    pool: nowhere
  - name: placed
    user: bob
    image: busybox:1.37
    pool: elsewhere
"""


def test_entries_named_alike_in_a_job_file_each_keep_their_own_lines(tmp_path, capsys):
    """Two entries with one name have one path: the later one (in the file's order) is the
    duplicate, reported on its own line, and each one's problems on its own lines."""
    lines = both(capsys, project(tmp_path, stack_text(with_job_files), job_file("dup.yaml", DUPLICATES)))
    unique = "names are unique across jobs and schedules"
    assert numbered(lines, "jobs/dup.yaml:jobs[twin].name") == [
        (7, f'"twin" is already used by an earlier entry, jobs/dup.yaml:schedules[twin]; {unique}')]
    assert numbered(lines, "jobs/dup.yaml:schedules[twin].name") == []
    assert numbered(lines, "jobs/dup.yaml:jobs[solo].cpu") == [
        (13, '"lots" is not a quantity'), (17, '"many" is not a quantity')]
    assert numbered(lines, "jobs/dup.yaml:jobs[solo].name") == [
        (14, f'"solo" is already used by an earlier entry, jobs/dup.yaml:jobs[solo]; {unique}')]
    # a check of the first entry (its pool), made after every entry is read
    assert [(n, m.split(";")[0].split(" (")[0]) for n, m in numbered(lines, "jobs/dup.yaml:jobs[placed].pool")] == [
        (21, 'no node pool named "nowhere"')]


def _set(*keys: "str | int", value=None) -> Callable[[dict], None]:
    def change(config):
        node = config
        for key in keys[:-1]:
            node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
        node[keys[-1]] = value
    return change


NULLS = {
    "an integer in kns:state": (_set("state", "entryStacks"), "kns:state.entryStacks",
                                "is given without a value: write an integer, or remove the key"),
    "a boolean in kns:queueing": (_set("queueing", "install"), "kns:queueing.install",
                                  "is given without a value: write a boolean, or remove the key"),
    "a pool's role": (_set("nodePools", 0, "role"), f"kns:nodePools[{dev_stack_config()['nodePools'][0]['name']}].role",
                      "is given without a value: write "),
    "an entry's name": (_set("jobs", 0, "name"), "kns:jobs[0].name", "is given without a value: write a string"),
    "a label value": (_set("jobs", 0, "labels", value={"team": None}), f"kns:jobs[{FIRST}].labels.team",
                      "is given without a value: write a string, or remove the key"),
    "an entry of a list": (lambda c: c["schedules"].append(None), f"kns:schedules[{len(dev_stack_config()['schedules'])}]",
                           "is given without a value: write a mapping, or remove the item"),
    "a quantity of a queue's quota": (
        lambda c: c["queues"][0]["quota"][next(iter(c["queues"][0]["quota"]))].update(cpu=None),
        f"kns:queues[{dev_stack_config()['queues'][0]['name']}].quota.{next(iter(dev_stack_config()['queues'][0]['quota']))}",
        "cpu: is given without a value: write a quantity, or remove the key"),
    "a volume source": (_set("jobs", 0, "volumes", value=[{"name": "scratch", "emptyDir": None}]),
                        f"kns:jobs[{FIRST}].volumes[0].emptyDir",
                        "is given without a value: write a mapping ({medium, sizeLimit}), or remove the key"),
    "an env value": (_set("jobs", 0, "env", value={"MODE": None}), f"kns:jobs[{FIRST}].env.MODE",
                     "is given without a value: write a value (env values are strings or {valueFrom: {...}}"),
}


@pytest.mark.parametrize("case", sorted(NULLS))
def test_a_key_given_without_a_value_says_so_and_never_none(tmp_path, capsys, case):
    change, path, expected = NULLS[case]
    lines = both(capsys, project(tmp_path, stack_text(change)))
    assert expected in problem_at(lines, path), lines
    assert not [line for line in lines if "None" in line or "null" in line], lines


def test_a_null_in_a_job_file_says_so_at_its_line(tmp_path, capsys):
    text = ("jobs:\n  - name: nested\n    user: bob\n    image: busybox:1.37\n    workers: 2\n"
            "    topology:\n      level:\n      mode: required\n")
    lines = both(capsys, project(tmp_path, stack_text(with_job_files), job_file("nulls.yaml", text)))
    assert numbered(lines, "jobs/nulls.yaml:jobs[nested].topology.level") == [
        (7, "is given without a value: write a string, or remove the key")]
    assert not [line for line in lines if "None" in line], lines


@pytest.mark.parametrize("field, written, expected", [
    ("workers", "0o4", "is read as an integer by some YAML readers and as text by others; quote the value for the "
                       "text, or write the number in plain decimal digits"),
    ("backoffLimit", "0o3", "is read as an integer by some YAML readers and as text by others; quote the value for "
                            "the text, or write the number in plain decimal digits"),
    ("ttlHours", '"0x10"', '"0x10" is read as text, not as a number; write the number in plain decimal digits'),
    ("completions", "'0b11'", '"0b11" is read as text, not as a number; write the number in plain decimal digits'),
    ("activeDeadlineSeconds", '"0o600"', '"0o600" is read as text, not as a number; write the number in plain '
                                         'decimal digits'),
])
def test_number_like_text_in_an_integer_field_of_a_job_file_says_to_write_decimal_digits(
        tmp_path, capsys, field, written, expected):
    """`0o4` is a number to YAML 1.2 and text to YAML 1.1; quoted, any such spelling is
    text. Either way the field is told once, and how to write the number."""
    text = f"jobs:\n  - name: spelled\n    user: bob\n    image: busybox:1.37\n    {field}: {written}\n"
    lines = both(capsys, project(tmp_path, stack_text(with_job_files), job_file("numbers.yaml", text)))
    assert numbered(lines, f"jobs/numbers.yaml:jobs[spelled].{field}") == [(5, expected)], lines


@pytest.mark.parametrize("written, expected", [
    ("0o2", "is read as an integer by some YAML readers and as text by others; quote the value for the text, or "
            "write the number in plain decimal digits"),
    ("'0x2'", '"0x2" is read as text, not as a number; write the number in plain decimal digits'),
])
def test_number_like_text_in_an_integer_field_of_the_stack_file_says_to_write_decimal_digits(
        tmp_path, capsys, written, expected):
    text = stack_text(_set("packingScheduler", "replicas", value="PLACEHOLDER")).replace(
        "replicas: PLACEHOLDER", f"replicas: {written}")
    lines = both(capsys, project(tmp_path, text))
    assert lines == [f"kns:packingScheduler.replicas: {expected}"]


def _burst_autoscale(config: dict) -> dict:
    return next(p for p in config["nodePools"] if p["name"] == "burst")["autoscale"]


def _fair_admission(config: dict) -> dict:
    return config["queueing"].setdefault("fairSharing", {}).setdefault("admission", {})


@pytest.mark.parametrize("path, place, rule", [
    ("kns:nodePools[burst].autoscale.consolidateAfter", lambda c: (_burst_autoscale(c), "consolidateAfter"),
     rules.DURATION_OR_NEVER),
    ("kns:nodePools[burst].autoscale.expireAfter", lambda c: (_burst_autoscale(c), "expireAfter"),
     rules.DURATION_OR_NEVER),
    ("kns:queueing.waitForPodsReady", lambda c: (c["queueing"], "waitForPodsReady"), rules.WAIT_FOR_PODS_READY),
    ("kns:queueing.multiKueue.workerLostTimeout", lambda c: (c["queueing"].setdefault("multiKueue", {}),
                                                             "workerLostTimeout"), rules.WORKER_LOST_TIMEOUT),
    ("kns:queueing.multiKueue.gcInterval", lambda c: (c["queueing"].setdefault("multiKueue", {}), "gcInterval"),
     rules.GC_INTERVAL),
    ("kns:queueing.fairSharing.admission.usageHalfLife", lambda c: (_fair_admission(c), "usageHalfLife"),
     rules.USAGE_HALF_LIFE),
    ("kns:queueing.fairSharing.admission.samplingInterval", lambda c: (_fair_admission(c), "samplingInterval"),
     rules.USAGE_SAMPLING_INTERVAL),
])
@pytest.mark.parametrize("number", [0, 3])
def test_a_number_where_a_duration_belongs_says_what_a_duration_is(tmp_path, capsys, path, place, rule, number):
    """`0` or `3` is no duration, quoted or not: the message says what the field takes, not
    to quote it."""
    def change(config: dict) -> None:
        where, key = place(config)
        where[key] = number

    lines = both(capsys, project(tmp_path, stack_text(change)))
    message = problem_at(lines, path)
    assert message.startswith(f"{number} is a number, not ") and "quote" not in message, lines
    assert rule.message.removeprefix("is ").removeprefix("not ") in message


def test_validate_refuses_a_stack_named_like_an_entry_stack_as_the_program_does(tmp_path, capsys):
    """`<stack>.entries-<n>` is entry stack n of <stack> to the program, which refuses one
    the config does not have; validate says the same, with every other problem."""
    lines = both(capsys, project(tmp_path / "own", stack_text(), stack="case.entries-0"), stack="case.entries-0")
    assert lines == ["kns:state.entryStacks: stack case.entries-0 is not an entry stack of this stack (case): "
                     "it sets no kns:state.entryStacks"]

    def split(config):
        config["state"] = {"entryStacks": 2}
        config["jobs"][0]["cpu"] = "lots"
    lines = both(capsys, project(tmp_path / "split", stack_text(split), stack="case.entries-2"), stack="case.entries-2")
    assert problem_at(lines, "kns:state.entryStacks") == (
        "stack case.entries-2 is not an entry stack of this stack (case): its entry stacks are case.entries-0 to "
        "case.entries-1")
    assert problem_at(lines, f"kns:jobs[{FIRST}].cpu") == '"lots" is not a quantity'


# ---- raw pod specs and override-added containers are planned like an image entry ----------
#
# What the program writes into an image entry's container it writes into every container
# of a raw `podSpec` and every container an override adds: the limits the namespace's
# LimitRange would default (a limit the user set is kept), and the tolerations of the pool
# the program places the pod on. So the policy rules pass them for the same reasons.

BARE = {"name": "side", "image": "busybox:1.37"}
RAW_GPU = {"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
           "resources": {"limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}}}
OWN_TOLERATION = {"key": "example.com/spot", "operator": "Exists", "effect": "NoSchedule"}
A100 = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
MI300 = {"key": "amd.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def _entry(section: str, entry: dict) -> Callable[[dict], None]:
    def change(config: dict) -> None:
        config[section].append(entry)
    return change


def _overridden(name: str, *overrides: dict) -> Callable[[dict], None]:
    def change(config: dict) -> None:
        next(e for e in config["jobs"] if e["name"] == name)["jsonOverrides"] = list(overrides)
    return change


def _amd_pool_and(entry: dict) -> Callable[[dict], None]:
    def change(config: dict) -> None:
        config["nodePools"].append({"name": "mi300", "role": "gpu", "nodes": ["amd-node-1"],
                                    "gpu": {"vendor": "amd", "perNode": 8}})
        config["jobs"].append(entry)
    return change


def _own(spec: dict, *keys: str) -> dict[str, dict[str, dict]]:
    """{container list: {container: the resources the spec gives it}}."""
    return {key: {c["name"]: c.get("resources") or {} for c in spec.get(key) or []} for key in keys}


BARE_SPEC = {"containers": [dict(BARE)]}
INIT_SPEC = {"initContainers": [dict(BARE, name="setup"), dict(BARE, name="proxy", restartPolicy="Always")],
             "containers": [dict(BARE, name="main", resources={"limits": {"cpu": "2", "memory": "2Gi"}})]}
SOME_SPEC = {"containers": [dict(BARE, resources={"limits": {"memory": "3Gi"}}),
                            dict(BARE, name="db", resources={"requests": {"cpu": "1500m"}})]}
GPU_SPEC = {"containers": [RAW_GPU], "tolerations": [OWN_TOLERATION]}
POOL_GPU_SPEC = {"containers": [dict(RAW_GPU, resources={"requests": {"nvidia.com/gpu": "1"},
                                                         "limits": {"nvidia.com/gpu": "1"}})],
                 "tolerations": [OWN_TOLERATION]}
AMD_SPEC = {"containers": [dict(BARE, resources={"limits": {"amd.com/gpu": "1"}})], "tolerations": [OWN_TOLERATION]}
REPLACED = {"requests": {"memory": "128Mi"}}

FIRST_CLASS = {
    "a raw podSpec without limits": (
        _entry("jobs", {"name": "raw", "user": "bob", "podSpec": BARE_SPEC}),
        "raw", _own(BARE_SPEC, "containers"), []),
    "a raw podSpec's init containers without limits, one of them a native sidecar": (
        _entry("jobs", {"name": "raw", "user": "bob", "podSpec": INIT_SPEC}),
        "raw", _own(INIT_SPEC, "initContainers", "containers"), []),
    "a raw podSpec with some of its limits": (
        _entry("jobs", {"name": "raw", "user": "bob", "podSpec": SOME_SPEC}),
        "raw", _own(SOME_SPEC, "containers"), []),
    "a raw podSpec schedule without limits": (
        _entry("schedules", {"name": "raw-nightly", "user": "bob", "schedule": "0 4 * * *", "podSpec": BARE_SPEC}),
        "raw-nightly", _own(BARE_SPEC, "containers"), []),
    "a prescaled raw podSpec schedule without limits": (
        _entry("schedules", {"name": "raw-primed", "user": "bob", "schedule": "0 4 * * *", "warmUpMinutes": 5,
                             "podSpec": BARE_SPEC}),
        "raw-primed", _own(BARE_SPEC, "containers"), []),
    "a raw podSpec asking nvidia.com/gpu with a toleration of its own": (
        _entry("jobs", {"name": "raw", "user": "bob", "podSpec": GPU_SPEC}),
        "raw", _own(GPU_SPEC, "containers"), [OWN_TOLERATION, A100]),
    "a raw podSpec on its named GPU pool, its GPUs requested, with a toleration of its own": (
        _entry("jobs", {"name": "raw", "user": "bob", "pool": "a100", "podSpec": POOL_GPU_SPEC}),
        "raw", _own(POOL_GPU_SPEC, "containers"), [OWN_TOLERATION, A100]),
    "a raw podSpec asking the amd pool's GPU resource with a toleration of its own": (
        _amd_pool_and({"name": "raw", "user": "bob", "podSpec": AMD_SPEC}),
        "raw", _own(AMD_SPEC, "containers"), [OWN_TOLERATION, MI300]),
    "a sidecar added by an override": (
        _overridden(FIRST, {"path": "/spec/template/spec/containers/-", "value": dict(BARE)}),
        FIRST, {"containers": {"side": {}}}, [A100]),
    "an init container added by an override": (
        _overridden("etl-nightly-backfill", {"path": "/spec/template/spec/initContainers",
                                             "value": [dict(BARE, name="fetch")]}),
        "etl-nightly-backfill", {"initContainers": {"fetch": {}}}, []),
    "a container whose resources an override replaces by a request": (
        _overridden("vcluster-smoke", {"path": "/spec/template/spec/containers/0/resources", "value": REPLACED}),
        "vcluster-smoke", {"containers": {"vcluster-smoke": REPLACED}}, None),
}


def _planned(root: Path, name: str) -> tuple[dict, dict, list[dict]]:
    """The pod of the entry's Job (or first CronJob), its LimitRange item, and the pod
    specs of all its workload objects, as the program registers them."""
    config, secret = delivered(root)
    done = run_program(config, secret_keys=secret, stack=STACK, project_dir=root)
    pods = []
    for resource in done.resources:
        if resource.type in ("kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob") and \
                resource.inputs["metadata"]["namespace"] == f"kns-{name}":
            spec = resource.inputs["spec"]
            pods.append((spec["jobTemplate"]["spec"] if "jobTemplate" in spec else spec)["template"]["spec"])
    limit_range = done.named("kubernetes:core/v1:LimitRange", f"{name}-defaults").inputs["spec"]["limits"][0]
    return pods[0], limit_range, pods


@pytest.mark.parametrize("change, name, checked, tolerations", list(FIRST_CLASS.values()), ids=list(FIRST_CLASS))
def test_raw_pod_specs_and_added_containers_get_what_an_image_entry_gets(tmp_path, capsys, monkeypatch, change,
                                                                          name, checked, tolerations):
    """Accepted through both doors; in the registered pod each checked container keeps the
    amounts it was given and has a cpu and memory limit, those it left unset at the
    LimitRange's default (and default request), in the Job and in every primer CronJob;
    the pod tolerates its pool's taints besides its own."""
    monkeypatch.delenv("KNS_POLICY_CONFIG", raising=False)
    root = project(tmp_path, stack_text(change))
    assert both(capsys, root) == []
    pod, limit_range, pods = _planned(root, name)
    for key, containers in checked.items():
        got = {c["name"]: c["resources"] for c in pod[key]}
        for container, own in containers.items():
            resources = got[container]
            for side in ("requests", "limits"):
                for resource, amount in (own.get(side) or {}).items():
                    assert resources[side][resource] == amount, (container, side, resource)
            for resource in ("cpu", "memory"):
                if resource in (own.get("limits") or {}) or resource in (own.get("requests") or {}):
                    assert resource in resources["limits"], (container, resources)
                else:
                    assert resources["limits"][resource] == limit_range["default"][resource], (container, resource)
                    assert resources["requests"][resource] == limit_range["defaultRequest"][resource]
    for other in pods[1:]:
        assert {key: other[key] for key in checked} == {key: pod[key] for key in checked}
    if tolerations is not None:
        assert pod.get("tolerations", []) == tolerations


def test_a_request_above_the_default_limit_gets_a_limit_that_holds_it(tmp_path, capsys, monkeypatch):
    """The default limit is raised to a lone request (admission would refuse a request over
    its limit), and the written limit is that amount."""
    monkeypatch.delenv("KNS_POLICY_CONFIG", raising=False)
    root = project(tmp_path, stack_text(FIRST_CLASS["a raw podSpec with some of its limits"][0]))
    assert both(capsys, root) == []
    pod, limit_range, _ = _planned(root, "raw")
    side, db = pod["containers"]
    assert side["resources"] == {"limits": {"memory": "3Gi", "cpu": "1500m"}, "requests": {"cpu": "200m"}}
    assert db["resources"] == {"requests": {"cpu": "1500m", "memory": "256Mi"},
                               "limits": {"cpu": "1500m", "memory": "1Gi"}}
    assert limit_range["default"] == {"cpu": "1500m", "memory": "1Gi"}


def test_overrides_cannot_take_away_the_pools_tolerations(tmp_path, capsys, monkeypatch):
    """The pool's tolerations are the program's, like its selector: an override that drops
    them is refused, whether the pool is a GPU pool or not."""
    monkeypatch.delenv("KNS_POLICY_CONFIG", raising=False)

    def change(config: dict) -> None:
        _overridden("vcluster-smoke", {"path": "/spec/template/spec/tolerations", "value": []})(config)
        _overridden("train-resnet", {"path": "/spec/template/spec/tolerations", "value": []})(config)
    lines = both(capsys, project(tmp_path, stack_text(change)))
    assert problem_at(lines, "kns:jobs[train-resnet].jsonOverrides[0]") == (
        '/spec/template/spec/tolerations: nvidia.com/gpu=present:NoSchedule is a taint of pool "a100", which the '
        "pod is placed on; overrides may not remove its toleration")
    assert problem_at(lines, "kns:jobs[vcluster-smoke].jsonOverrides[0]") == (
        "/spec/template/spec/tolerations: node-role.jarvice.io/jarvice-vcluster=true:NoSchedule is a taint of pool "
        '"vcluster", which the pod is placed on; overrides may not remove its toleration')


# ---- values that may be secrets: env, command, args, overrides, URLs ----------------------

TOKEN = "s3cr3t-tok-XYZ"
NUMBER = 8675309123
POD = "/spec/template/spec/containers/0"


def pod_spec(**container) -> Callable[[dict], None]:
    """The first entry as a raw podSpec whose one container has `container`'s fields."""
    def change(config):
        first = config["jobs"][0]
        config["jobs"][0] = {"name": first["name"], "user": first["user"], "podSpec": {
            "containers": [{"name": "main", "image": "busybox:1.37", **container}]}}
    return change


def init_container(**fields) -> Callable[[dict], None]:
    def change(config):
        pod_spec()(config)
        config["jobs"][0]["podSpec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.37", **fields}]
    return change


def overrides(*items: dict) -> Callable[[dict], None]:
    return entry_change("jsonOverrides", list(items))


ENTRY = f"kns:jobs[{FIRST}]"
# Where a user writes what may be a secret, written in a shape the product does not take:
# (change, the path of the problem, what its message starts with).
SECRET_PLACES = {
    "podSpec env as a mapping": (pod_spec(env={"API_TOKEN": TOKEN}), f"{ENTRY}.podSpec.containers[0].env",
                                 "must be a list of {name, value, valueFrom}, not a mapping"),
    "podSpec command as one string": (pod_spec(command=f"train --token {TOKEN}"),
                                      f"{ENTRY}.podSpec.containers[0].command", "must be a list of strings, not a string"),
    "podSpec args as a mapping": (pod_spec(args={"--token": TOKEN}), f"{ENTRY}.podSpec.containers[0].args",
                                  "must be a list of strings, not a mapping"),
    "podSpec numeric env value": (pod_spec(env=[{"name": "API_TOKEN", "value": NUMBER}]),
                                  f"{ENTRY}.podSpec.containers[0].env[0].value", "must be a string, not a number"),
    "podSpec env item as NAME=value": (pod_spec(env=[f"API_TOKEN={TOKEN}"]), f"{ENTRY}.podSpec.containers[0].env[0]",
                                       "must be a mapping ({name, value, valueFrom}), not a string"),
    "podSpec env valueFrom as a string": (pod_spec(env=[{"name": "API_TOKEN", "valueFrom": TOKEN}]),
                                          f"{ENTRY}.podSpec.containers[0].env[0].valueFrom", "must be a mapping"),
    "podSpec command item a mapping": (pod_spec(command=["train", {"--token": TOKEN}]),
                                       f"{ENTRY}.podSpec.containers[0].command[1]", "must be a string, not a mapping"),
    "podSpec probe command as one string": (
        pod_spec(livenessProbe={"exec": {"command": f"check --token {TOKEN}"}}),
        f"{ENTRY}.podSpec.containers[0].livenessProbe.exec.command", "must be a list of strings, not a string"),
    "initContainers command as one string": (init_container(command=f"fetch --token {TOKEN}"),
                                             f"{ENTRY}.podSpec.initContainers[0].command",
                                             "must be a list of strings, not a string"),
    "initContainers env as a mapping": (init_container(env={"API_TOKEN": TOKEN}),
                                        f"{ENTRY}.podSpec.initContainers[0].env", "must be a list of"),
    "entry env as a list": (entry_change("env", [f"API_TOKEN={TOKEN}"]), f"{ENTRY}.env",
                            "must be a mapping, not a list"),
    "entry env valueFrom a string": (entry_change("env", {"API_TOKEN": {"valueFrom": TOKEN}}),
                                     f"{ENTRY}.env.API_TOKEN.valueFrom", "must be a mapping"),
    "entry command as one string": (entry_change("command", f"train --token {TOKEN}"), f"{ENTRY}.command",
                                    "must be a list, not a string"),
    "entry command item a number": (entry_change("command", ["train", NUMBER]), f"{ENTRY}.command[1]",
                                    "is a number; quote it if you mean the text"),
    "entry args as a mapping": (entry_change("args", {"--token": TOKEN}), f"{ENTRY}.args",
                                "must be a list, not a mapping"),
    "entry args item a mapping": (entry_change("args", [{"--token": TOKEN}]), f"{ENTRY}.args[0]",
                                  "must be a string, not a mapping"),
    "override env as a mapping": (overrides({"path": f"{POD}/env", "value": {"API_TOKEN": TOKEN}}),
                                  f"{ENTRY}.jsonOverrides[0]", f"{POD}/env: must be a list of"),
    "override numeric env value": (overrides({"path": f"{POD}/env/-", "value": {"name": "API_TOKEN", "value": NUMBER}}),
                                   f"{ENTRY}.jsonOverrides[0]", f"{POD}/env/1/value: must be a string, not a number"),
    "override command as one string": (overrides({"path": f"{POD}/command", "value": f"train --token {TOKEN}"}),
                                       f"{ENTRY}.jsonOverrides[0]", f"{POD}/command: must be a list of strings"),
    "override of a label the program keeps": (
        overrides({"path": "/metadata/labels/kns.io~1owner", "value": TOKEN}), f"{ENTRY}.jsonOverrides[0]",
        '/metadata/labels/kns.io~1owner: is "alice", set by the program (its own labels); overrides may not change it'),
    "override of the image": (overrides({"path": f"{POD}/image", "value": f"registry/app:{TOKEN}!"}),
                              f"{ENTRY}.jsonOverrides[0]", f"{POD}/image: is not an image reference"),
    "override path a value": (overrides({"path": TOKEN, "value": "x"}), f"{ENTRY}.jsonOverrides[0].path",
                              "is not a JSON pointer"),
    "overrides as a mapping": (entry_change("jsonOverrides", {"path": f"{POD}/env", "value": TOKEN}),
                               f"{ENTRY}.jsonOverrides", "must be a list, not a mapping"),
    "override item a string": (overrides(f"{POD}/env={TOKEN}"), f"{ENTRY}.jsonOverrides[0]",
                               "must be a mapping, not a string"),
    "profile overrides as a mapping": (
        lambda c: c["profiles"].update({"*": {"jsonOverrides": {"path": f"{POD}/env", "value": TOKEN}}}),
        "kns:profiles[*].jsonOverrides", "must be a list, not a mapping"),
    "volume option as a number": (
        entry_change("volumes", [{"name": "v", "flexVolume": {"driver": "d", "options": {"password": NUMBER}}}]),
        f"{ENTRY}.volumes[0].flexVolume.options.password", "must be a string, not a number"),
    "an entry that is one string": (lambda c: c["jobs"].append(f"API_TOKEN={TOKEN}"),
                                    f"kns:jobs[{len(dev_stack_config()['jobs'])}]", "must be a mapping, not a string"),
}


@pytest.mark.parametrize("case", sorted(SECRET_PLACES))
def test_a_value_that_may_be_a_secret_is_never_repeated(tmp_path, capsys, case):
    """Problem lines reach CI logs: a message about env, command, args or an override (a
    raw podSpec's too) names the field and the shape it takes, never what was written."""
    change, path, message = SECRET_PLACES[case]
    lines = both(capsys, project(tmp_path, stack_text(change)))
    assert problem_at(lines, path).startswith(message), lines
    assert not [line for line in lines if TOKEN in line or str(NUMBER) in line], lines


@pytest.mark.parametrize("text", [
    f"jobs:\n  - name: file-env\n    user: bob\n    image: busybox:1.37\n    env: [API_TOKEN={TOKEN}]\n",
    f"jobs:\n  - name: file-env\n    user: bob\n    podSpec:\n      containers:\n        - name: main\n"
    f"          image: busybox:1.37\n          env: {{API_TOKEN: {TOKEN}}}\n          args: --token {TOKEN}\n",
    f"jobs:\n  - API_TOKEN={TOKEN}\n",
])
def test_a_job_files_values_are_never_repeated_either(tmp_path, capsys, text):
    lines = both(capsys, project(tmp_path, stack_text(with_job_files), job_file("values.yaml", text)))
    assert [line for line in lines if line.startswith("jobs/values.yaml:")], lines
    assert not [line for line in lines if TOKEN in line], lines


@pytest.mark.parametrize("url, secret", [
    ("https://admin:pa55w0rd-XYZ@10.2.0.1:6443", "pa55w0rd-XYZ"),
    (f"https://{TOKEN}@10.2.0.1:6443", TOKEN),
    (f"https://10.2.0.1:6443/?token={TOKEN}", TOKEN),
])
def test_a_url_with_credentials_is_refused_and_never_repeated(tmp_path, capsys, url, secret):
    """A URL is kept in plain text (plan, state, outputs): credentials in one are refused,
    pointing to the secret-based way, and the message does not repeat them."""
    def site(config):
        config["workers"] = [{"name": "east", "context": "kns-east"},
                             {"name": "west", "context": "kns-west", "apiServer": url}]
    lines = both(capsys, project(tmp_path / "site", stack_text(site)))
    message = problem_at(lines, "kns:workers[west].apiServer")
    # the way out names the worker's place in the list, which `pulumi config set --path` takes
    assert message.startswith("may hold a credential") and "--secret --path 'kns:workers[1].kubeconfig'" in message
    documented = [line for line in (ROOT / "docs" / "validation.md").read_text().splitlines()
                  if line.startswith("kns:workers[west].apiServer: may hold a credential")]
    assert documented == [f"kns:workers[west].apiServer: {message}"]
    assert not [line for line in lines if secret in line], lines

    def keycloak(config):
        config["knsScheduler"]["keycloak"] = {"url": url, "realm": "r", "clientId": "kns"}
    lines = both(capsys, project(tmp_path / "keycloak", stack_text(keycloak)))
    message = problem_at(lines, "kns:knsScheduler.keycloak.url")
    assert message.startswith("may hold a credential") and "pulumi config set --secret kns:keycloakClientSecret" in message
    assert not [line for line in lines if secret in line], lines
