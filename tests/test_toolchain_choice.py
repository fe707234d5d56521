"""Which toolchain scripts/toolchain.sh takes (issue 32, item 7), with stub binaries.

An installed `pulumi` of the pinned major version and at least the pinned version, with
its Python language host beside it, is used as it is; the Kubernetes provider comes from
the plugin cache (stamped with the patch it needs), else from `pulumi plugin install` when
it needs no patch, else from the build from Go modules. One line on stderr says which way
was taken; `--plan` prints that line and does nothing else.

Every run here has a PATH of stub directories and /usr/bin:/bin only, HOME, PULUMI_HOME,
KNS_TOOLS_DIR and TMPDIR under the test's tmp dir, and versions of its own (so the pin
moving does not move these tests). The stubs write each command line they get to one
record file; the stub `go` fails, so a run that reaches the build stops there, having
said so in the record.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from kns_testing.program import ROOT

SCRIPT = ROOT / "scripts" / "toolchain.sh"
PATCH = ROOT / "scripts" / "patches" / "pulumi-kubernetes-provider.patch"
CLI_PATCH = ROOT / "scripts" / "patches" / "pulumi-cli.patch"
PIN, K8S = "3.259.0", "4.25.0"
VERSIONS = (f"PULUMI_VERSION={PIN}\n"
            "PULUMI_COMMIT=a05d88f24d05726fa3beae771bfdedb0c0c6a94a\n"
            f"PULUMI_KUBERNETES_VERSION={K8S}\n"
            "PULUMI_KUBERNETES_PROVIDER_PSEUDO=v4.0.0-20260115033456-f47bc2d6f199\n")
SYSTEM_PATH = "/usr/bin:/bin"

# The stub CLI: answers `pulumi version` with $KNS_STUB_VERSION (its own copy, below) and
# does `pulumi plugin install` as the real one lays it out, or fails as an offline one.
STUB_PULUMI = r"""#!/bin/sh
echo "pulumi $* acquisition=${PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION:-unset}" >>"$KNS_STUB_RECORD"
case $1 in
version) echo "@VERSION@" ;;
plugin)
  [ "$2" = install ] || exit 2
  [ -z "${KNS_STUB_HANG:-}" ] || exec sleep 60
  if [ -n "${KNS_STUB_OFFLINE:-}" ] && [ "$6" != --file ]; then
    echo "error: could not get plugin: Get \"https://github.com/...\": dial tcp: no such host" >&2
    exit 255
  fi
  dir="$PULUMI_HOME/plugins/$3-$4-$5"
  mkdir -p "$dir"
  printf '#!/bin/sh\n' >"$dir/pulumi-$3-$4"
  chmod +x "$dir/pulumi-$3-$4"
  ;;
