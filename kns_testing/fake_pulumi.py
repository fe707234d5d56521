"""A fake `pulumi` on PATH for `make up`/`make preview` runs of a stack split into entry
stacks (docs/entry-stacks.md): it records the calls and answers from files it is given."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import textwrap
from pathlib import Path

import yaml

from config import fingerprint
from kns_cli import fullrun
from kns_testing.program import ROOT, dev_stack_config
from plan import digests, stacks


SPLIT = 3


def split_config(**over) -> dict:
    return {**dev_stack_config(), "state": {"entryStacks": SPLIT}, **over}


FAKE = textwrap.dedent('''\
    #!{python}
    """A stand-in pulumi: records each call, answers from $FAKE_DIR."""
    import json, os, sys, time
    d = os.environ["FAKE_DIR"]
    args = sys.argv[1:]
    stack = args[args.index("--stack") + 1] if "--stack" in args else ""
    if args[:2] == ["stack", "history"]:
        print(json.dumps(json.load(open(os.path.join(d, "history", stack + ".json")))))
        sys.exit(0)
    if args[:2] == ["stack", "export"]:
        with open(os.path.join(d, "stack-calls.jsonl"), "a") as f:
            f.write(json.dumps(["stack", "export", stack]) + "\\n")
        print(json.dumps(json.load(open(os.path.join(d, "export", stack + ".json")))))
        sys.exit(0)
    if args[:2] == ["stack", "ls"]:
        print(json.dumps([{{"name": n[:-5]}} for n in sorted(os.listdir(os.path.join(d, "export")))]))
        sys.exit(0)
    if args[:2] == ["stack", "rm"]:
        with open(os.path.join(d, "stack-calls.jsonl"), "a") as f:
            f.write(json.dumps(["stack", "rm", stack]) + "\\n")
        os.unlink(os.path.join(d, "export", stack + ".json"))
        sys.exit(0)
    if args[:2] in (["stack", "select"], ["stack", "init"]):
        export = os.path.join(d, "export", args[2] + ".json")
        with open(os.path.join(d, "stack-calls.jsonl"), "a") as f:
            f.write(json.dumps(args[:3]) + "\\n")
        if args[1] == "init":
            json.dump({{"deployment": {{"resources": []}}}}, open(export, "w"))
            json.dump([], open(os.path.join(d, "history", args[2] + ".json"), "w"))
        elif not os.path.exists(export):
            sys.exit("error: no stack named '" + args[2] + "' found")
        sys.exit(0)
    start = time.time()
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    outputs = json.load(open(os.path.join(d, "outputs.json"))) if "." not in stack else {{}}
    log = args[args.index("--event-log") + 1]
    with open(log, "w") as f:
        f.write(json.dumps({{"resOutputsEvent": {{"metadata": {{"type": "pulumi:pulumi:Stack", "op": "same",
                "new": {{"outputs": outputs}}}}}}}}) + "\\n")
    with open(os.path.join(d, "calls.jsonl"), "a") as f:
        f.write(json.dumps({{"args": args, "stack": stack, "start": start, "end": time.time(),
                            "checked": os.environ.get("KNS_CHECKED")}}) + "\\n")
    sys.exit(int(os.environ.get("FAKE_FAIL_" + stack.replace(".", "_").replace("-", "_"), "0")))
''')


class Fake:
    def __init__(self, root: Path):
        self.dir = root / "fake"
        for sub in ("history", "export", "bin"):
            (self.dir / sub).mkdir(parents=True)
        script = self.dir / "bin" / "pulumi"
        script.write_text(FAKE.format(python=sys.executable))
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        # A config that passes the checks, which every run makes first.
        self.project = split_project(root)
        self.names = [stacks.entry_stack("dev", i) for i in range(SPLIT)]
        self.wanted = {s: f"digest-{s}" for s in self.names}
        (self.dir / "outputs.json").write_text(json.dumps({digests.CHECKED_OUTPUT: "checked-1",
                                                           digests.DIGESTS_OUTPUT: self.wanted}))
        for stack in self.names:
            self.record(stack, self.wanted[stack])

    def record(self, stack: str, digest, result: str = "succeeded", pending: bool = False) -> None:
        (self.dir / "history" / f"{stack}.json").write_text(json.dumps([{"kind": "update", "result": result}]))
        root = {"type": "pulumi:pulumi:Stack", "outputs": {digests.ENTRY_STACK_OUTPUT: digest} if digest else {}}
        deployment = {"resources": [root], **({"pending_operations": [{"type": "creating"}]} if pending else {})}
        (self.dir / "export" / f"{stack}.json").write_text(json.dumps({"deployment": deployment}))

    def run(self, capsys, action: str = "up", **env: str) -> tuple[int, str, list[dict]]:
        calls = self.dir / "calls.jsonl"
        calls.unlink(missing_ok=True)
        environ = {**os.environ, "PATH": f"{self.dir / 'bin'}:{os.environ['PATH']}", "FAKE_DIR": str(self.dir),
                   "PULUMI_BACKEND_URL": f"file://{self.dir}/backend", **env}
        code = fullrun.main([action, "--stack", "dev", "--log-dir", str(self.dir / "logs"), "--", "--yes"],
                            env=environ, cwd=self.project)
        captured = capsys.readouterr()
        out, self.err = captured.out, captured.err
        made = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
        return code, out, made


def stack_calls(fake: Fake) -> list[list[str]]:
    path = fake.dir / "stack-calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def split_project(root: Path, **over) -> Path:
    """A copy of the program with Pulumi.dev.yaml holding the split dev stack (`over`
    replacing sections), as `make up` finds it."""
    project = root / "project"
    project.mkdir(parents=True, exist_ok=True)
    for name in (*fingerprint.PROGRAM_FILES, "jobs"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy(source, project / name)
    config = split_config(**over)
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {f"kns:{k}": v for k, v in config.items()}},
                                                           sort_keys=False))
    return project
