"""Bad input through both doors: the real `__main__.py` under recording mocks and `./kns
validate`, on the same project copy (its stack file, job files and kubeconfig).

Each case is a member of one class of mistakes (docs/validation.md); it must give the same
path-qualified lines through both, with no traceback and nothing registered. Stack files
are written as text, because several classes live in the text itself (a key given twice,
a YAML 1.1 scalar, bytes that are not UTF-8).
"""

from __future__ import annotations

import re

import shutil
from pathlib import Path
from typing import Callable, Optional

import pulumi
import pytest
import yaml

from config import yamldoc
from kns_cli import cli
from kns_testing.program import ROOT, RecordingMocks, dev_stack_config, run_program

STACK = "case"
Files = dict[str, "str | bytes"]


def project(tmp_path: Path, stack_text: "str | bytes", files: Optional[Files] = None) -> Path:
    root = tmp_path / "project"
    root.mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(ROOT / "jobs", root / "jobs")
    shutil.copytree(ROOT / "vendor", root / "vendor")  # the Kueue install the program reads (dev has queueing on)
    for name, content in {f"Pulumi.{STACK}.yaml": stack_text, **(files or {})}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def stack_text(change: Optional[Callable[[dict], None]] = None, extra: str = "") -> str:
    """The dev stack's config (changed by `change`) as a stack file, plus raw `extra` lines
    inside its `config:` mapping."""
    config = dev_stack_config()
    if change:
        change(config)
    text = yaml.safe_dump({"config": {f"kns:{k}": v for k, v in config.items()}}, sort_keys=False)
    return text + "".join(f"  {line}\n" for line in extra.splitlines())


def delivered(root: Path) -> tuple[dict, tuple[str, ...]]:
    """The config as the engine delivers it: the stack file's `kns:` values (YAML 1.2 reads
    `NO` as text, as config/yamldoc.py keeps it); encrypted values are not used here."""
    value, _ = yamldoc.load((root / f"Pulumi.{STACK}.yaml").read_bytes())
    config = {k.partition(":")[2]: v for k, v in (value.get("config") or {}).items() if k.startswith("kns:")}
    return {k: v for k, v in config.items() if v is not None}, ()


def program_lines(root: Path, config: Optional[dict] = None, secret: tuple[str, ...] = ()) -> list[str]:
    """The program's problem lines ([] when it ran), asserting nothing was registered on failure."""
    if config is None:
        config, secret = delivered(root)
    mocks = RecordingMocks()
    try:
        run_program(config, secret_keys=secret, stack=STACK, mocks=mocks, project_dir=root)
    except pulumi.RunError as exc:
        assert mocks.resources == [], [r.name for r in mocks.resources]
        return str(exc).splitlines()
    assert mocks.resources, "the program ran but registered nothing"
    return []


def validate_lines(capsys, root: Path) -> tuple[int, list[str], str]:
    code = cli.main(["validate", "--stack", STACK, "--project-dir", str(root)])
    out, err = capsys.readouterr()
    return code, err.splitlines(), out


def both(capsys, root: Path, **program) -> list[str]:
    """The problem lines, asserted equal through the program and `./kns validate`."""
    code, lines, _ = validate_lines(capsys, root)
    from_program = program_lines(root, **program)
    assert lines == from_program
    assert code == (1 if lines else 0)
    text = "\n".join(lines)
    assert "Traceback" not in text and "Error:" not in text and "Exception" not in text
    return [line.removeprefix("  - ") for line in lines[1:]]


JOB_FILE_LINE = re.compile(r"^([^:]+\.ya?ml):[0-9]+:")


def problem_at(lines: list[str], path: str) -> str:
    """The message of the one line at `path` (a job file's line number after its name is
    not part of the path: tests/test_config.py holds the numbers)."""
    plain = [JOB_FILE_LINE.sub(r"\1:", line) for line in lines]
    found = [line[len(path) + 2:] for line in plain if line.startswith(path + ": ")]
    assert len(found) == 1, (path, lines)
    return found[0]


def job_file(name: str, text: "str | bytes") -> Files:
    return {f"jobs/{name}": text}


def with_job_files(config: dict) -> None:
    config["jobFiles"] = ["jobs/*.yaml"]


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
    assert lines[1:] == [f'  - kns:jobs[{FIRST}].cpu: is read as an integer by some YAML readers and as text by '
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
        config["workers"] = [{"name": "west", "context": "kns-west", "apiServer": url}]
    lines = both(capsys, project(tmp_path / "site", stack_text(site)))
    message = problem_at(lines, "kns:workers[west].apiServer")
    assert message.startswith("may hold a credential") and "--secret --path 'kns:workers[<index>].kubeconfig'" in message
    assert not [line for line in lines if secret in line], lines

    def keycloak(config):
        config["knsScheduler"]["keycloak"] = {"url": url, "realm": "r", "clientId": "kns"}
    lines = both(capsys, project(tmp_path / "keycloak", stack_text(keycloak)))
    message = problem_at(lines, "kns:knsScheduler.keycloak.url")
    assert message.startswith("may hold a credential") and "pulumi config set --secret kns:keycloakClientSecret" in message
    assert not [line for line in lines if secret in line], lines