*) exit 2 ;;
esac
"""
STUB_GO = '#!/bin/sh\necho "go $*" >>"$KNS_STUB_RECORD"\necho "stub go: no network here" >&2\nexit 1\n'


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@dataclass
class World:
    tmp: Path
    env: dict[str, str]
    record: Path
    plugin_dir: Path
    bin_dir: Path  # where the build from Go modules puts the CLI

    def cli(self, version: str, where: str = "cli", host: bool = True, exec_script: bool = True) -> Path:
        """A stub Pulumi installation in tmp/<where>, put on PATH; its directory."""
        directory = self.tmp / where
        executable(directory / "pulumi", STUB_PULUMI.replace("@VERSION@", version))
        if host:
            executable(directory / "pulumi-language-python", "#!/bin/sh\nexit 0\n")
        if exec_script:
            (directory / "pulumi-language-python-exec").write_text("# the exec script\n")
        self.on_path(directory)
        return directory

    def on_path(self, directory: Path) -> None:
        self.env["PATH"] = f"{directory}:{self.env['PATH']}"

    def cached_provider(self, stamp: str | None) -> None:
        """The pinned provider in the plugin cache, with that patch stamp (None: without one)."""
        executable(self.plugin_dir / "pulumi-resource-kubernetes", "#!/bin/sh\n")
        if stamp is not None:
            (self.plugin_dir / ".kns-provider-patch").write_text(stamp + "\n")

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(SCRIPT), *args], env={**self.env, **env}, capture_output=True,
                              text=True, timeout=120, cwd=self.tmp)

    def calls(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def went_to_go(self) -> bool:
        return any(call.startswith("go ") for call in self.calls())

    def plugin_installs(self) -> list[str]:
        return [call for call in self.calls() if call.startswith("pulumi plugin install")]


def patch_rev() -> str:
    return hashlib.sha256(PATCH.read_bytes()).hexdigest()[:16]


@pytest.fixture
def world(tmp_path) -> World:
    for tool in ("pulumi", "go"):
        assert shutil.which(tool, path=SYSTEM_PATH) is None, f"{tool} in {SYSTEM_PATH} would be taken for a stub's"
    assert shutil.which("python3", path=SYSTEM_PATH), "the script needs python3 in /usr/bin or /bin"
    go_bin = tmp_path / "go-bin"
    executable(go_bin / "go", STUB_GO)
    (tmp_path / "versions.env").write_text(VERSIONS)
    (tmp_path / "home").mkdir()
    record = tmp_path / "calls.log"
    pulumi_home = tmp_path / "pulumi-home"
    tools = tmp_path / "tools"
    env = {
        "PATH": f"{go_bin}:{SYSTEM_PATH}",
        "HOME": str(tmp_path / "home"),
        "PULUMI_HOME": str(pulumi_home),
        "KNS_TOOLS_DIR": str(tools),
        "KNS_VERSIONS_FILE": str(tmp_path / "versions.env"),
        "KNS_STUB_RECORD": str(record),
        "TMPDIR": str(tmp_path),
        "LC_ALL": "C",
    }
    return World(tmp_path, env, record, pulumi_home / "plugins" / f"resource-kubernetes-v{K8S}",
                 tools / f"pulumi-{PIN}-k8s-{K8S}" / "bin")


def report(done: subprocess.CompletedProcess) -> str:
    """The one line that says which way was taken."""
    lines = [line for line in done.stderr.splitlines()
             if line.startswith("toolchain: ") and f"; kubernetes provider v{K8S} " in line]
    assert len(lines) == 1, done.stderr
    return lines[0]


def plan(world: World, **env: str) -> str:
    """`--plan`'s line; the run built, installed and printed on stdout nothing."""
    done = world.run("--plan", **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [report(done)], "--plan says one line and nothing else"
    assert not world.bin_dir.parent.exists() and not world.went_to_go() and not world.plugin_installs()
    return report(done).removeprefix("toolchain: plan: ")


# --- The CLI ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v3.260.1", f"v{PIN}", "v3.1000.0", "v3.260.0-alpha.1+g0123abc", "3.259.1"])
def test_an_installed_cli_of_the_pinned_major_and_not_older_is_used_as_it_is(world, version):
    cli = world.cli(version)
    world.cached_provider(patch_rev())
    done = world.run()
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{cli}\n"
    line = (f"toolchain: pulumi CLI {version} on PATH ({cli}); "
            f"kubernetes provider v{K8S} from the plugin cache (patched)")
    assert done.stderr.splitlines() == [line], "the fast path says one line and nothing else"
    assert not world.went_to_go() and not world.plugin_installs()
    assert not world.bin_dir.parent.exists(), "nothing was built or cached"
    assert plan(world) == line.removeprefix("toolchain: ")


@pytest.mark.parametrize("version, why", [
    ("v3.200.0", f"is older than v{PIN}"),
    ("v3.258.9", f"is older than v{PIN}"),
    (f"v{PIN}-rc.1", f"is older than v{PIN}"),
    ("v4.0.0", "is not major version 3"),
    ("v2.300.0", "is not major version 3"),
])
def test_an_installed_cli_older_than_the_pin_or_of_another_major_is_not_used(world, version, why):
    cli = world.cli(version)
    world.cached_provider(patch_rev())
    assert plan(world) == (f"pulumi CLI v{PIN} built from Go modules (patched) in {world.bin_dir} "
                           f"(pulumi {version} in {cli} {why}); "
                           f"kubernetes provider v{K8S} from the plugin cache (patched)")
    done = world.run()
    assert done.returncode != 0, "the stub go cannot build"
    assert f"go mod download -json github.com/pulumi/pulumi/pkg/v3@v{PIN}" in world.calls()
    assert world.calls()[0].startswith("pulumi version"), "the installed CLI was only asked its version"
    assert all(call.startswith(("pulumi version", "go ")) for call in world.calls()), world.calls()


def test_an_installed_cli_with_no_version_is_not_used(world):
    cli = world.cli("pulumi, a tool")
    assert plan(world).startswith(f"pulumi CLI v{PIN} built from Go modules (patched) in {world.bin_dir} "
                                  f"(pulumi in {cli} answers no version to `pulumi version`); ")


@pytest.mark.parametrize("missing", ["pulumi-language-python", "pulumi-language-python-exec"])
def test_an_installed_cli_without_its_language_host_beside_it_is_not_used(world, missing):
    cli = world.cli("v3.260.1", host=missing != "pulumi-language-python",
                    exec_script=missing != "pulumi-language-python-exec")
    world.cached_provider(patch_rev())
    assert plan(world) == (f"pulumi CLI v{PIN} built from Go modules (patched) in {world.bin_dir} "
                           f"(pulumi v3.260.1 in {cli} has no {missing} beside it); "
                           f"kubernetes provider v{K8S} from the plugin cache (patched)")
    done = world.run()
    assert done.returncode != 0 and world.went_to_go()


def test_a_linked_cli_is_used_from_the_directory_it_links_to(world):
    """`pulumi` linked into another directory on PATH: its host is looked for where it is."""
    cli = world.cli("v3.260.1", where="install")
    links = world.tmp / "links"
    links.mkdir()
    (links / "pulumi").symlink_to(cli / "pulumi")
    world.env["PATH"] = f"{links}:{world.env['PATH'].split(':', 1)[1]}"  # the link, not the install
    world.cached_provider(patch_rev())
    done = world.run()
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{cli}\n"
    assert report(done) == (f"toolchain: pulumi CLI v3.260.1 on PATH ({cli}); "
                            f"kubernetes provider v{K8S} from the plugin cache (patched)")


def test_with_no_installed_cli_everything_is_built(world):
    assert plan(world) == (f"pulumi CLI v{PIN} built from Go modules (patched) in {world.bin_dir}; "
                           f"kubernetes provider v{K8S} built from Go modules (patched)")
    done = world.run()
    assert done.returncode != 0 and world.went_to_go()


def cached_cli(world: World, stamp: str | None) -> Path:
    """A build of the pinned CLI in the cache, stamped with that CLI patch (None: no stamp)."""
    build = world.bin_dir
    executable(build / "pulumi", STUB_PULUMI.replace("@VERSION@", f"v{PIN}"))
    executable(build / "pulumi-language-python", "#!/bin/sh\n")
    (build / "pulumi-language-python-exec").write_text("")
    if stamp is not None:
        (build / ".pulumi-cli-patch").write_text(stamp + "\n")
    return build


def test_a_cached_build_is_used_and_said_to_be_cached(world):
    build = cached_cli(world, hashlib.sha256(CLI_PATCH.read_bytes()).hexdigest()[:16])
    world.cached_provider(patch_rev())
    line = (f"toolchain: pulumi CLI v{PIN} built from Go modules (patched) in {build} (cached); "
            f"kubernetes provider v{K8S} from the plugin cache (patched)")
    done = world.run()
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{build}\n"
    assert done.stderr.splitlines() == [line]
    # The same with that build on PATH (as after PATH="$(scripts/toolchain.sh):$PATH").
    world.on_path(build)
    done = world.run()
    assert done.returncode == 0 and done.stdout == f"{build}\n" and done.stderr.splitlines() == [line]
    assert not world.went_to_go()


@pytest.mark.parametrize("stamp", [None, "0123456789abcdef"], ids=["unstamped", "another patch"])
def test_a_cached_cli_without_this_cli_patch_is_built_again(world, stamp):
    """A cached CLI of the pinned version built before scripts/patches/pulumi-cli.patch, or
    with another revision of it, is not used: the run goes to the build (the stub go fails)."""
    cached_cli(world, stamp)
    world.cached_provider(patch_rev())
    planned = world.run("--plan")
    assert planned.returncode == 0 and report(planned).startswith(
        f"toolchain: plan: pulumi CLI v{PIN} built from Go modules (patched) in {world.bin_dir}; "), planned.stderr
    assert "(cached)" not in report(planned) and not world.went_to_go()
    done = world.run()
    assert done.returncode != 0 and world.went_to_go(), done.stderr
    assert f"cannot download github.com/pulumi/pulumi/pkg/v3@v{PIN}" in done.stderr, "it went for the CLI's source"


# --- The provider -------------------------------------------------------------------------

def test_the_provider_comes_from_the_plugin_cache_only_with_the_patch_it_needs(world):
    cli = world.cli("v3.260.1")
    on_path = f"pulumi CLI v3.260.1 on PATH ({cli})"
    world.cached_provider(stamp=None)  # e.g. a stock install: no patch
    assert plan(world) == f"{on_path}; kubernetes provider v{K8S} built from Go modules (patched)"
    world.cached_provider(stamp="0123456789abcdef")  # another patch
    assert plan(world) == f"{on_path}; kubernetes provider v{K8S} built from Go modules (patched)"
    world.cached_provider(stamp=patch_rev())
    assert plan(world) == f"{on_path}; kubernetes provider v{K8S} from the plugin cache (patched)"
    (world.plugin_dir.parent / f"{world.plugin_dir.name}.partial").write_text("")  # an install cut off
    assert plan(world) == f"{on_path}; kubernetes provider v{K8S} built from Go modules (patched)"


def test_a_provider_that_needs_no_patch_is_taken_from_the_cache_as_it_is(world):
    cli = world.cli("v3.260.1")
    world.cached_provider(stamp=None)
    done = world.run(KNS_PROVIDER_PATCH="none")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"toolchain: pulumi CLI v3.260.1 on PATH ({cli}); "
                                        f"kubernetes provider v{K8S} from the plugin cache"]
    assert not world.plugin_installs() and not world.went_to_go()


def test_pulumi_plugin_install_when_the_provider_needs_no_patch_and_the_cache_has_none(world):
    cli = world.cli("v3.260.1")
    assert plan(world, KNS_PROVIDER_PATCH="none") == (
        f"pulumi CLI v3.260.1 on PATH ({cli}); kubernetes provider v{K8S} "
        "installed with pulumi plugin install (built from Go modules if that fails)")
    done = world.run(KNS_PROVIDER_PATCH="none")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{cli}\n"
    assert done.stderr.splitlines() == [f"toolchain: pulumi CLI v3.260.1 on PATH ({cli}); "
                                        f"kubernetes provider v{K8S} installed with pulumi plugin install"]
    # the stock download, with acquisition allowed for it, and no build
    assert world.plugin_installs() == [f"pulumi plugin install resource kubernetes v{K8S} acquisition=unset"]
    assert (world.plugin_dir / "pulumi-resource-kubernetes").exists()
    assert not world.went_to_go()
    # and the next run finds it in the cache
    done = world.run(KNS_PROVIDER_PATCH="none")
    assert report(done).endswith(f"kubernetes provider v{K8S} from the plugin cache")
    assert len(world.plugin_installs()) == 1


def test_when_pulumi_plugin_install_cannot_reach_its_site_the_provider_is_built(world):
    world.cli("v3.260.1")
    done = world.run(KNS_PROVIDER_PATCH="none", KNS_STUB_OFFLINE="1")
    assert done.returncode != 0, "the stub go cannot build"
    assert f"pulumi plugin install of kubernetes v{K8S} failed (exit 255); building the provider from Go modules" \
        in done.stderr
    assert "no such host" in done.stderr, "what pulumi said is shown"
    calls = world.calls()
    install = calls.index(f"pulumi plugin install resource kubernetes v{K8S} acquisition=unset")
    build = [i for i, call in enumerate(calls) if call.startswith("go mod download -json "
                                                                  "github.com/pulumi/pulumi-kubernetes/provider/v4@")]
    assert build and install < build[0]
    assert not world.plugin_dir.exists()


def test_a_download_site_that_does_not_answer_is_given_up_on(world):
    world.cli("v3.260.1")
    done = world.run(KNS_PROVIDER_PATCH="none", KNS_STUB_HANG="1", KNS_PLUGIN_INSTALL_TIMEOUT="1")
    assert done.returncode != 0, "the stub go cannot build"
    assert f"pulumi plugin install of kubernetes v{K8S} had no answer in 1s; building the provider from Go modules" \
        in done.stderr
    assert world.plugin_installs() and world.went_to_go()


def test_with_plugin_install_off_the_stock_provider_is_built_without_trying_the_download(world):
    """What scripts/soak-faults.sh's control asks for: the unpatched provider, built."""
    world.cli("v3.260.1")
    done = world.run(KNS_PROVIDER_PATCH="none", KNS_PLUGIN_INSTALL="off")
    assert done.returncode != 0, "the stub go cannot build"
    assert not world.plugin_installs() and world.went_to_go()
    assert "pulumi plugin install" not in done.stderr


def test_a_provider_that_needs_the_patch_is_built_not_installed_with_pulumi_plugin_install(world):
    cli = world.cli("v3.260.1")
    assert plan(world) == (f"pulumi CLI v3.260.1 on PATH ({cli}); "
                           f"kubernetes provider v{K8S} built from Go modules (patched)")
    done = world.run()
    assert done.returncode != 0, "the stub go cannot build"
    assert not world.plugin_installs()
    assert any(call.startswith("go mod download -json github.com/pulumi/pulumi-kubernetes/provider/v4@")
               for call in world.calls())
    assert not any("github.com/pulumi/pulumi/pkg/v3" in call for call in world.calls()), "the CLI is not built"


def test_a_built_provider_is_installed_with_the_cli_on_path(world):
    """The provider build of an earlier run (cached, not yet in the plugin cache) goes in with
    `pulumi plugin install --file`, stamped with its patch."""
    cli = world.cli("v3.260.1")
    provider = world.bin_dir.parent / f"provider-{patch_rev()}" / "pulumi-resource-kubernetes"
    executable(provider, "#!/bin/sh\n")
    done = world.run()
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{cli}\n"
    assert report(done) == (f"toolchain: pulumi CLI v3.260.1 on PATH ({cli}); kubernetes provider v{K8S} "
                            f"built from Go modules (patched), cached in {provider.parent}")
    assert world.plugin_installs() == [f"pulumi plugin install resource kubernetes v{K8S} --file {provider} "
                                       "acquisition=true"]
    assert (world.plugin_dir / ".kns-provider-patch").read_text() == f"{patch_rev()}\n"
    assert not world.went_to_go()


def test_an_unknown_argument_is_refused(world):
    done = world.run("--plna")
    assert done.returncode != 0
    assert "unknown argument '--plna' (usage: scripts/toolchain.sh [--plan])" in done.stderr
    assert done.stdout == ""
